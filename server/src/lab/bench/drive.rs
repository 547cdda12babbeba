//! One run of the engine bench's system: worker processes started and waiting, then signalled
//! with the outbox publisher beside them, until every workflow admitted for the run completed
//! and its status projection says so. `z29c bench engine` measures around it; `z29c bench
//! console --under-load` times the console's pages while it goes.

use std::time::{Duration, Instant};

use sqlx::{Connection, PgConnection};

use super::cluster::BenchDatabase;
use super::fleet::{EngineWorkerArgs, Fleet};
use super::pgstats::WATCH;

/// Worker processes started and waiting for the signal.
pub(super) struct Prepared {
    fleet: Fleet,
    watch: PgConnection,
    /// When the run's workflows began to be admitted: only workflows created since are counted,
    /// none of them completed before the signal (and the archiver beside a run removes older
    /// completed workflows).
    since: chrono::DateTime<chrono::Utc>,
    processes: usize,
    workflows: usize,
}

/// What a run took.
pub(super) struct Driven {
    pub elapsed: f64,
    /// The run's own looks at the counts (commits the workers did not make).
    pub polls: i64,
    pub began: chrono::DateTime<chrono::Utc>,
}

impl Prepared {
    /// Starts `processes` worker processes for the `workflows` admitted under `worker`.
    pub(super) async fn new(
        db: &BenchDatabase,
        worker: &EngineWorkerArgs,
        processes: usize,
        workflows: usize,
        since: chrono::DateTime<chrono::Utc>,
    ) -> anyhow::Result<Self> {
        let fleet = Fleet::start(processes, &db.url, worker).await?;
        let watch = PgConnection::connect(&db.url).await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(Self {
            fleet,
            watch,
            since,
            processes,
            workflows,
        })
    }

    /// Signals the workers and runs the publisher until every workflow completed and its
    /// status projection says so; stops them all.
    pub(super) async fn run(mut self, db: &BenchDatabase) -> anyhow::Result<Driven> {
        let publishing = db.pool(4, false).await?;
        let publisher = engine::outbox::publisher::Publisher::new(
            publishing.clone(),
            engine::outbox::consumers(None),
        );
        let publisher = engine::maintenance::Services::start(vec![Box::new(
            engine::maintenance::OutboxPublisher::new(publisher, Duration::from_millis(100)),
        )]);
        let started = Instant::now();
        let began = chrono::Utc::now();
        self.fleet.go().await?;
        let polls =
            wait_until_projected(&mut self.watch, self.since, self.workflows, started).await?;
        let elapsed = started.elapsed().as_secs_f64();
        self.fleet.stop().await?;
        publisher.stop().await;
        publishing.close().await;
        self.watch.close().await?;
        eprintln!(
            "{} worker process(es): {:.0} external steps/s in {elapsed:.1} s",
            self.processes,
            (self.workflows * 2) as f64 / elapsed
        );
        Ok(Driven {
            elapsed,
            polls,
            began,
        })
    }
}

/// Workflows created `since` that completed, and status rows that say so: counted once the run
/// settled, never during it (two counts over every workflow would cost PostgreSQL the CPU the
/// run measures).
async fn completed(
    watch: &mut PgConnection,
    since: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<(i64, i64)> {
    Ok(sqlx::query_as(&format!(
        "{WATCH} select (select count(*) from workflow where state = 'completed' and created_at >= $1),
                        (select count(*) from status_projection p join workflow w on w.id = p.workflow_id
                         where p.state = 'completed' and w.created_at >= $1)"
    ))
    .bind(since)
    .fetch_one(watch)
    .await?)
}

/// Whether the run may be over: the kept counts say no workflow is pending or running, and the
/// publisher stands past the newest event (so every consumer applied it). The counts cost a
/// few rows a look; probing the `workflow` state index, which holds an entry for every version
/// the run writes, took 6–23 ms a look, a few per cent of PostgreSQL's CPU in the run.
async fn settled(watch: &mut PgConnection) -> anyhow::Result<bool> {
    Ok(sqlx::query_scalar(&format!(
        "{WATCH} select coalesce((select sum(n) from (select state, n from workflow_state_count
                                                     union all
                                                     select state, n from workflow_state_delta) c
                                  where state in ('pending', 'running')), 0) = 0
                    and coalesce((select (o.txid, o.id) <= (c.txid, c.id)
                                  from outbox o, outbox_cursor c where c.reader = 'publisher'
                                  order by o.txid desc, o.id desc limit 1), true)"
    ))
    .fetch_one(watch)
    .await?)
}

/// Waits until no workflow is pending or running and the outbox is drained, then checks that
/// `workflows` workflows created `since` completed and their status projection says so; returns
/// how many times it looked.
async fn wait_until_projected(
    watch: &mut PgConnection,
    since: chrono::DateTime<chrono::Utc>,
    workflows: usize,
    started: Instant,
) -> anyhow::Result<i64> {
    let want = i64::try_from(workflows)?;
    let mut polls = 0;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        polls += 1;
        if settled(watch).await? {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(900),
            "the bench did not finish in 15 minutes"
        );
    }
    let (done, projected) = completed(watch, since).await?;
    polls += 1;
    anyhow::ensure!(
        done >= want && projected >= want,
        "the run settled with {done} of {workflows} workflows completed and {projected} projected as completed",
    );
    Ok(polls)
}
