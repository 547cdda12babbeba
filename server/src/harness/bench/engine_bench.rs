//! `z29c bench engine`: full-protocol steps per second on this machine, beside the single-row
//! commit ceiling measured through the same pool.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use engine::adapter::Adapter;
use engine::adapter::registry::Adapters;
use engine::worker::{Worker, WorkerConfig};
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::ceiling::{ceiling, statement_calls, xacts};
use super::cluster::BenchDatabase;
use super::instant::InstantDestination;

/// Settings of `z29c bench engine`.
#[derive(Debug, Clone, clap::Args)]
pub struct EngineBenchArgs {
    /// Workflows to run (each: one pure step, two external steps).
    #[arg(long, default_value_t = 2_000)]
    pub workflows: usize,
    /// Worker tasks (each a `Worker` with its own lease holder).
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Steps in flight per worker.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Steps claimed per transaction.
    #[arg(long, default_value_t = 64)]
    pub batch: i64,
    /// Call the real HTTP idempotent destination on loopback instead of the in-process one.
    #[arg(long)]
    pub http: bool,
    /// Seconds the single-row ceiling is measured for.
    #[arg(long, default_value_t = 5)]
    pub ceiling_secs: u64,
}

/// One measured run.
struct EngineRun {
    label: &'static str,
    external_steps_per_sec: f64,
    steps_per_sec: f64,
    p50_ms: f64,
    p99_ms: f64,
    xacts_per_step: f64,
    /// Statements (each a round trip) per step, when `pg_stat_statements` is loaded.
    statements_per_step: Option<f64>,
    ceiling_tps: f64,
}

/// Runs the engine bench twice (durable commits, then `synchronous_commit=off`) and prints the
/// table.
pub async fn engine(args: EngineBenchArgs) -> anyhow::Result<()> {
    let db = BenchDatabase::open().await?;
    let size = u32::try_from(args.workers * args.concurrency + 8).unwrap_or(64);
    {
        let pool = db.pool(size, false).await?;
        engine::db::MIGRATOR
            .run(&pool)
            .await
            .context("migrating the bench database")?;
        crate::harness::shipped::apply_definitions(&pool).await?;
    }
    let destination = if args.http {
        Some(http_destination(&db).await?)
    } else {
        None
    };
    let mut runs = Vec::new();
    for (label, async_commit) in [
        ("durable commits (default)", false),
        ("synchronous_commit=off", true),
    ] {
        let pool = db.pool(size, async_commit).await?;
        runs.push(
            engine_run(
                &pool,
                &args,
                label,
                destination.as_ref().map(|d| d.base_url()),
            )
            .await?,
        );
        pool.close().await;
    }
    print_runs(&args, &runs);
    db.close().await
}

/// The real idempotent destination on loopback, on its own database beside the bench's.
async fn http_destination(db: &BenchDatabase) -> anyhow::Result<destinations::RunningDestination> {
    let setup = db.pool(4, false).await?;
    sqlx::query("drop database if exists z29c_bench_destination")
        .execute(&setup)
        .await?;
    sqlx::query("create database z29c_bench_destination")
        .execute(&setup)
        .await?;
    let mut options: PgConnectOptions = db.url.parse()?;
    options = options.database("z29c_bench_destination");
    let dpool = PgPoolOptions::new()
        .max_connections(16)
        .connect_with(options)
        .await?;
    destinations::migrate(&dpool).await?;
    Ok(destinations::spawn(
        dpool,
        destinations::Config::new(destinations::Kind::Idempotent),
    )
    .await?)
}

/// The table of runs, with what each column means.
fn print_runs(args: &EngineBenchArgs, runs: &[EngineRun]) {
    println!();
    println!(
        "z29c bench engine: {} workflows ({} external steps), {} worker task(s) × {} in flight, batch {}, destination {}",
        args.workflows,
        args.workflows * 2,
        args.workers,
        args.concurrency,
        args.batch,
        if args.http {
            "HTTP on loopback"
        } else {
            "in process"
        }
    );
    println!(
        "{:<28} {:>12} {:>10} {:>9} {:>9} {:>10} {:>10} {:>12} {:>8}",
        "",
        "ext steps/s",
        "steps/s",
        "p50 ms",
        "p99 ms",
        "xacts/step",
        "stmts/step",
        "ceiling tps",
        "ratio"
    );
    for r in runs {
        println!(
            "{:<28} {:>12.0} {:>10.0} {:>9.1} {:>9.1} {:>10.2} {:>10} {:>12.0} {:>7.2}×",
            r.label,
            r.external_steps_per_sec,
            r.steps_per_sec,
            r.p50_ms,
            r.p99_ms,
            r.xacts_per_step,
            r.statements_per_step
                .map_or("n/a".to_owned(), |s| format!("{s:.1}")),
            r.ceiling_tps,
            r.external_steps_per_sec / r.ceiling_tps.max(1.0)
        );
    }
    println!(
        "latency: from the moment a step's dependency settled (it became ready) to its receipt"
    );
    println!(
        "stmts/step: statements per step by pg_stat_statements (each a round trip; BEGIN/COMMIT included); n/a when not loaded"
    );
    println!(
        "ratio: full-protocol (external) steps per second ÷ single-row UPDATE transactions per second, same pool, same concurrency"
    );
}

/// One measured run: registers a fresh adapter, seeds the workflows, times workers through
/// them, then measures the ceiling through the same pool.
async fn engine_run(
    pool: &PgPool,
    args: &EngineBenchArgs,
    label: &'static str,
    http: Option<String>,
) -> anyhow::Result<EngineRun> {
    let (adapter, adapters) = register_adapter(pool, http).await?;

    // Seed: intake is not what is measured.
    let tag = uuid::Uuid::new_v4().simple().to_string();
    seed(pool, args, label, &adapter, &tag).await?;

    let completed_before = completed(pool).await?;
    let xacts_before = xacts(pool).await?;
    let calls_before = statement_calls(pool).await;
    let elapsed = run_workers(pool, args, &adapters, completed_before).await?;
    let xacts_after = xacts(pool).await?;
    let calls_after = statement_calls(pool).await;
    let (p50, p99) = latency(pool, &tag).await?;
    let ceiling_tps = ceiling(pool, args.workers * args.concurrency, args.ceiling_secs).await?;
    Ok(EngineRun {
        label,
        external_steps_per_sec: (args.workflows * 2) as f64 / elapsed,
        steps_per_sec: (args.workflows * 3) as f64 / elapsed,
        p50_ms: p50,
        p99_ms: p99,
        xacts_per_step: (xacts_after - xacts_before) as f64 / (args.workflows * 3) as f64,
        statements_per_step: calls_before
            .zip(calls_after)
            .map(|(before, after)| (after - before) as f64 / (args.workflows * 3) as f64),
        ceiling_tps,
    })
}

/// Registers a fresh idempotent adapter, reaching `http` or else the in-process destination;
/// returns its name and the adapters the workers get.
async fn register_adapter(
    pool: &PgPool,
    http: Option<String>,
) -> anyhow::Result<(String, Adapters)> {
    let contract = engine::adapter::contracts::declared(
        engine::domain::ContractKind::Idempotent,
        5_000,
        0,
        false,
    );
    let adapter = format!("bench-{}", uuid::Uuid::new_v4().simple());
    let url = http.clone().unwrap_or_else(|| "http://127.0.0.1:9".into());
    let version = engine::store::adapter::upsert(pool, &adapter, &url, &contract).await?;
    let mut adapters = Adapters::default();
    let destination: Arc<dyn Adapter> = match &http {
        Some(url) => Arc::new(engine::adapter::protocol::protocol_adapter(url, &contract)),
        None => Arc::new(InstantDestination { contract }),
    };
    adapters.insert(adapter.clone(), destination, version);
    Ok((adapter, adapters))
}

/// Starts `args.workflows` workflows through `adapter` from eight tasks, their creation keys
/// tagged with `tag`.
async fn seed(
    pool: &PgPool,
    args: &EngineBenchArgs,
    label: &str,
    adapter: &str,
    tag: &str,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut seeding = tokio::task::JoinSet::new();
    let per_task = args.workflows.div_ceil(8);
    for t in 0..8 {
        let (pool, adapter, tag) = (pool.clone(), adapter.to_owned(), tag.to_owned());
        let range = (t * per_task)..((t + 1) * per_task).min(args.workflows);
        seeding.spawn(async move {
            for i in range {
                engine::intake::start_workflow(
                    &pool,
                    engine::intake::NewWorkflow {
                        creation_key: format!("bench-{tag}-{i}"),
                        definition: "document_delivery".into(),
                        version: None,
                        input: serde_json::json!({"adapter": adapter, "recipient": format!("r-{i}"),
                            "document": {"title": format!("Document {i}"), "body": "benchmark"}}),
                    },
                    engine::store::journal::Actor::Engine("bench"),
                )
                .await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = seeding.join_next().await {
        done??;
    }
    eprintln!(
        "{label}: seeded {} workflows in {:.1} s",
        args.workflows,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs `args.workers` workers until every seeded workflow has completed, then stops them;
/// returns the seconds that took.
async fn run_workers(
    pool: &PgPool,
    args: &EngineBenchArgs,
    adapters: &Adapters,
    completed_before: i64,
) -> anyhow::Result<f64> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut workers = Vec::new();
    let started = Instant::now();
    for w in 0..args.workers {
        let mut config = WorkerConfig::named(format!("bench-{w}"));
        config.batch = args.batch;
        config.concurrency = args.concurrency;
        config.idle_poll = Duration::from_millis(5);
        config.invariant_interval = Duration::from_secs(3_600);
        let worker = Worker::new(pool.clone(), config, adapters.clone());
        let mut stopped = stopped.clone();
        workers.push(tokio::spawn(worker.run(async move {
            let _ = stopped.wait_for(|s| *s).await;
        })));
    }
    // Done when every bench workflow completed; counted through `workflow_state_idx`, so the
    // watching costs the database next to nothing.
    let total = i64::try_from(args.workflows)? + completed_before;
    loop {
        let done = completed(pool).await?;
        if done >= total {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(900),
            "the bench did not finish in 15 minutes ({} of {} workflows)",
            done - completed_before,
            args.workflows
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let _ = stop.send(true);
    for w in workers {
        w.await?;
    }
    Ok(elapsed)
}

/// p50 and p99, in milliseconds, from a step becoming ready to its receipt, over the
/// workflows tagged `tag`.
async fn latency(pool: &PgPool, tag: &str) -> anyhow::Result<(f64, f64)> {
    let (p50, p99): (f64, f64) = sqlx::query_as(
        r#"with lat as (
               select extract(epoch from r.created_at - coalesce(dr.created_at, pa.ended_at)) * 1000 as ms
               from step s
               join workflow w on w.id = s.workflow_id and w.creation_key like $1
               join receipt r on r.step_id = s.id
               join step d on d.workflow_id = s.workflow_id and d.logical = any(s.depends_on)
               left join receipt dr on dr.step_id = d.id
               left join attempt pa on pa.step_id = d.id and d.kind = 'pure'
           )
           select percentile_cont(0.5) within group (order by ms)::float8,
                  percentile_cont(0.99) within group (order by ms)::float8 from lat"#,
    )
    .bind(format!("bench-{tag}-%"))
    .fetch_one(pool)
    .await?;
    Ok((p50, p99))
}

/// Workflows completed so far, in this database.
async fn completed(pool: &PgPool) -> anyhow::Result<i64> {
    Ok(
        sqlx::query_scalar("select count(*) from workflow where state = 'completed'")
            .fetch_one(pool)
            .await?,
    )
}
