//! `z29c bench engine`: the whole system's external steps per second on this machine, beside
//! the single-row commit ceiling measured in the same run.
//!
//! The system is what a deployment runs: workflows admitted through intake, worker processes
//! (1, 2 and 4 by default, children of this binary), and the outbox publisher with every
//! standard consumer. A run lasts until every workflow has completed *and* its status
//! projection says so; what PostgreSQL counted meanwhile is divided by the external steps.

use std::time::{Duration, Instant};

use anyhow::Context;
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::ceiling::ceiling;
use super::cluster::BenchDatabase;
use super::cpu::CpuSnapshot;
use super::drive::{Driven, Prepared};
use super::fleet::{EngineWorkerArgs, bench_contract};
use super::pgstats::Snapshot;

/// Settings of `z29c bench engine`.
#[derive(Debug, Clone, clap::Args)]
pub struct EngineBenchArgs {
    /// Workflows per run (each: one pure step, two external steps).
    #[arg(long, default_value_t = 2_000)]
    pub workflows: usize,
    /// Worker process counts, one run each.
    #[arg(long, value_delimiter = ',', default_values_t = [1_usize, 2, 4])]
    pub processes: Vec<usize>,
    /// Steps in flight per worker process.
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
    /// Connections the ceiling is measured with.
    #[arg(long, default_value_t = 32)]
    pub ceiling_clients: usize,
    /// Limit the bench's adapter to this many requests a second (an approver's override) and
    /// report the destination's busiest second; needs `--http`.
    #[arg(long, value_name = "R", requires = "http")]
    pub limit_rps: Option<f64>,
    /// Before each run, load this many workflows settled two months ago and archive them
    /// during the run (the engine with the archiver beside it).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub archiving: usize,
    /// With `--archiving`: load the same history but leave the archiver off, for the run to set
    /// beside the archiving one (both then start from the same tables).
    #[arg(long)]
    pub archiver_off: bool,
}

/// One measured run.
struct EngineRun {
    processes: usize,
    elapsed: f64,
    external_steps: usize,
    p50_ms: f64,
    p99_ms: f64,
    stats: Snapshot,
    cpu: CpuSnapshot,
    ceiling_tps: f64,
    /// With `--limit-rps`: the most calls the destination accepted in any one second.
    busiest_second: Option<usize>,
    /// With `--archiving`: the workflows the archiver moved during the run.
    archived: Option<i64>,
}

impl EngineRun {
    fn external_per_sec(&self) -> f64 {
        self.external_steps as f64 / self.elapsed
    }

    fn per_step(&self, n: i64) -> f64 {
        n as f64 / self.external_steps as f64
    }
}

/// Runs the bench once per process count and prints the table.
pub async fn engine(args: EngineBenchArgs) -> anyhow::Result<()> {
    let db = BenchDatabase::open().await?;
    {
        let pool = db.pool(4, false).await?;
        engine::db::MIGRATOR
            .run(&pool)
            .await
            .context("migrating the bench database")?;
        crate::shipped::apply_definitions(&pool).await?;
        if args.archiving > 0 {
            super::load::register_adapters(&pool).await?;
        }
        pool.close().await;
    }
    let destination = if args.http {
        Some(http_destination(&db).await?)
    } else {
        None
    };
    let mut runs = Vec::new();
    for (run, &processes) in args.processes.iter().enumerate() {
        runs.push(system_run(&db, &args, run, processes, destination.as_ref()).await?);
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
    setup.close().await;
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

/// A fresh adapter and `args.workflows` workflows admitted under it, with statistics; what
/// the worker processes are started with.
pub(super) async fn admit(
    db: &BenchDatabase,
    args: &EngineBenchArgs,
    processes: usize,
    tag: &str,
    http: Option<String>,
) -> anyhow::Result<EngineWorkerArgs> {
    let adapter = format!("bench-{tag}");
    let seeding = db.pool(16, false).await?;
    let url = http.clone().unwrap_or_else(|| "http://127.0.0.1:9".into());
    let contract_version =
        engine::adapter::apply::register_trusted(&seeding, &adapter, &url, &bench_contract())
            .await?;
    seed(&seeding, args.workflows, &adapter, tag).await?;
    // Tables filled a moment ago have no statistics yet, and plans made without them scan
    // (a projection read took 12× longer in a measured run). Autovacuum would analyze them
    // within a minute of a real load; the bench does it at once.
    sqlx::query("analyze").execute(&seeding).await?;
    // The watch reads the kept workflow counts; folded now, what it reads is the run's own
    // changes, a few rows per flush.
    engine::read::stats::fold_counts(&seeding).await?;
    // Everything the seeding did is counted before the run starts: its connections close.
    seeding.close().await;
    Ok(EngineWorkerArgs {
        adapter,
        contract_version,
        http,
        batch: args.batch,
        concurrency: args.concurrency,
        name: format!("bench-{processes}p"),
    })
}

/// One run: [`admit`], then `processes` worker processes and the publisher (and with
/// `--archiving` the archiver) until every workflow's projection is current.
async fn system_run(
    db: &BenchDatabase,
    args: &EngineBenchArgs,
    run: usize,
    processes: usize,
    destination: Option<&destinations::RunningDestination>,
) -> anyhow::Result<EngineRun> {
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let since = chrono::Utc::now();
    let http = destination.map(|d| d.base_url());
    let worker = admit(db, args, processes, &tag, http).await?;
    if let Some(rps) = args.limit_rps {
        let pool = db.pool(2, false).await?;
        super::limit_bench::impose(&pool, &worker.adapter, rps).await?;
        pool.close().await;
    }
    if args.archiving > 0 {
        super::beside::load_eligible(db, run, args.archiving).await?;
    }
    let prepared = Prepared::new(db, &worker, processes, args.workflows, since).await?;
    let data_dir = db.cluster().map(|c| c.data_dir().to_owned());
    let cpu_before = CpuSnapshot::take(data_dir.as_deref());
    let before = Snapshot::take(&db.url).await?;
    let beside = match args.archiving {
        0 => None,
        _ if args.archiver_off => None,
        _ => Some(super::beside::Beside::start(db).await?),
    };
    let Driven {
        elapsed,
        polls,
        began,
    } = prepared.run(db).await?;
    let archived = match beside {
        Some(beside) => Some(beside.stop().await?),
        None => None,
    };
    // Exiting backends publish their counts; give them a moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut stats = before.until(Snapshot::take(&db.url).await?);
    stats.commits -= polls;
    let cpu = cpu_before.until(CpuSnapshot::take(data_dir.as_deref()));

    let pool = db
        .pool(u32::try_from(args.ceiling_clients)? + 2, false)
        .await?;
    let (p50_ms, p99_ms) = latency(&pool, &tag, began).await?;
    let ceiling_tps = ceiling(&pool, args.ceiling_clients, args.ceiling_secs).await?;
    pool.close().await;
    let busiest_second = match (args.limit_rps, destination) {
        (Some(_), Some(d)) => Some(super::limit_bench::busiest_second(d, began).await?),
        _ => None,
    };
    Ok(EngineRun {
        processes,
        elapsed,
        external_steps: args.workflows * 2,
        p50_ms,
        p99_ms,
        stats,
        cpu,
        ceiling_tps,
        busiest_second,
        archived,
    })
}

/// Admits `workflows` workflows through `adapter` from eight tasks, their creation keys tagged
/// with `tag`.
async fn seed(pool: &PgPool, workflows: usize, adapter: &str, tag: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut seeding = tokio::task::JoinSet::new();
    let per_task = workflows.div_ceil(8);
    for t in 0..8 {
        let (pool, adapter, tag) = (pool.clone(), adapter.to_owned(), tag.to_owned());
        let range = (t * per_task)..((t + 1) * per_task).min(workflows);
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
        "admitted {workflows} workflows in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// p50 and p99, in milliseconds, from a step becoming ready (or the run's start at `began`, for
/// a step ready since admission) to its receipt, over the workflows tagged `tag`.
async fn latency(
    pool: &PgPool,
    tag: &str,
    began: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<(f64, f64)> {
    let (p50, p99): (f64, f64) = sqlx::query_as(
        r#"with lat as (
               -- A pure dependency settles when its step last changed (it never changes after).
               select extract(epoch from r.created_at - greatest(coalesce(dr.created_at, d.updated_at), $2)) * 1000 as ms
               from step s
               join workflow w on w.id = s.workflow_id and w.creation_key like $1
               join receipt r on r.step_id = s.id
               join step d on d.workflow_id = s.workflow_id and d.logical = any(s.depends_on)
               left join receipt dr on dr.step_id = d.id
           )
           select percentile_cont(0.5) within group (order by ms)::float8,
                  percentile_cont(0.99) within group (order by ms)::float8 from lat"#,
    )
    .bind(format!("bench-{tag}-%"))
    .bind(began)
    .fetch_one(pool)
    .await?;
    Ok((p50, p99))
}

/// The table of runs, with what each column means.
fn print_runs(args: &EngineBenchArgs, runs: &[EngineRun]) {
    println!();
    println!(
        "z29c bench engine: {} workflows per run ({} external steps), {} in flight per process, batch {}, destination {}",
        args.workflows,
        args.workflows * 2,
        args.concurrency,
        args.batch,
        if args.http {
            "HTTP on loopback"
        } else {
            "in process"
        }
    );
    println!(
        "{:>9} {:>11} {:>8} {:>8} {:>9} {:>10} {:>9} {:>9} {:>6} {:>11} {:>7}",
        "processes",
        "ext steps/s",
        "p50 ms",
        "p99 ms",
        "stmts/ext",
        "commits/ext",
        "rows/ext",
        "idx/ext",
        "HOT %",
        "ceiling tps",
        "ratio"
    );
    for r in runs {
        let s = &r.stats;
        println!(
            "{:>9} {:>11.0} {:>8.1} {:>8.1} {:>9} {:>10.2} {:>9.1} {:>9.1} {:>6.0} {:>11.0} {:>6.2}×",
            r.processes,
            r.external_per_sec(),
            r.p50_ms,
            r.p99_ms,
            s.statements
                .map_or("n/a".to_owned(), |n| format!("{:.2}", r.per_step(n))),
            r.per_step(s.commits),
            r.per_step(s.rows_written),
            r.per_step(s.index_entries),
            100.0 * s.hot_updates as f64 / s.updates.max(1) as f64,
            r.ceiling_tps,
            r.external_per_sec() / r.ceiling_tps.max(1.0)
        );
    }
    println!(
        "the run: from the workers' start to the last workflow completed with its status projection current and the outbox drained"
    );
    println!(
        "latency: from the moment a step's dependency settled (it became ready), or the run's start for a step ready since admission, to its receipt"
    );
    println!(
        "per external step (÷ {} each run), workers, publisher and consumers together: statements by pg_stat_statements (BEGIN/COMMIT included; n/a when not loaded), commits, rows inserted/updated/deleted, index entries written (upper bound), HOT share of updates",
        args.workflows * 2
    );
    println!(
        "ratio: external steps per second ÷ single-row UPDATE commits per second ({} connections, measured right after the run)",
        args.ceiling_clients
    );
    print_archiving(args, runs);
    if let Some(rps) = args.limit_rps {
        for r in runs {
            println!(
                "limit {rps} requests/s, {} worker process(es): the destination's busiest second took {} calls",
                r.processes,
                r.busiest_second.unwrap_or_default()
            );
        }
    }
    print_cpu(runs);
    print_tables(runs);
}

/// Rows written per external step, table by table, the largest first: where `rows/ext` comes
/// from.
fn print_tables(runs: &[EngineRun]) {
    for r in runs {
        let mut tables: Vec<_> = r.stats.tables.iter().collect();
        tables.sort_by_key(|(_, rows)| std::cmp::Reverse(**rows));
        let by_table: Vec<String> = tables
            .iter()
            .map(|(table, rows)| format!("{table} {:.2}", r.per_step(**rows)))
            .collect();
        println!(
            "rows per external step by table, {} process(es): {}",
            r.processes,
            by_table.join(", ")
        );
    }
}

/// With `--archiving`: what the archiver moved beside each run.
fn print_archiving(args: &EngineBenchArgs, runs: &[EngineRun]) {
    if args.archiving > 0 && args.archiver_off {
        println!(
            "{} workflows past their retention loaded before each run, the archiver off",
            args.archiving
        );
    }
    for r in runs {
        if let Some(archived) = r.archived {
            println!(
                "archiver beside {} worker process(es): {archived} of {} eligible workflows archived during the run ({:.0}/s); its rows and index entries are in the columns above",
                r.processes,
                args.archiving,
                archived as f64 / r.elapsed
            );
        }
    }
}

/// Where each run's CPU went, per external step, and how busy it kept the machine's cores.
fn print_cpu(runs: &[EngineRun]) {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    println!();
    println!(
        "{:>9} {:>14} {:>14} {:>14} {:>9}",
        "processes", "PostgreSQL µs", "workers µs", "bench µs", "busy %"
    );
    for r in runs {
        let c = r.cpu;
        let per_step = |secs: f64| format!("{:.0}", secs * 1e6 / r.external_steps as f64);
        // Without PostgreSQL's share the machine's load is unknown, not low.
        let busy = c.postgres.map_or("n/a".to_owned(), |postgres| {
            let total = postgres + c.children + c.own;
            format!("{:.0}", 100.0 * total / (r.elapsed * cores as f64))
        });
        println!(
            "{:>9} {:>14} {:>14} {:>14} {:>9}",
            r.processes,
            c.postgres.map_or("n/a".to_owned(), per_step),
            per_step(c.children),
            per_step(c.own),
            busy
        );
    }
    println!(
        "CPU per external step: PostgreSQL's processes (n/a on a server the bench did not start), the worker processes (with the destination when it is in process), and the bench's own (the publisher and its consumers, the bench's polls, and with --http the destination server); busy: all of it ÷ (the run × {cores} cores), the CPU outside the run included (the workers' start, the last snapshot)"
    );
}
