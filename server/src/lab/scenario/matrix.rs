//! `z29c scenario matrix`: every scenario × every destination, one at a time, each on fresh
//! databases with a fresh destination service. The payments API and the webhook receiver run
//! a representative subset of the scenarios unless `--all-points` asks for every one.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use super::fault_points::{
    AFTER_ACCEPTANCE, ARCHIVE_WRITE, DATABASE_RESTART, NAMED, RECOVERED_BY_V2, RESTORE,
    RESTORE_ARCHIVED, RESTORE_MID_FLIGHT_ARCHIVED, SEEDS_DUPLICATE, Stage, TIMING, TIMINGS_MS,
    archive_dir, backup,
};
use super::judge::judge;
use super::processes::run_worker;
use super::setup::{database, drop_databases};
use super::target::{self, Target};
use crate::lab::bench::BenchDatabase;

/// Settings of `z29c scenario matrix`.
#[derive(Debug, Clone, clap::Args)]
pub struct MatrixArgs {
    /// Destinations to run against: the protocol's kinds, `payments`, `payments-basic` (a
    /// provider that ignores keys and has no search), `webhook`.
    #[arg(long, value_delimiter = ',', default_values_t = Target::ALL.map(|t| t.as_str().to_owned()))]
    pub kinds: Vec<String>,
    /// Fault points (default: all for the protocol's kinds, a representative subset for
    /// `payments` and `webhook`).
    #[arg(long, value_delimiter = ',')]
    pub points: Vec<String>,
    /// Without `--points`: every fault point for `payments` and `webhook` too.
    #[arg(long)]
    pub all_points: bool,
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
    let db = BenchDatabase::open().await?;
    let admin = db.pool(2, false).await?;
    let mut verdicts = Vec::new();
    for (i, kind) in args.kinds.iter().enumerate() {
        for (j, point) in points(&args, kind).iter().enumerate() {
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
            // A failed scenario's databases stay for whoever looks into it.
            if verdict.violations.is_empty()
                && let Err(error) = drop_databases(&admin, &name).await
            {
                tracing::warn!(%error, scenario = %name, "could not drop the scenario's databases");
            }
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
        print_table(&verdicts);
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// What `payments` and `webhook` run by default: a batch claimed and never sent, an answer
/// lost after the commit, the worker killed before it observed an answer, a refund's
/// acceptance, an answer just past the deadline, and the first duplicate delivery.
const REPRESENTATIVE: [&str; 6] = [
    "after_batch_claim",
    AFTER_ACCEPTANCE,
    "after_response_before_observation",
    "during_compensation_acceptance",
    "response_at_1100ms",
    SEEDS_DUPLICATE,
];

/// The fault points asked for `kind`; by default the harness's own, the failpoints, the timing
/// sweep and the named scenarios (a representative subset for `payments`, `payments-basic` and
/// `webhook`).
fn points(args: &MatrixArgs, kind: &str) -> Vec<String> {
    let protocol = !matches!(kind, "payments" | "payments-basic" | "webhook");
    if args.points.is_empty() && !protocol && !args.all_points {
        let mut points: Vec<String> = REPRESENTATIVE.iter().map(|p| (*p).to_owned()).collect();
        // A provider without keys recovers lost answers by walking its list: under that claim
        // too, a worker dies mid-lookup.
        if kind == "payments-basic" {
            points.push("during_status_query".to_owned());
        }
        points
    } else if args.points.is_empty() {
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
        "{:<14} {:<36} {:<9} {}",
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

/// Every verdict, then how many had violations and which.
fn print_table(verdicts: &[Verdict]) {
    println!();
    println!(
        "{:<14} {:<36} {:<9} {:>6}  verdict",
        "kind", "scenario", "fault", "secs"
    );
    for v in verdicts {
        println!(
            "{:<14} {:<36} {:<9} {:>6.1}  {}",
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
    println!("{}", summary(verdicts));
}

/// How many scenarios ran and how many had violations, naming those again: the last line, which
/// is what a log's tail keeps.
fn summary(verdicts: &[Verdict]) -> String {
    let failed: Vec<String> = verdicts
        .iter()
        .filter(|v| !v.violations.is_empty())
        .map(|v| format!("{} {}", v.kind, v.point))
        .collect();
    let mut line = format!(
        "{} scenario(s), {} with violations",
        verdicts.len(),
        failed.len()
    );
    if !failed.is_empty() {
        line = format!("{line}: {}", failed.join(", "));
    }
    line
}

/// What the harness did to the scenario once it reached its point.
fn what_happened(point: &str) -> &'static str {
    match point {
        p if p.starts_with(TIMING) => "timed",
        DATABASE_RESTART => "restarted",
        RESTORE | RESTORE_ARCHIVED | RESTORE_MID_FLIGHT_ARCHIVED => "restored",
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
    let target = Target::parse(kind)?;
    let rule = args.break_rule.as_deref();
    let applicable = match point {
        "during_status_query" => target.recovers_by_lookup(),
        "during_compensation_acceptance" => target.has_withdrawal(),
        RECOVERED_BY_V2 => target.has_v2(),
        // A provider that keeps keys for a day keeps its workflows hot as long.
        ARCHIVE_WRITE | RESTORE_ARCHIVED | RESTORE_MID_FLIGHT_ARCHIVED => {
            !kind.starts_with("payments")
        }
        _ => true,
    };
    if !applicable {
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
    crate::shipped::apply_definitions(&pool).await?;
    target::apply_definitions(&pool).await?;
    let running = target::start(db, admin, &pool, &format!("{name}_dest"), target, "docs").await?;
    let backup = match point {
        RESTORE_ARCHIVED => Some(backup(db, &url).await?),
        _ => None,
    };
    let workflows = start_workflows(&pool, target, name, point, args.workflows).await?;
    let mut stage = Stage {
        db,
        admin,
        name,
        url,
        pool,
        running,
        point,
        workflows: args.workflows,
        rule,
        backup,
    };

    // Bring each scenario to its fault point.
    let (reached, mut violations) = stage.reach_point(&workflows).await?;
    let Stage {
        url, pool, running, ..
    } = stage;
    // A fresh worker recovers (the lease of the killed one expires first).
    run_worker(&url, None, rule, Duration::from_secs(60), Some(&pool)).await?;
    let archive = engine::archive::ArchiveDir::at(archive_dir(name));
    violations.extend(judge(&pool, &running, &workflows, Some(&archive)).await?);
    violations.extend(expectations(&pool, point, target, &workflows).await?);
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

/// Starts `count` workflows against `target` (the protocol's kinds through adapter `docs`),
/// keyed `{name}-{n}`; under v1 for [`RECOVERED_BY_V2`].
async fn start_workflows(
    pool: &PgPool,
    target: Target,
    name: &str,
    point: &str,
    count: usize,
) -> anyhow::Result<Vec<Uuid>> {
    let mut workflows = Vec::new();
    for n in 0..count {
        let new = engine::intake::NewWorkflow {
            // As the previous deployment, which knew only v1, started them.
            version: (point == RECOVERED_BY_V2).then_some(1),
            ..target.workflow(name, n, "docs")
        };
        let started = engine::intake::start_workflow(
            pool,
            new,
            engine::store::journal::Actor::Engine("scenario"),
        )
        .await?;
        workflows.push(started.id());
    }
    Ok(workflows)
}

/// What a named scenario expects beyond the common verdict.
async fn expectations(
    pool: &PgPool,
    point: &str,
    target: Target,
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
        SEEDS_DUPLICATE if !target.provable() => {
            let waiting: i64 = sqlx::query_scalar(
                "select count(*) from step where workflow_id = any($1) and logical = $2
                 and state = 'review_required'",
            )
            .bind(workflows)
            .bind(target.first_step())
            .fetch_one(pool)
            .await?;
            if waiting != i64::try_from(workflows.len())? {
                violations.push(format!(
                    "{waiting} of {} late-answered opaque {}s wait for review",
                    workflows.len(),
                    target.first_step()
                ));
            }
        }
        // Nothing was sent when the worker died: whatever the contract, no step may be in
        // doubt, so none waits for a person.
        "after_batch_claim" => {
            let waiting: i64 = sqlx::query_scalar(
                "select count(*) from step where workflow_id = any($1) and state = 'review_required'",
            )
            .bind(workflows)
            .fetch_one(pool)
            .await?;
            if waiting > 0 {
                violations.push(format!(
                    "{waiting} step(s) claimed and never sent wait for review"
                ));
            }
        }
        _ => {}
    }
    Ok(violations)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(kind: &str, point: &str, violations: &[&str]) -> Verdict {
        Verdict {
            kind: kind.into(),
            point: point.into(),
            reached: true,
            applicable: true,
            seconds: 1.0,
            violations: violations.iter().map(|v| (*v).to_owned()).collect(),
        }
    }

    #[test]
    fn the_last_line_names_each_scenario_with_violations() {
        let verdicts = [
            verdict("idempotent", "database_restart", &[]),
            verdict(
                "queryable",
                "restore_from_backup",
                &["deliver left outcome_unknown"],
            ),
            verdict(
                "opaque",
                "after_batch_claim",
                &["1 step(s) wait for review", "lost"],
            ),
        ];
        assert_eq!(
            summary(&verdicts),
            "3 scenario(s), 2 with violations: queryable restore_from_backup, opaque after_batch_claim"
        );
        assert_eq!(summary(&verdicts[..1]), "1 scenario(s), 0 with violations");
    }
}
