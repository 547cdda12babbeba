//! `z29c bench retention` (docs/DESIGN.md §21): simulated days of traffic loaded oldest first,
//! the archiver run after each day with the policy as it stands that day, and what a team would
//! watch: the hot tables' size against their size once the policy's first window filled, the
//! archiver's throughput against the intake, and the console's pages at the end — timed beside
//! the paced archiver service — against the same pages at 10k workflows.

use std::io::Write;
use std::time::{Duration, Instant};

use engine::archive::{ArchiveDir, Archiver, Moved, Policy};
use sqlx::PgPool;

use super::beside::Beside;
use super::cluster::BenchDatabase;
use super::console_bench::{serve, time_pages};
use super::load::{load_aged, register_adapters};
use super::session::Session;

/// The tables a settled workflow's rows live in.
const HOT: [&str; 10] = [
    "workflow",
    "step",
    "external_request",
    "attempt_start",
    "observation",
    "receipt",
    "integrity_incident",
    "incident_reference",
    "status_projection",
    "audit",
];

const DAY: u64 = 86_400;

#[derive(Debug, clap::Args)]
pub struct RetentionBenchArgs {
    /// Workflows a simulated day brings (about 1.1 % stay in review or with an incident).
    #[arg(long, default_value_t = 100_000)]
    pub per_day: usize,
    /// Simulated days.
    #[arg(long, default_value_t = 100)]
    pub days: u32,
    /// How long a settled workflow stays hot, in days.
    #[arg(long, default_value_t = 30)]
    pub policy_days: u32,
    /// Timed requests per page.
    #[arg(long, default_value_t = 40)]
    pub requests: usize,
    /// The built console assets.
    #[arg(long, env = "LEPTOS_SITE_ROOT", default_value = "target/site")]
    pub site_root: std::path::PathBuf,
}

/// Loads the days, archives after each, and prints every table as soon as it is complete.
pub async fn retention(args: RetentionBenchArgs) -> anyhow::Result<()> {
    let db = BenchDatabase::open().await?;
    let pool = db.pool(16, false).await?;
    engine::db::MIGRATOR.run(&pool).await?;
    crate::shipped::apply_definitions(&pool).await?;
    register_adapters(&pool).await?;
    let (base, server) = serve(&pool, &args.site_root).await?;
    let session = Session::sign_in(&base, &pool).await?;
    let archive = tempfile::tempdir()?;
    let dir = ArchiveDir::open(archive.path())?;

    load_aged(&pool, 0, 10_000, None).await?;
    let baseline = time_pages(&pool, &session, args.requests).await?;
    println!("console at 10k workflows: {} pages timed", baseline.len());

    let days = simulate(&pool, &dir, &args).await?;
    print_sizes(&days);
    let intake = args.per_day as f64 / DAY as f64;
    println!(
        "archiver: {} workflows in {:.0} s, {:.0} workflows/s; the intake is {intake:.2}/s ({:.0}× the intake)",
        days.archived,
        days.archive_secs,
        days.archived as f64 / days.archive_secs.max(1e-9),
        days.archived as f64 / days.archive_secs.max(1e-9) / intake,
    );

    // One more day past its retention, archived by the paced service, as `serve` runs it,
    // while the pages are timed.
    let loaded = 10_000 + args.per_day * args.days as usize;
    load_aged(&pool, loaded, loaded + args.per_day, Some(args.days + 1)).await?;
    let own = db.pool(2, false).await?;
    let archiver = Archiver::new(own.clone(), dir.clone(), policy(args.policy_days));
    let started = Instant::now();
    let beside = Beside::run(archiver, own).await?;
    let during = time_pages(&pool, &session, args.requests).await?;
    let secs = started.elapsed().as_secs_f64();
    let moved = beside.stop().await?;
    println!(
        "\npages beside the paced archiver ({moved} of {} workflows archived meanwhile, in {secs:.0} s)",
        args.per_day
    );
    println!("page                      p50 @10k   p50 now    ratio   p99 now");
    for ((name, p50_then, _), (_, p50, p99)) in baseline.iter().zip(&during) {
        println!(
            "{name:<24} {p50_then:>8.1} {p50:>9.1} {:>8.2} {p99:>9.1}",
            p50 / p50_then.max(1e-9)
        );
    }
    let verified = engine::archive::verify(&pool, &dir).await?;
    println!(
        "\narchive: {} day file(s), {} record(s), {} tombstone(s), {} finding(s)",
        verified.files,
        verified.records,
        verified.tombstones,
        verified.findings.len()
    );
    server.abort();
    pool.close().await;
    db.close().await
}

/// What the simulated days did.
struct Days {
    archived: i64,
    archive_secs: f64,
    /// Each hot table's (table, indexes) bytes once the policy's first window filled, and at
    /// the end.
    at_policy: Vec<(String, i64, i64)>,
    at_end: Vec<(String, i64, i64)>,
}

/// Each day loaded `days − day` days ago, then archived under the policy as it stood that day
/// (the window's end that many days before now), then vacuumed as autovacuum would.
async fn simulate(
    pool: &PgPool,
    dir: &ArchiveDir,
    args: &RetentionBenchArgs,
) -> anyhow::Result<Days> {
    let mut days = Days {
        archived: 0,
        archive_secs: 0.0,
        at_policy: Vec::new(),
        at_end: Vec::new(),
    };
    println!("\nday  hot workflows   hot MiB   archived   archiver s   workflows/s");
    for day in 1..=args.days {
        let age = args.days - day;
        let from = 10_000 + args.per_day * (day as usize - 1);
        load_aged(pool, from, from + args.per_day, Some(age)).await?;
        let archiver = Archiver::new(pool.clone(), dir.clone(), policy(age + args.policy_days));
        let (moved, secs) = drain(&archiver).await?;
        days.archived += moved.workflows;
        days.archive_secs += secs;
        sqlx::query(&format!("vacuum analyze {}", HOT.join(", ")))
            .execute(pool)
            .await?;
        let sizes = sizes(pool).await?;
        if day == args.policy_days {
            days.at_policy = sizes.clone();
        }
        if day % 10 == 0 || day == args.days {
            let hot: i64 = sqlx::query_scalar("select count(*) from workflow")
                .fetch_one(pool)
                .await?;
            let mib = sizes.iter().map(|(_, t, i)| t + i).sum::<i64>() as f64 / 1_048_576.0;
            println!(
                "{day:>3} {hot:>14} {mib:>9.0} {:>10} {secs:>12.1} {:>13.0}",
                days.archived,
                moved.workflows as f64 / secs.max(1e-9)
            );
            std::io::stdout().flush()?;
        }
        days.at_end = sizes;
    }
    Ok(days)
}

fn policy(days: u32) -> Policy {
    Policy {
        settled: Duration::from_secs(u64::from(days) * DAY),
        ..Policy::default()
    }
}

/// Turns until nothing is left; what moved and how long it took.
async fn drain(archiver: &Archiver) -> anyhow::Result<(Moved, f64)> {
    let started = Instant::now();
    let mut total = Moved::default();
    loop {
        let (moved, left) = archiver.turn(Duration::from_secs(60)).await?;
        total = total.plus(moved);
        if !left {
            return Ok((total, started.elapsed().as_secs_f64()));
        }
    }
}

/// Each hot table's size and its indexes' size, in bytes.
async fn sizes(pool: &PgPool) -> anyhow::Result<Vec<(String, i64, i64)>> {
    Ok(sqlx::query_as(
        "select t, pg_table_size(t::regclass), pg_indexes_size(t::regclass) from unnest($1::text[]) t",
    )
    .bind(HOT.map(str::to_owned).to_vec())
    .fetch_all(pool)
    .await?)
}

fn print_sizes(days: &Days) {
    println!("\ntable                 MiB at policy (idx)    MiB at end (idx)   ratio");
    let mib = |b: i64| b as f64 / 1_048_576.0;
    for ((name, t0, i0), (_, t1, i1)) in days.at_policy.iter().zip(&days.at_end) {
        println!(
            "{name:<20} {:>10.1} ({:>7.1}) {:>10.1} ({:>7.1}) {:>7.2}",
            mib(*t0),
            mib(*i0),
            mib(*t1),
            mib(*i1),
            (t1 + i1) as f64 / ((t0 + i0) as f64).max(1.0)
        );
    }
    let total = |s: &[(String, i64, i64)]| s.iter().map(|(_, t, i)| t + i).sum::<i64>();
    println!(
        "{:<20} {:>20.1} {:>20.1} {:>7.2}",
        "all hot tables",
        mib(total(&days.at_policy)),
        mib(total(&days.at_end)),
        total(&days.at_end) as f64 / (total(&days.at_policy) as f64).max(1.0)
    );
}
