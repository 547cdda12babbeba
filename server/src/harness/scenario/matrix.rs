//! `z29c scenario matrix`: every scenario × every destination kind, one at a time, each on
//! fresh databases with a fresh destination service.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use destinations::Kind;
use serde::Serialize;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use uuid::Uuid;

use super::judge::judge;
use super::processes::{
    kill_on_acceptance, run_program, run_publisher, run_worker, stop, until_settled,
    worker_command, worker_until_first_delivery,
};
use super::setup::{database, delay_deliveries, destination};

/// Answers delayed to around the adapter's 1,000 ms deadline: no kill, only timing.
const TIMING: &str = "response_at_";
const TIMINGS_MS: [u64; 5] = [500, 900, 1_000, 1_100, 1_500];

/// Killed by the harness once the destination committed, before any answer.
const AFTER_ACCEPTANCE: &str = "after_acceptance_before_response";

/// PostgreSQL crashes and restarts under a running worker, which carries on.
const DATABASE_RESTART: &str = "database_restart";

/// A backup taken mid-run, the live system carried on, then the backup restored,
/// `z29c check --before-resume`, and workers resumed.
const RESTORE: &str = "restore_from_backup";

/// Workflows started under definition v1, the worker killed after the destination accepted,
/// and recovery by code whose newest definition is v2.
const RECOVERED_BY_V2: &str = "recovered_by_v2";

/// The seeds' first duplicate: the destination accepts and answers after the worker's
/// deadline, while a second worker process stands by.
const SEEDS_DUPLICATE: &str = "seeds_duplicate_delivery";

/// The named scenarios beyond the fault points and the timing sweep.
const NAMED: [&str; 4] = [DATABASE_RESTART, RESTORE, RECOVERED_BY_V2, SEEDS_DUPLICATE];

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

pub async fn matrix(args: MatrixArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        engine::failpoint::COMPILED_IN,
        "this z29c was built without failpoints; build it with `--features failpoints` (make scenarios does)"
    );
    let points: Vec<String> = if args.points.is_empty() {
        std::iter::once(AFTER_ACCEPTANCE.to_owned())
            .chain(engine::failpoint::POINTS.iter().map(|p| (*p).to_owned()))
            .chain(TIMINGS_MS.iter().map(|ms| format!("{TIMING}{ms}ms")))
            .chain(NAMED.iter().map(|p| (*p).to_owned()))
            .collect()
    } else {
        args.points.clone()
    };
    let db = crate::harness::bench::BenchDatabase::open().await?;
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
            verdicts.push(verdict);
        }
    }
    admin.close().await;
    db.close().await?;
    let failed = verdicts.iter().filter(|v| !v.violations.is_empty()).count();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&verdicts)?);
    } else {
        println!();
        println!(
            "{:<11} {:<36} {:<9} {:>6}  verdict",
            "kind", "scenario", "fault", "secs"
        );
        for v in &verdicts {
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
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
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

async fn run_one(
    db: &crate::harness::bench::BenchDatabase,
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
    let (url, mut pool) = database(db, admin, name).await?;
    engine::db::MIGRATOR.run(&pool).await?;
    let destination =
        destination(db, admin, &pool, &format!("{name}_dest"), kind_of, "docs").await?;
    let mut workflows = Vec::new();
    for n in 0..args.workflows {
        let started = engine::intake::start_workflow(
            &pool,
            engine::intake::NewWorkflow {
                creation_key: format!("{name}-{n}"),
                definition: engine::definition::DOCUMENT_DELIVERY.into(),
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

    // Bring each scenario to its fault point.
    let reached;
    let mut violations = Vec::new();
    match point {
        "during_compensation_acceptance" | "during_outbox_publication" => {
            // Deliveries first, without faults, then the part under test.
            run_worker(&url, None, rule, Duration::from_secs(60), Some(&pool)).await?;
            if point == "during_compensation_acceptance" {
                let approver = engine::operators::Operator {
                    id: Uuid::nil(),
                    username: "scenario".into(),
                    role: engine::domain::Role::Approver,
                };
                for w in &workflows {
                    let step: Uuid = sqlx::query_scalar(
                        "select id from step where workflow_id = $1 and logical = 'deliver'",
                    )
                    .bind(w)
                    .fetch_one(&pool)
                    .await?;
                    engine::operate::perform(
                        &pool,
                        engine::operate::Request {
                            operator: &approver,
                            step,
                            seen_version: None,
                            reason: "scenario: withdraw",
                            action: engine::operate::Action::Cancel,
                        },
                    )
                    .await?;
                }
                reached =
                    run_worker(&url, Some(point), rule, Duration::from_secs(30), None).await?;
            } else {
                reached = run_publisher(&url, Some(point), Duration::from_secs(20)).await?;
                run_publisher(&url, None, Duration::from_secs(3)).await?;
            }
        }
        DATABASE_RESTART => {
            let cluster = db.cluster().context(
                "a database restart needs the harness's own cluster: unset DATABASE_URL",
            )?;
            // Slow answers, so calls are in flight when the server goes down.
            delay_deliveries(&destination, 400, args.workflows * 2)?;
            let (mut child, seen) = worker_until_first_delivery(&url, rule, &destination).await?;
            cluster.crash_restart().await?;
            // The same worker process carries on once the server is back.
            let exited = until_settled(&mut child, Some(&pool), Duration::from_secs(60)).await?;
            stop(&mut child).await;
            reached = seen;
            if let Some(status) = exited {
                violations.push(format!(
                    "the worker process ended ({status}) when the database restarted"
                ));
            }
        }
        RESTORE => {
            let cluster = db.cluster().context(
                "a restore needs the harness's own cluster (pg_dump, pg_restore): unset DATABASE_URL",
            )?;
            delay_deliveries(&destination, 300, args.workflows * 2)?;
            let (mut child, _) = worker_until_first_delivery(&url, rule, &destination).await?;
            // The backup, taken while the live system works on.
            let dir = tempfile::tempdir()?;
            let backup = dir.path().join("backup.dump");
            run_program(
                cluster.program("pg_dump"),
                &["--format=custom", "--file", &backup.to_string_lossy(), &url],
            )
            .await?;
            // The live system finishes everything it can, then stops: the destination keeps it all.
            until_settled(&mut child, Some(&pool), Duration::from_secs(60)).await?;
            stop(&mut child).await;
            pool.close().await;
            sqlx::query(&format!("drop database {name} with (force)"))
                .execute(admin)
                .await?;
            sqlx::query(&format!("create database {name}"))
                .execute(admin)
                .await?;
            run_program(
                cluster.program("pg_restore"),
                &[
                    "--no-owner",
                    "--exit-on-error",
                    "--dbname",
                    &url,
                    &backup.to_string_lossy(),
                ],
            )
            .await?;
            pool = PgPoolOptions::new()
                .max_connections(8)
                .connect(&url)
                .await?;
            // The restore rewound steps the live system had finished.
            let rewound: i64 = sqlx::query_scalar(
                "select count(*) from step where kind <> 'pure' and state <> 'succeeded'",
            )
            .fetch_one(&pool)
            .await?;
            reached = rewound > 0;
            let mut check = tokio::process::Command::new(std::env::current_exe()?);
            check
                .args(["check", "--before-resume"])
                .env("DATABASE_URL", &url)
                .env("RUST_LOG", "warn")
                .stdout(std::process::Stdio::null());
            if let Some(rule) = &args.break_rule {
                check.env("Z29C_BREAK_RULE", rule);
            }
            let status = check.status().await?;
            anyhow::ensure!(
                status.success(),
                "`z29c check --before-resume` found violations in the restored database ({status})"
            );
        }
        SEEDS_DUPLICATE => {
            // Accepted, then answered well after the 1,000 ms deadline; two worker processes.
            delay_deliveries(&destination, 2_500, args.workflows)?;
            let mut first = worker_command(&url, None, rule)?.spawn()?;
            let mut second = worker_command(&url, None, rule)?.spawn()?;
            until_settled(&mut first, Some(&pool), Duration::from_secs(60)).await?;
            stop(&mut first).await;
            stop(&mut second).await;
            let unknown: i64 = sqlx::query_scalar(
                "select count(*) from attempt where outcome = 'outcome_unknown'",
            )
            .fetch_one(&pool)
            .await?;
            reached = unknown > 0;
        }
        p if p.starts_with(TIMING) => {
            let ms: u64 = p[TIMING.len()..]
                .trim_end_matches("ms")
                .parse()
                .context("a timing point is response_at_<ms>ms")?;
            delay_deliveries(&destination, ms, args.workflows * 2)?;
            // Nothing to kill: every answer lands around the deadline, and the workers settle it.
            reached = true;
        }
        _ => {
            let delay = match point {
                AFTER_ACCEPTANCE | RECOVERED_BY_V2 => Some(10_000),
                // A lookup happens only after an unknown outcome.
                "during_status_query" => Some(1_500),
                _ => None,
            };
            if let Some(ms) = delay {
                delay_deliveries(&destination, ms, args.workflows)?;
            }
            if matches!(point, AFTER_ACCEPTANCE | RECOVERED_BY_V2) {
                reached = kill_on_acceptance(&url, rule, &destination).await?;
                destination.clear_faults();
            } else {
                reached =
                    run_worker(&url, Some(point), rule, Duration::from_secs(30), None).await?;
            }
        }
    }
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
