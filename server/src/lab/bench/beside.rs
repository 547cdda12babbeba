//! `z29c bench engine --archiving N`: the archiver at work beside a run (docs/DESIGN.md §21),
//! so the engine's throughput with the archiver running can be set beside its throughput
//! without. Before each run, `N` workflows settled two months ago are loaded as the console
//! bench loads its history; during the run the archiver service moves them, paced as `serve`
//! paces it, in this process on connections of its own.

use std::time::Duration;

use engine::archive::{ArchiveDir, Archiver, Policy};
use engine::maintenance::Services;
use sqlx::PgPool;

use super::cluster::BenchDatabase;
use super::load::load_aged;

/// How long ago the loaded workflows settled: past the default 30-day policy.
const AGE_DAYS: u32 = 60;

/// The archiver service running beside one run.
pub(super) struct Beside {
    services: Services,
    pool: PgPool,
    /// Tombstones before the start.
    before: i64,
    /// The archive, when the service made its own.
    _dir: Option<tempfile::TempDir>,
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
    /// Starts the service with the default policy and an archive of its own.
    pub(super) async fn start(db: &BenchDatabase) -> anyhow::Result<Self> {
        let pool = db.pool(2, false).await?;
        let dir = tempfile::tempdir()?;
        let archiver = Archiver::new(
            pool.clone(),
            ArchiveDir::open(dir.path())?,
            Policy::default(),
        );
        let mut beside = Self::run(archiver, pool).await?;
        beside._dir = Some(dir);
        Ok(beside)
    }

    /// Starts the service over `archiver`, looking for work every second as `serve` would be
    /// told to; `pool` counts what it moved.
    pub(super) async fn run(archiver: Archiver, pool: PgPool) -> anyhow::Result<Self> {
        let before = archived(&pool).await?;
        let services = Services::start(vec![Box::new(engine::archive::service(
            archiver,
            Duration::from_secs(1),
        ))]);
        Ok(Self {
            services,
            pool,
            before,
            _dir: None,
        })
    }

    /// Stops after the turn in hand; the workflows it archived.
    pub(super) async fn stop(self) -> anyhow::Result<i64> {
        self.services.stop().await;
        let moved = archived(&self.pool).await? - self.before;
        self.pool.close().await;
        Ok(moved)
    }
}

/// Tombstones so far.
async fn archived(pool: &PgPool) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar("select count(*) from archived_workflow")
        .fetch_one(pool)
        .await?)
}
