//! `z29c bench engine --archiving N`: the archiver at work beside a run (docs/DESIGN.md §21),
//! so the engine's throughput with the archiver running can be set beside its throughput
//! without. Before each run, `N` workflows settled two months ago are loaded as the console
//! bench loads its history; during the run the archiver moves them, in this process, on its own
//! connections, as `serve`'s archiver would.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use engine::archive::{ArchiveDir, Archiver, Moved, Policy};
use tokio::task::JoinHandle;

use super::cluster::BenchDatabase;
use super::load::load_aged;

/// How long ago the loaded workflows settled: past the default 30-day policy.
const AGE_DAYS: u32 = 60;

/// The archiver running beside one run.
pub(super) struct Beside {
    stop: Arc<AtomicBool>,
    task: JoinHandle<anyhow::Result<Moved>>,
    _dir: tempfile::TempDir,
}

/// Loads the `run`-th range of `workflows` eligible workflows; the bench's adapters must be
/// registered ([`super::load::register_adapters`]).
pub(super) async fn load_eligible(
    db: &BenchDatabase,
    run: usize,
    workflows: usize,
) -> anyhow::Result<()> {
    let pool = db.pool(4, false).await?;
    load_aged(
        &pool,
        run * workflows,
        (run + 1) * workflows,
        Some(AGE_DAYS),
    )
    .await?;
    pool.close().await;
    Ok(())
}

impl Beside {
    /// Starts archiving on a pool of its own, with the default policy.
    pub(super) async fn start(db: &BenchDatabase) -> anyhow::Result<Self> {
        let pool = db.pool(2, false).await?;
        let dir = tempfile::tempdir()?;
        let archiver = Archiver::new(pool, ArchiveDir::open(dir.path())?, Policy::default());
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let task = tokio::spawn(async move {
            let mut total = Moved::default();
            while !stopping.load(Ordering::Relaxed) {
                let (moved, left) = archiver.turn(Duration::from_millis(500)).await?;
                total = total.plus(moved);
                if !left {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            Ok(total)
        });
        Ok(Self {
            stop,
            task,
            _dir: dir,
        })
    }

    /// Stops after the batch in hand; what moved meanwhile.
    pub(super) async fn stop(self) -> anyhow::Result<Moved> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await?
    }
}
