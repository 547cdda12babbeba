//! `z29c scenario soak`: many workflows, several worker processes, random kills.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use sqlx::PgPool;
use uuid::Uuid;

use super::holds::Holds;
use super::judge::judge;
use super::processes::{settled, stop, worker_command};
use super::setup::{database, delay_deliveries};
use super::target::{self, Running, Target};
use crate::lab::bench::BenchDatabase;

/// Settings of `z29c scenario soak`.
#[derive(Debug, Clone, clap::Args)]
pub struct SoakArgs {
    /// Seed of the kill schedule and the fault mix (the same seed, the same run).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Workflows, spread over the five destinations.
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
    /// Also hold a random destination's adapter every this many milliseconds, and resume it
    /// as many later (one at a time); each hold is judged from the destination's ledger.
    #[arg(long, value_parser = clap::value_parser!(u64).range(7_000..))]
    pub hold_every: Option<u64>,
    /// Print the verdict as JSON.
    #[arg(long)]
    pub json: bool,
}

/// One destination's line of the final table.
#[derive(Debug, serde::Serialize)]
struct KindRow {
    kind: &'static str,
    workflows: usize,
    /// Effects the destination's own ledger holds: deliveries, charges or events.
    deliveries: usize,
    /// External steps settled by a receipt.
    receipts: i64,
    waiting_for_review: i64,
    violations: usize,
}

/// `[#####·····]`: how much of `total` is done.
fn progress_bar(done: i64, total: i64) -> String {
    const WIDTH: i64 = 30;
    let filled = if total > 0 {
        (done.clamp(0, total) * WIDTH) / total
    } else {
        WIDTH
    };
    let filled = usize::try_from(filled).unwrap_or(0);
    format!(
        "[{}{}]",
        "#".repeat(filled),
        "·".repeat(usize::try_from(WIDTH).unwrap_or(0) - filled)
    )
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

/// `z29c scenario soak`: N workflows over the five destinations, P worker processes, one
/// killed with SIGKILL every D ms and replaced, until every workflow has settled; then the same
/// verdict as the matrix, over every workflow.
pub async fn soak(args: SoakArgs) -> anyhow::Result<ExitCode> {
    let mut rng = Rng(args.seed.max(1));
    let db = BenchDatabase::open().await?;
    let admin = db.pool(2, false).await?;
    let name = format!("soak_{}", args.seed);
    let (url, pool) = database(&db, &admin, &name).await?;
    engine::db::MIGRATOR.run(&pool).await?;
    crate::shipped::apply_definitions(&pool).await?;
    target::apply_definitions(&pool).await?;
    let destinations = start_destinations(&db, &admin, &pool, &name, args.workflows).await?;
    let by_kind = start_workflows(&pool, &name, &mut rng, &destinations, args.workflows).await?;
    let run = kill_until_settled(&args, &db, &url, &pool, &mut rng, &destinations).await?;
    let (rows, mut violations) = judge_kinds(&pool, &destinations, &by_kind).await?;
    violations.extend(run.holds.violations.iter().cloned());
    pool.close().await;
    admin.close().await;
    db.close().await?;
    let seconds = run.started.elapsed().as_secs_f64();
    if args.json {
        println!(
            "{}",
            serde_json::json!({"seed": args.seed, "workflows": args.workflows, "workers": args.workers,
                "kills": run.kills, "database_restarts": run.restarts, "holds": run.holds.taken,
                "seconds": seconds, "by_kind": rows, "violations": violations})
        );
    } else {
        print_verdict(&args, &run, seconds, &rows, &violations);
    }
    Ok(if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// One destination of each of the five, a few of whose answers come after the deadline.
async fn start_destinations(
    db: &BenchDatabase,
    admin: &PgPool,
    pool: &PgPool,
    name: &str,
    workflows: usize,
) -> anyhow::Result<Vec<Running>> {
    let mut destinations = Vec::new();
    for target in Target::ALL {
        let running = target::start(
            db,
            admin,
            pool,
            &format!("{name}_{}", target.as_str()),
            target,
            target.adapter(),
        )
        .await?;
        // Some answers come after the deadline: unknown outcomes to recover from.
        delay_deliveries(&running.main, 1_500, workflows / 20)?;
        destinations.push(running);
    }
    Ok(destinations)
}

/// Starts `count` workflows, each through a destination drawn from `rng`; returns their ids
/// by destination.
async fn start_workflows(
    pool: &PgPool,
    name: &str,
    rng: &mut Rng,
    destinations: &[Running],
    count: usize,
) -> anyhow::Result<Vec<Vec<Uuid>>> {
    let mut by_kind: Vec<Vec<Uuid>> = vec![Vec::new(); destinations.len()];
    for n in 0..count {
        let k = rng.below(destinations.len());
        let target = destinations[k].target;
        let started = engine::intake::start_workflow(
            pool,
            target.workflow(name, n, target.adapter()),
            engine::store::journal::Actor::Engine("soak"),
        )
        .await?;
        by_kind[k].push(started.id());
    }
    Ok(by_kind)
}

/// What the kill schedule did: when the workers started, how many were killed, how often the
/// database restarted.
struct KillRun {
    started: Instant,
    kills: usize,
    restarts: usize,
    holds: Holds,
}

/// Runs `args.workers` worker processes, SIGKILLs one every `args.kill_every` ms (and crashes
/// PostgreSQL every `args.restart_db_every` ms, if set), replacing each victim at once, until
/// every workflow has settled; then stops them.
async fn kill_until_settled(
    args: &SoakArgs,
    db: &BenchDatabase,
    url: &str,
    pool: &PgPool,
    rng: &mut Rng,
    destinations: &[Running],
) -> anyhow::Result<KillRun> {
    let mut holds = Holds::every(Duration::from_millis(
        args.hold_every.unwrap_or(u64::MAX / 4),
    ));
    let mut children = Vec::new();
    for _ in 0..args.workers {
        children.push(worker_command(url, None, None)?.spawn()?);
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
        done = settled_workflows(pool).await.unwrap_or(done);
        if !args.json {
            eprint!(
                "\r{} {done}/{total} workflows settled · {kills} worker(s) killed · {restarts} database restart(s) · {:.0} s ",
                progress_bar(done, total),
                started.elapsed().as_secs_f64()
            );
        }
        if done >= total && settled(pool).await.unwrap_or(false) {
            break;
        }
        if args.hold_every.is_some()
            && let Err(error) = holds
                .tick(pool, destinations, rng.below(destinations.len()))
                .await
        {
            tracing::warn!(%error, "the soak's hold or resume failed; trying again");
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
            children[victim] = worker_command(url, None, None)?.spawn()?;
            kills += 1;
            next_kill = Instant::now() + Duration::from_millis(args.kill_every);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for child in &mut children {
        stop(child).await;
    }
    holds.resume(pool, destinations).await?;
    Ok(KillRun {
        started,
        kills,
        restarts,
        holds,
    })
}

/// How many workflows are settled: completed, cancelled or waiting for a person.
async fn settled_workflows(pool: &PgPool) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "select count(*) from workflow where state in ('completed', 'needs_review', 'cancelled')",
    )
    .fetch_one(pool)
    .await
}

/// The matrix's verdict for each destination's workflows, with its line of the table.
async fn judge_kinds(
    pool: &PgPool,
    destinations: &[Running],
    by_kind: &[Vec<Uuid>],
) -> anyhow::Result<(Vec<KindRow>, Vec<String>)> {
    let mut violations = Vec::new();
    let mut rows = Vec::new();
    for (i, running) in destinations.iter().enumerate() {
        let found = judge(pool, running, &by_kind[i], None).await?;
        let (receipts, waiting): (i64, i64) = sqlx::query_as(
            "select count(*) filter (where receipt_id is not null),
                    count(*) filter (where state = 'review_required')
             from step where workflow_id = any($1) and kind <> 'pure'",
        )
        .bind(&by_kind[i])
        .fetch_one(pool)
        .await?;
        rows.push(KindRow {
            kind: running.target.as_str(),
            workflows: by_kind[i].len(),
            deliveries: running.effect_count().await?,
            receipts,
            waiting_for_review: waiting,
            violations: found.len(),
        });
        violations.extend(found);
    }
    Ok((rows, violations))
}

/// The run's settings and figures, the table by kind, and the first twenty violations.
fn print_verdict(
    args: &SoakArgs,
    run: &KillRun,
    seconds: f64,
    rows: &[KindRow],
    violations: &[String],
) {
    let (kills, restarts) = (run.kills, run.restarts);
    eprintln!();
    println!(
        "seed {}  workflows {}  worker processes {}  kill every {} ms  workers killed {kills}  database restarts {restarts}  adapter holds {}  {seconds:.0} s",
        args.seed, args.workflows, args.workers, args.kill_every, run.holds.taken
    );
    println!();
    println!(
        "{:<14} {:>9} {:>11} {:>9} {:>19} {:>11}",
        "destination", "workflows", "effects", "receipts", "waiting for review", "violations"
    );
    for r in rows {
        println!(
            "{:<14} {:>9} {:>11} {:>9} {:>19} {:>11}",
            r.kind, r.workflows, r.deliveries, r.receipts, r.waiting_for_review, r.violations
        );
    }
    for v in violations.iter().take(20) {
        println!("  {v}");
    }
}
