//! `z29c scenario matrix`: every scenario × every destination kind, one at a time, each on
//! fresh databases with a fresh destination service.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use destinations::Kind;
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use super::fault_points::{
    AFTER_ACCEPTANCE, DATABASE_RESTART, NAMED, RECOVERED_BY_V2, RESTORE, SEEDS_DUPLICATE, Stage,
    TIMING, TIMINGS_MS,
};
use super::judge::judge;
use super::processes::run_worker;
use super::setup::{database, destination};
use crate::harness::bench::BenchDatabase;

/// Settings of `z29c scenario matrix`.
#[derive(Debug, Clone, clap::Args)]
pub struct MatrixArgs {
    /// Destination kinds to run against.
    #[arg(long, value_delimiter = ',', default_values_t = ["idempotent".to_owned(), "queryable".to_owned(), "opaque".to_owned()])]
    pub kinds: Vec<String>,
    /// Fault points (default: all).
    #[arg(long, value_delimiter = ',')]
    pub points: Vec<String>,
    /// Workflows per scenario.
    #[arg(long, default_value_t = 3)]
    pub workflows: usize,
    /// Print the verdicts as JSON.
    #[arg(long)]
    pub json: bool,
    /// Run with a deliberately broken recovery rule (`resend_opaque`, `regenerate_with_newest`,
    /// `resume_blind`): the scenarios it concerns must fail.
    #[arg(long)]
    pub break_rule: Option<String>,
}

/// One scenario's verdict.
#[derive(Debug, Clone, Serialize)]
struct Verdict {
    kind: String,
    point: String,
    /// The kill happened where it was meant to.
    reached: bool,
    /// False where the contract has no such point (no status lookup without one).
    applicable: bool,
    seconds: f64,
    violations: Vec<String>,
}

/// Runs every chosen scenario against every chosen kind and prints the verdicts; fails when
/// any verdict has a violation.
pub async fn matrix(args: MatrixArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        engine::failpoint::COMPILED_IN,
        "this z29c was built without failpoints; build it with `--features failpoints` (make scenarios does)"
    );
    let points = points(&args);
    let db = BenchDatabase::open().await?;
    let admin = db.pool(2, false).await?;
    let mut verdicts = Vec::new();
    for (i, kind) in args.kinds.iter().enumerate() {
        for (j, point) in points.iter().enumerate() {
            let name = format!(
                "scenario_{i}_{j}_{}",
                &Uuid::new_v4().simple().to_string()[..6]
            );
            let started = Instant::now();
            let verdict = run_one(&db, &admin, &name, kind, point, &args).await;
            let verdict = match verdict {
                Ok(v) => v,
                Err(error) => Verdict {
                    kind: kind.clone(),
                    point: point.clone(),
                    reached: false,
                    applicable: true,
                    seconds: 0.0,
                    violations: vec![format!("the scenario could not run: {error:#}")],
                },
            };
            let verdict = Verdict {
                seconds: started.elapsed().as_secs_f64(),
                ..verdict
            };
            if !args.json {
                print_progress(&verdict);
            }
            verdicts.push(verdict);
        }
    }
    admin.close().await;
    db.close().await?;
    let failed = verdicts.iter().filter(|v| !v.violations.is_empty()).count();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&verdicts)?);
    } else {
        print_table(&verdicts, failed);
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The fault points asked for; by default the harness's own, the failpoints, the timing sweep
/// and the named scenarios.
fn points(args: &MatrixArgs) -> Vec<String> {
    if args.points.is_empty() {
        std::iter::once(AFTER_ACCEPTANCE.to_owned())
            .chain(
                engine::failpoint::POINTS
                    .iter()
                    .map(|p| p.name().to_owned()),
            )
            .chain(TIMINGS_MS.iter().map(|ms| format!("{TIMING}{ms}ms")))
            .chain(NAMED.iter().map(|p| (*p).to_owned()))
            .collect()
    } else {
        args.points.clone()
    }
}

/// One verdict as it comes, on standard error.
fn print_progress(verdict: &Verdict) {
    eprintln!(
        "{:<11} {:<36} {:<9} {}",
        verdict.kind,
        verdict.point,
        if verdict.reached {
            what_happened(&verdict.point)
        } else {
            "—"
        },
        if verdict.violations.is_empty() {
            "ok".to_owned()
        } else {
            verdict.violations.join("; ")
        }
    );
}

/// Every verdict, then how many had violations.
fn print_table(verdicts: &[Verdict], failed: usize) {
    println!();
    println!(
        "{:<11} {:<36} {:<9} {:>6}  verdict",
        "kind", "scenario", "fault", "secs"
    );
    for v in verdicts {
        println!(
            "{:<11} {:<36} {:<9} {:>6.1}  {}",
            v.kind,
            v.point,
            match (v.applicable, v.reached) {
                (false, _) => "n/a",
                (true, true) => what_happened(&v.point),
                (true, false) => "not hit",
            },
            v.seconds,
            if v.violations.is_empty() {
                "ok".to_owned()
            } else {
                v.violations.join("; ")
            }
        );
    }
    println!("{} scenario(s), {failed} with violations", verdicts.len());
}

/// What the harness did to the scenario once it reached its point.
fn what_happened(point: &str) -> &'static str {
    match point {
        p if p.starts_with(TIMING) => "timed",
        DATABASE_RESTART => "restarted",
        RESTORE => "restored",
        SEEDS_DUPLICATE => "late",
        _ => "killed",
    }
}

/// One scenario: fresh databases and destination, workflows started, the fault point
/// reached, a fresh worker recovering, then the verdict.
async fn run_one(
    db: &BenchDatabase,
    admin: &PgPool,
    name: &str,
    kind: &str,
    point: &str,
    args: &MatrixArgs,
) -> anyhow::Result<Verdict> {
    let kind_of: Kind = kind.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
    let rule = args.break_rule.as_deref();
    if point == "during_status_query" && kind_of != Kind::Queryable {
        return Ok(Verdict {
            kind: kind.to_owned(),
            point: point.to_owned(),
            reached: false,
            applicable: false,
            seconds: 0.0,
            violations: Vec::new(),
        });
    }
    let (url, pool) = database(db, admin, name).await?;
    engine::db::MIGRATOR.run(&pool).await?;
    crate::harness::shipped::apply_definitions(&pool).await?;
    let destination =
        destination(db, admin, &pool, &format!("{name}_dest"), kind_of, "docs").await?;
    let workflows = start_workflows(&pool, name, point, args.workflows).await?;
    let mut stage = Stage {
        db,
        admin,
        name,
        url,
        pool,
        destination,
        point,
        workflows: args.workflows,
        rule,
    };

    // Bring each scenario to its fault point.
    let (reached, mut violations) = stage.reach_point(&workflows).await?;
    let Stage {
        url,
        pool,
        destination,
        ..
    } = stage;
    // A fresh worker recovers (the lease of the killed one expires first).
    run_worker(&url, None, rule, Duration::from_secs(60), Some(&pool)).await?;
    violations.extend(judge(&pool, &destination, kind_of, &workflows).await?);
    violations.extend(expectations(&pool, point, kind_of, &workflows).await?);
    if !reached {
        violations.push("the fault point was never reached: the scenario tested nothing".into());
    }
    pool.close().await;
    Ok(Verdict {
        kind: kind.to_owned(),
        point: point.to_owned(),
        reached,
        applicable: true,
        seconds: 0.0,
        violations,
    })
}

/// Starts `count` workflows through adapter `docs`, keyed `{name}-{n}`; under v1 for
/// [`RECOVERED_BY_V2`].
async fn start_workflows(
    pool: &PgPool,
    name: &str,
    point: &str,
    count: usize,
) -> anyhow::Result<Vec<Uuid>> {
    let mut workflows = Vec::new();
    for n in 0..count {
        let started = engine::intake::start_workflow(
            pool,
            engine::intake::NewWorkflow {
                creation_key: format!("{name}-{n}"),
                definition: "document_delivery".into(),
                // As the previous deployment, which knew only v1, started them.
                version: (point == RECOVERED_BY_V2).then_some(1),
                input: serde_json::json!({"adapter": "docs", "recipient": format!("r-{n}"),
                    "document": {"title": format!("Scenario {n}"), "body": "fault"}}),
            },
            engine::store::journal::Actor::Engine("scenario"),
        )
        .await?;
        let (engine::intake::Started::Created(w) | engine::intake::Started::Existing(w)) = started;
        workflows.push(w.id);
    }
    Ok(workflows)
}

/// What a named scenario expects beyond the common verdict.
async fn expectations(
    pool: &PgPool,
    point: &str,
    kind: Kind,
    workflows: &[Uuid],
) -> anyhow::Result<Vec<String>> {
    let mut violations = Vec::new();
    match point {
        RECOVERED_BY_V2 => {
            let other: i64 = sqlx::query_scalar(
                "select count(*) from receipt where workflow_id = any($1) and definition_version <> 1",
            )
            .bind(workflows)
            .fetch_one(pool)
            .await?;
            if other > 0 {
                violations.push(format!(
                    "{other} receipt(s) of v1 workflows name another definition version"
                ));
            }
        }
        SEEDS_DUPLICATE if kind == Kind::Opaque => {
            let waiting: i64 = sqlx::query_scalar(
                "select count(*) from step where workflow_id = any($1) and logical = 'deliver'
                 and state = 'review_required'",
            )
            .bind(workflows)
            .fetch_one(pool)
            .await?;
            if waiting != i64::try_from(workflows.len())? {
                violations.push(format!(
                    "{waiting} of {} late-answered opaque deliveries wait for review",
                    workflows.len()
                ));
            }
        }
        _ => {}
    }
    Ok(violations)
}
