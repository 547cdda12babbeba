//! `z29c scenario matrix`: every fault point × every destination kind, each as real processes —
//! a worker process killed with SIGKILL at a failpoint (or, after destination acceptance, by
//! the harness), then a fresh worker process recovering — judged from outside by comparing the
//! destination's own ledger with Z29C's receipts, step states and invariants.
//!
//! Beside the fault points: answers timed around the adapters' deadline, and named scenarios —
//! PostgreSQL crashing under a running worker, a backup restored after the live system went
//! on, recovery by code whose newest definition is v2, and the seeds' first duplicate.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use destinations::{Fault, FaultPlan, FaultRule, Kind, Match, Operation, RunningDestination};
use serde::Serialize;
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use uuid::Uuid;

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
    let db = crate::bench::BenchDatabase::open().await?;
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

async fn database(
    db: &crate::bench::BenchDatabase,
    admin: &PgPool,
    name: &str,
) -> anyhow::Result<(String, PgPool)> {
    sqlx::query(&format!("create database {name}"))
        .execute(admin)
        .await?;
    let options: PgConnectOptions = db.url.parse::<PgConnectOptions>()?.database(name);
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect_with(options)
        .await?;
    let url = {
        let (base, _) = db.url.rsplit_once('/').context("a database URL")?;
        format!("{base}/{name}")
    };
    Ok((url, pool))
}

async fn run_one(
    db: &crate::bench::BenchDatabase,
    admin: &PgPool,
    name: &str,
    kind: &str,
    point: &str,
    args: &MatrixArgs,
) -> anyhow::Result<Verdict> {
    let kind_of: Kind = kind.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
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
    let (_, dpool) = database(db, admin, &format!("{name}_dest")).await?;
    destinations::migrate(&dpool).await?;
    let destination = destinations::spawn(
        dpool,
        destinations::Config {
            visibility_window: Duration::from_millis(300),
            ..destinations::Config::new(kind_of)
        },
    )
    .await?;
    let contract = engine::contracts::declared(kind, 1_000, 300, false).context("a kind")?;
    engine::store::adapter::upsert(&pool, "docs", &destination.base_url(), &contract).await?;
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
    match point {
        "during_compensation_acceptance" | "during_outbox_publication" => {
            // Deliveries first, without faults, then the part under test.
            run_worker(&url, None, args, Duration::from_secs(60), Some(&pool)).await?;
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
                    run_worker(&url, Some(point), args, Duration::from_secs(30), None).await?;
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
            let mut accepted = destination.effects();
            let mut child = worker_command(&url, None, args)?.spawn()?;
            let seen = tokio::time::timeout(Duration::from_secs(30), accepted.recv()).await;
            cluster.crash_restart().await?;
            // The same worker process carries on once the server is back.
            let exited = until_settled(&mut child, Some(&pool), Duration::from_secs(60)).await?;
            stop(&mut child).await;
            reached = matches!(seen, Ok(Ok(_)));
            if let Some(status) = exited {
                return Ok(Verdict {
                    kind: kind.to_owned(),
                    point: point.to_owned(),
                    reached,
                    applicable: true,
                    seconds: 0.0,
                    violations: vec![format!(
                        "the worker process ended ({status}) when the database restarted"
                    )],
                });
            }
        }
        RESTORE => {
            let cluster = db.cluster().context(
                "a restore needs the harness's own cluster (pg_dump, pg_restore): unset DATABASE_URL",
            )?;
            delay_deliveries(&destination, 300, args.workflows * 2)?;
            let mut accepted = destination.effects();
            let mut child = worker_command(&url, None, args)?.spawn()?;
            let _ = tokio::time::timeout(Duration::from_secs(30), accepted.recv()).await;
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
            let mut first = worker_command(&url, None, args)?.spawn()?;
            let mut second = worker_command(&url, None, args)?.spawn()?;
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
                reached = kill_on_acceptance(&url, args, &destination).await?;
                destination.clear_faults();
            } else {
                reached =
                    run_worker(&url, Some(point), args, Duration::from_secs(30), None).await?;
            }
        }
    }
    // A fresh worker recovers (the lease of the killed one expires first).
    run_worker(&url, None, args, Duration::from_secs(60), Some(&pool)).await?;
    let mut violations = judge(&pool, &destination, kind_of, &workflows).await?;
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

/// Delays the destination's answer to the next `times` deliveries by `ms`.
fn delay_deliveries(destination: &RunningDestination, ms: u64, times: usize) -> anyhow::Result<()> {
    destination.set_faults(FaultPlan::rules([FaultRule::new(
        Operation::Deliver,
        Match::Any,
        Fault::DelayResponse { ms },
    )
    .times(u32::try_from(times).unwrap_or(u32::MAX))]))?;
    Ok(())
}

/// Runs a PostgreSQL client program to completion.
async fn run_program(program: std::path::PathBuf, args: &[&str]) -> anyhow::Result<()> {
    let output = tokio::process::Command::new(&program)
        .args(args)
        .output()
        .await
        .with_context(|| format!("running {}", program.display()))?;
    anyhow::ensure!(
        output.status.success(),
        "{} failed: {}",
        program.display(),
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(())
}

/// Waits, with `child` running, until every workflow in `settled_in` has settled or `limit`
/// passes; returns how the child ended if it did meanwhile.
async fn until_settled(
    child: &mut tokio::process::Child,
    settled_in: Option<&PgPool>,
    limit: Duration,
) -> anyhow::Result<Option<std::process::ExitStatus>> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        // Right after a restart the harness's own connections may still be failing.
        if let Some(pool) = settled_in
            && settled(pool).await.unwrap_or(false)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(None)
}

fn worker_command(
    url: &str,
    failpoint: Option<&str>,
    args: &MatrixArgs,
) -> anyhow::Result<tokio::process::Command> {
    let mut command = tokio::process::Command::new(std::env::current_exe()?);
    command
        .args(["worker", "--lease-secs", "2", "--concurrency", "4"])
        .env("DATABASE_URL", url)
        .env("RUST_LOG", "warn")
        .env_remove("Z29C_FAILPOINT")
        .kill_on_drop(true);
    if let Some(point) = failpoint {
        command.env("Z29C_FAILPOINT", point);
    }
    if let Some(rule) = &args.break_rule {
        command.env("Z29C_BREAK_RULE", rule);
    }
    Ok(command)
}

/// Runs a worker process: with a failpoint, until it is killed there (true) or `limit` passes
/// (false); without one, until every workflow has settled (`settled_in` given) or `limit`.
async fn run_worker(
    url: &str,
    failpoint: Option<&str>,
    args: &MatrixArgs,
    limit: Duration,
    settled_in: Option<&PgPool>,
) -> anyhow::Result<bool> {
    let mut child = worker_command(url, failpoint, args)?.spawn()?;
    supervise(&mut child, settled_in, limit).await
}

/// Watches `child` until it ends (true when by SIGKILL, as a failpoint ends it), or until
/// every workflow in `settled_in` has settled or `limit` passes (false, and it is stopped).
async fn supervise(
    child: &mut tokio::process::Child,
    settled_in: Option<&PgPool>,
    limit: Duration,
) -> anyhow::Result<bool> {
    Ok(match until_settled(child, settled_in, limit).await? {
        Some(status) => std::os::unix::process::ExitStatusExt::signal(&status) == Some(9),
        None => {
            stop(child).await;
            false
        }
    })
}

/// Runs `z29c serve --no-workers` (the outbox publisher) for a while, or until killed.
async fn run_publisher(
    url: &str,
    failpoint: Option<&str>,
    limit: Duration,
) -> anyhow::Result<bool> {
    let mut command = tokio::process::Command::new(std::env::current_exe()?);
    command
        .args(["serve", "--no-workers", "--addr", "127.0.0.1:0"])
        .env("DATABASE_URL", url)
        .env("RUST_LOG", "warn")
        .env_remove("Z29C_FAILPOINT")
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true);
    if let Some(point) = failpoint {
        command.env("Z29C_FAILPOINT", point);
    }
    let mut child = command.spawn()?;
    supervise(&mut child, None, limit).await
}

/// SIGKILLs a worker process as soon as the destination has committed a delivery.
async fn kill_on_acceptance(
    url: &str,
    args: &MatrixArgs,
    destination: &RunningDestination,
) -> anyhow::Result<bool> {
    let mut accepted = destination.effects();
    let mut child = worker_command(url, None, args)?.spawn()?;
    let seen = tokio::time::timeout(Duration::from_secs(30), accepted.recv()).await;
    child.start_kill()?;
    let _ = child.wait().await;
    Ok(matches!(seen, Ok(Ok(_))))
}

async fn stop(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id() {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(0));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    }
    if tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .is_err()
    {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
}

/// Nothing is left to do or in flight: every step settled or waits for a person.
async fn settled(pool: &PgPool) -> anyhow::Result<bool> {
    let busy: i64 = sqlx::query_scalar(
        "select count(*) from step s
         where s.state in ('ready', 'running', 'invoking', 'outcome_unknown')
            or (s.state = 'blocked' and not exists (
                   select 1 from step p where p.workflow_id = s.workflow_id and p.logical = any(s.depends_on)
                   and p.state in ('review_required', 'rejected', 'cancelled', 'waived')))",
    )
    .fetch_one(pool)
    .await?;
    Ok(busy == 0)
}

/// An external step as judged: logical name, state, request key, kind, receipt's reference.
type StepRow = (String, String, Option<String>, String, Option<String>);

/// The verdict from outside: the destination's ledger against Z29C's receipts and states.
async fn judge(
    pool: &PgPool,
    destination: &RunningDestination,
    kind: Kind,
    workflows: &[Uuid],
) -> anyhow::Result<Vec<String>> {
    let mut violations = Vec::new();
    let ledger = destination.ledger().await?;
    let found: i64 = sqlx::query_scalar("select count(*) from workflow where id = any($1)")
        .bind(workflows)
        .fetch_one(pool)
        .await?;
    if found != i64::try_from(workflows.len())? {
        violations.push(format!(
            "{} accepted workflow(s) lost",
            workflows.len() as i64 - found
        ));
    }
    let steps: Vec<StepRow> = sqlx::query_as(
        "select s.logical, s.state::text, s.request_key, s.kind::text, r.external_reference
         from step s left join receipt r on r.id = s.receipt_id
         where s.workflow_id = any($1) and s.kind <> 'pure'",
    )
    .bind(workflows)
    .fetch_all(pool)
    .await?;
    for (logical, state, key, step_kind, receipt) in steps {
        let key = key.unwrap_or_default();
        let effects: Vec<&String> = if step_kind == "compensation" {
            ledger
                .withdrawals
                .iter()
                .filter(|w| w.idempotency_key == key)
                .map(|w| &w.withdrawal_reference)
                .collect()
        } else {
            ledger
                .deliveries
                .iter()
                .filter(|d| d.client_reference == key)
                .map(|d| &d.external_reference)
                .collect()
        };
        let settled_by_receipt = state == "succeeded" && receipt.is_some();
        let provable = kind != Kind::Opaque;
        if provable && !settled_by_receipt && step_kind != "compensation" {
            violations.push(format!(
                "{logical} {key} is {state} without a receipt under a {kind} destination"
            ));
        }
        if effects.len() > 1 {
            violations.push(format!(
                "{logical} {key}: {} effects at the destination",
                effects.len()
            ));
        }
        if let Some(reference) = &receipt
            && step_kind != "compensation"
            && !effects.contains(&reference)
        {
            violations.push(format!(
                "{logical} {key}: receipt names {reference}, the destination holds {effects:?}"
            ));
        }
        if !settled_by_receipt
            && !matches!(
                state.as_str(),
                "review_required" | "blocked" | "cancelled" | "waived"
            )
        {
            violations.push(format!("{logical} {key} left {state}"));
        }
    }
    for v in engine::invariants::check(pool).await? {
        violations.push(format!("invariant {}: {}", v.kind, v.subject));
    }
    Ok(violations)
}

/// Settings of `z29c scenario soak`.
#[derive(Debug, Clone, clap::Args)]
pub struct SoakArgs {
    /// Seed of the kill schedule and the fault mix (the same seed, the same run).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Workflows, spread over the three destination kinds.
    #[arg(long, default_value_t = 2_000)]
    pub workflows: usize,
    /// Worker processes running at once.
    #[arg(long, default_value_t = 3)]
    pub workers: usize,
    /// Milliseconds between random SIGKILLs (each victim is replaced at once).
    #[arg(long, default_value_t = 2_000)]
    pub kill_every: u64,
    /// Also crash and restart PostgreSQL every this many milliseconds (workers carry on).
    #[arg(long)]
    pub restart_db_every: Option<u64>,
    /// Print the verdict as JSON.
    #[arg(long)]
    pub json: bool,
}

/// A small deterministic generator (xorshift64*), so a seed replays the same kills.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % (n.max(1) as u64)).unwrap_or(0)
    }
}

/// `z29c scenario soak`: N workflows over the three destination kinds, P worker processes, one
/// killed with SIGKILL every D ms and replaced, until every workflow has settled; then the same
/// verdict as the matrix, over every workflow.
pub async fn soak(args: SoakArgs) -> anyhow::Result<ExitCode> {
    let mut rng = Rng(args.seed.max(1));
    let db = crate::bench::BenchDatabase::open().await?;
    let admin = db.pool(2, false).await?;
    let name = format!("soak_{}", args.seed);
    let (url, pool) = database(&db, &admin, &name).await?;
    engine::db::MIGRATOR.run(&pool).await?;
    let mut destinations = Vec::new();
    for kind in [Kind::Idempotent, Kind::Queryable, Kind::Opaque] {
        let (_, dpool) = database(&db, &admin, &format!("{name}_{kind}")).await?;
        destinations::migrate(&dpool).await?;
        let destination = destinations::spawn(
            dpool,
            destinations::Config {
                visibility_window: Duration::from_millis(300),
                ..destinations::Config::new(kind)
            },
        )
        .await?;
        let contract =
            engine::contracts::declared(kind.as_str(), 1_000, 300, false).context("a kind")?;
        engine::store::adapter::upsert(&pool, kind.as_str(), &destination.base_url(), &contract)
            .await?;
        // Some answers come after the deadline: unknown outcomes to recover from.
        delay_deliveries(&destination, 1_500, args.workflows / 20)?;
        destinations.push((kind, destination));
    }
    let mut by_kind: Vec<Vec<Uuid>> = vec![Vec::new(); 3];
    for n in 0..args.workflows {
        let k = rng.below(3);
        let kind = destinations[k].0;
        let started = engine::intake::start_workflow(
            &pool,
            engine::intake::NewWorkflow {
                creation_key: format!("{name}-{n}"),
                definition: engine::definition::DOCUMENT_DELIVERY.into(),
                version: None,
                input: serde_json::json!({"adapter": kind.as_str(), "recipient": format!("r-{n}"),
                    "document": {"title": format!("Soak {n}"), "body": "soak"}}),
            },
            engine::store::journal::Actor::Engine("soak"),
        )
        .await?;
        let (engine::intake::Started::Created(w) | engine::intake::Started::Existing(w)) = started;
        by_kind[k].push(w.id);
    }
    let matrix_args = MatrixArgs {
        kinds: Vec::new(),
        points: Vec::new(),
        workflows: 0,
        json: false,
        break_rule: None,
    };
    let mut children = Vec::new();
    for _ in 0..args.workers {
        children.push(worker_command(&url, None, &matrix_args)?.spawn()?);
    }
    let started = Instant::now();
    let mut kills = 0;
    let mut next_kill = Instant::now() + Duration::from_millis(args.kill_every);
    let restart_every = args.restart_db_every.map(Duration::from_millis);
    let mut next_restart = restart_every.map(|every| Instant::now() + every);
    let mut restarts = 0;
    let total = i64::try_from(args.workflows)?;
    let mut done = 0;
    loop {
        // Right after a restart the harness's own connections may still be failing.
        if let Ok(now_done) = sqlx::query_scalar::<_, i64>(
            "select count(*) from workflow where state in ('completed', 'needs_review', 'cancelled')",
        )
        .fetch_one(&pool)
        .await
        {
            done = now_done;
        }
        if !args.json {
            eprint!(
                "\rsoak: {done}/{total} workflows settled, {kills} worker(s) killed, {restarts} database restart(s), {:.0} s   ",
                started.elapsed().as_secs_f64()
            );
        }
        if done >= total && settled(&pool).await.unwrap_or(false) {
            break;
        }
        if let (Some(at), Some(every)) = (next_restart, restart_every)
            && Instant::now() >= at
        {
            db.cluster()
                .context("--restart-db-every needs the harness's own cluster: unset DATABASE_URL")?
                .crash_restart()
                .await?;
            restarts += 1;
            next_restart = Some(Instant::now() + every);
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(1_800),
            "the soak did not settle in 30 minutes"
        );
        if Instant::now() >= next_kill {
            let victim = rng.below(children.len());
            let _ = children[victim].start_kill();
            let _ = children[victim].wait().await;
            children[victim] = worker_command(&url, None, &matrix_args)?.spawn()?;
            kills += 1;
            next_kill = Instant::now() + Duration::from_millis(args.kill_every);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for child in &mut children {
        stop(child).await;
    }
    let mut violations = Vec::new();
    for (i, (kind, destination)) in destinations.iter().enumerate() {
        violations.extend(judge(&pool, destination, *kind, &by_kind[i]).await?);
    }
    violations.dedup();
    let effects: usize = {
        let mut n = 0;
        for (_, d) in &destinations {
            n += d.ledger().await?.deliveries.len();
        }
        n
    };
    let waiting: i64 =
        sqlx::query_scalar("select count(*) from step where state = 'review_required'")
            .fetch_one(&pool)
            .await?;
    pool.close().await;
    admin.close().await;
    db.close().await?;
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        println!(
            "{}",
            serde_json::json!({"seed": args.seed, "workflows": args.workflows, "workers": args.workers,
                "kills": kills, "database_restarts": restarts, "seconds": seconds, "effects": effects, "waiting_for_review": waiting,
                "violations": violations})
        );
    } else {
        eprintln!();
        println!(
            "seed {}  workflows {}  worker processes {}  kill every {} ms",
            args.seed, args.workflows, args.workers, args.kill_every
        );
        println!(
            "workers killed {kills}  database restarts {restarts}  time {seconds:.0} s  deliveries at the destinations {effects}  steps waiting for review {waiting}"
        );
        println!("violations {}", violations.len());
        for v in violations.iter().take(20) {
            println!("  {v}");
        }
    }
    Ok(if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
