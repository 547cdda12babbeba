//! `z29c bench console --under-load`: the console's pages and API reads timed while the engine
//! bench's worker processes run flat out against the same database, beside the same pages idle;
//! and the engine's throughput with that traffic beside it and without.

use std::sync::atomic::{AtomicBool, Ordering};

use super::cluster::BenchDatabase;
use super::drive::Prepared;
use super::engine_bench::{EngineBenchArgs, admit};
use super::quantile::percentile;
use super::session::Session;

/// Settings of the run under load.
#[derive(Debug, Clone, clap::Args)]
pub struct UnderLoadArgs {
    /// After the last size, time every page again while this many workflows (two external
    /// steps each) run through the engine bench's workers; off when absent.
    #[arg(long, value_name = "WORKFLOWS", num_args = 0..=1, default_missing_value = "20000")]
    pub under_load: Option<usize>,
    /// Worker processes of the run under load.
    #[arg(long, default_value_t = 2)]
    pub under_load_processes: usize,
}

/// What the run under load measured.
pub(super) struct UnderLoad {
    /// Page, p50 ms, p99 ms, requests timed.
    pub pages: Vec<(&'static str, f64, f64, usize)>,
    /// External steps per second without the console's traffic, and with it.
    pub alone: f64,
    pub with_traffic: f64,
}

/// One run of the engine alone, then one with every page (name, path) timed round after
/// round until the run ends.
pub(super) async fn under_load(
    db: &BenchDatabase,
    session: &Session,
    pages: &[(&'static str, String)],
    args: &UnderLoadArgs,
    workflows: usize,
) -> anyhow::Result<UnderLoad> {
    let alone = engine_run(db, args, workflows, None).await?;
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); pages.len()];
    let with_traffic = engine_run(db, args, workflows, Some((session, pages, &mut times))).await?;
    let pages = pages
        .iter()
        .zip(times.iter_mut())
        .map(|((name, _), times)| {
            times.sort_by(f64::total_cmp);
            let (p50, p99) = (percentile(times, 0.5), percentile(times, 0.99));
            (*name, p50, p99, times.len())
        })
        .collect();
    Ok(UnderLoad {
        pages,
        alone,
        with_traffic,
    })
}

/// The pages, their paths, and the times taken so far per page.
type Traffic<'a> = (
    &'a Session,
    &'a [(&'static str, String)],
    &'a mut Vec<Vec<f64>>,
);

/// Admits `workflows` workflows and runs them to the end; with `traffic`, every page is asked
/// in turn for as long as the run goes. External steps per second.
async fn engine_run(
    db: &BenchDatabase,
    args: &UnderLoadArgs,
    workflows: usize,
    traffic: Option<Traffic<'_>>,
) -> anyhow::Result<f64> {
    let engine = EngineBenchArgs {
        workflows,
        processes: vec![args.under_load_processes],
        concurrency: 16,
        batch: 64,
        http: false,
        ceiling_secs: 0,
        ceiling_clients: 0,
        limit_rps: None,
        archiving: 0,
        archiver_off: false,
    };
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let since = chrono::Utc::now();
    let worker = admit(db, &engine, args.under_load_processes, &tag, None).await?;
    let prepared = Prepared::new(db, &worker, args.under_load_processes, workflows, since).await?;
    let over = AtomicBool::new(false);
    let run = async {
        let driven = prepared.run(db).await;
        over.store(true, Ordering::Relaxed);
        driven
    };
    let ask = async {
        let Some((session, pages, times)) = traffic else {
            return Ok(());
        };
        while !over.load(Ordering::Relaxed) {
            for ((_, path), times) in pages.iter().zip(times.iter_mut()) {
                times.push(session.time(path).await?);
            }
        }
        anyhow::Ok(())
    };
    let (driven, asked) = tokio::join!(run, ask);
    asked?;
    Ok((workflows * 2) as f64 / driven?.elapsed)
}

/// The pages under load beside the same pages idle at the last size.
pub(super) fn print(idle: &[(&'static str, f64, f64)], load: &UnderLoad, processes: usize) {
    println!(
        "\nunder load: {processes} engine worker process(es) flat out; p50 / p99 ms, idle (above) and while the engine runs"
    );
    println!(
        "{:<26} {:>16} {:>16} {:>9} {:>9}",
        "page", "idle", "under load", "p99 ×", "requests"
    );
    for ((name, p50, p99), (_, load50, load99, n)) in idle.iter().zip(&load.pages) {
        println!(
            "{name:<26} {:>16} {:>16} {:>8.2}× {n:>9}",
            format!("{p50:.1} / {p99:.1}"),
            format!("{load50:.1} / {load99:.1}"),
            load99 / p99.max(1e-9)
        );
    }
    println!(
        "engine: {:.0} external steps/s alone, {:.0} with the console's traffic ({:.2}×)",
        load.alone,
        load.with_traffic,
        load.with_traffic / load.alone.max(1e-9)
    );
}
