//! A worker's pipeline (docs/DESIGN.md §4): claims, calls and conclusions run at once. The
//! claim loop takes a batch whenever a whole one fits in flight; each step runs in a task of
//! its own; the concluder settles results many per transaction; the renewer keeps every batch
//! lease in flight alive with one row write per batch.

use std::time::Instant;

use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use uuid::Uuid;

use super::call::{Finished, Work};
use super::conclude::Concluder;
use super::leases::Leases;
use super::{StepReport, Worker, WorkerError};
use crate::store::lease;

/// The concluder and the renewer, running beside a worker's claims.
pub(super) struct Lanes {
    conclude: mpsc::Sender<Finished>,
    leases: Leases,
    concluder: JoinHandle<()>,
    renewer: JoinHandle<()>,
    stop: watch::Sender<bool>,
}

impl Worker {
    /// Starts the concluder and the renewer.
    pub(super) fn start_lanes(&self) -> Lanes {
        let batch = usize::try_from(self.config.batch.max(1)).unwrap_or(64);
        let (conclude, results) = mpsc::channel(batch * 4);
        let leases = Leases::default();
        let concluder = tokio::spawn(
            Concluder {
                worker: self.clone(),
                results,
                leases: leases.clone(),
            }
            .run(),
        );
        let (stop, mut stopped) = watch::channel(false);
        let (pool, holder, every, secs) = (
            self.pool.clone(),
            self.name().to_owned(),
            self.config.lease / 3,
            self.lease_secs(),
        );
        let live = leases.clone();
        let renewer = tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = stopped.wait_for(|s| *s) => return,
                    _ = tick.tick() => {}
                }
                let leases = live.live();
                if leases.is_empty() {
                    continue;
                }
                if let Err(error) = lease::renew_leases(&pool, &holder, &leases, secs).await {
                    tracing::warn!(%error, "lease renewal failed");
                }
            }
        });
        Lanes {
            conclude,
            leases,
            concluder,
            renewer,
            stop,
        }
    }

    /// Stops the lanes once every result handed to them is settled, and drops the leases
    /// whose steps have all been concluded.
    pub(super) async fn stop_lanes(&self, lanes: Lanes) {
        let Lanes {
            conclude,
            leases,
            concluder,
            renewer,
            stop,
        } = lanes;
        drop(conclude);
        let _ = concluder.await;
        let _ = stop.send(true);
        let _ = renewer.await;
        let done = leases.take_done();
        if !done.is_empty() {
            let dropped = async {
                let mut conn = self.pool.acquire().await?;
                crate::store::batch::drop_leases(&mut conn, self.name(), &done).await
            };
            if let Err(error) = dropped.await {
                tracing::warn!(%error, "could not drop finished leases; the sweeper will");
            }
        }
    }

    /// Claims one batch of up to `limit` steps and starts a task for each; returns how many
    /// steps it claimed.
    pub(super) async fn take_batch(
        &self,
        lanes: &Lanes,
        limit: i64,
        tasks: &mut JoinSet<(Uuid, StepReport)>,
    ) -> Result<usize, WorkerError> {
        let (lease, works) = self.claim_batch(limit).await?;
        if works.iter().any(|w| matches!(w, Work::Call(_))) {
            crate::failpoint::hit(crate::failpoint::FaultPoint::AfterBatchClaim);
        }
        let claimed_at = Instant::now();
        lanes.leases.open(lease, works.len());
        let claimed = works.len();
        for work in works {
            let (worker, conclude, leases) =
                (self.clone(), lanes.conclude.clone(), lanes.leases.clone());
            tasks.spawn(async move {
                let report = worker.execute(work, lease, claimed_at, &conclude).await;
                leases.finish(lease);
                report
            });
        }
        Ok(claimed)
    }
}
