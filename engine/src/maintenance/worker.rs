//! The services of a worker process (docs/DESIGN.md §4, §11, §19): the lease sweeper, the
//! invariant pass and the adapter refresh, run beside the claims and never in their way.

use std::time::Duration;

use super::{Failure, Pace, Periodic, Service, Services};
use crate::adapter::BoxFuture;
use crate::worker::Worker;

/// How often a running worker sweeps expired leases.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// The services a worker runs beside its claims.
pub fn for_worker(worker: &Worker) -> Vec<Box<dyn Service>> {
    let mut services: Vec<Box<dyn Service>> = vec![
        Box::new(lease_sweeper(worker)),
        Box::new(invariant_pass(worker)),
    ];
    if let Some(every) = worker.config().adapter_refresh {
        services.push(Box::new(AdapterRefresh {
            worker: worker.clone(),
            every,
            seen: None,
        }));
    }
    services
}

/// `lease_sweeper`: ends what the holders of expired leases left unfinished ([`Worker::sweep`]).
fn lease_sweeper(worker: &Worker) -> impl Service {
    let worker = worker.clone();
    Periodic::new(
        "lease_sweeper",
        SWEEP_EVERY,
        move || -> BoxFuture<'static, Result<(), Failure>> {
            let worker = worker.clone();
            Box::pin(async move {
                worker.sweep().await?;
                Ok(())
            })
        },
    )
}

/// `invariant_pass`: checks the semantic invariants when no process sharing the database did
/// within the interval ([`crate::watch::invariants::check_if_due`]). The first turn comes one
/// interval after the start: workers started together would otherwise all read every step at
/// once, and one of them has just checked anyway.
fn invariant_pass(worker: &Worker) -> impl Service {
    let every = worker.config().invariant_interval;
    let pool = worker.pool().clone();
    Periodic::new("invariant_pass", every, move || -> BoxFuture<'static, Result<(), Failure>> {
        let pool = pool.clone();
        Box::pin(async move {
            let found = crate::watch::invariants::check_if_due(&pool, every).await?;
            for v in found.unwrap_or_default() {
                tracing::warn!(kind = %v.kind, subject = %v.subject, evidence = %v.evidence, "invariant violated");
            }
            Ok(())
        })
    })
    .starting_after(every)
}

/// Runs `worker` with its services until `shutdown` resolves: it claims no more, every step
/// in flight finishes its protocol, then the services stop.
pub async fn run_worker(worker: Worker, shutdown: impl std::future::Future<Output = ()>) {
    let services = Services::start(for_worker(&worker));
    worker.run(shutdown).await;
    services.stop().await;
}

/// `adapter_refresh`: reloads the adapters when the registry changed since they were loaded (a
/// file applied, a version verified, a claim refuted), so running workers pick them up without
/// a restart.
struct AdapterRefresh {
    worker: Worker,
    every: Duration,
    /// The registry's fingerprint when the adapters were last loaded.
    seen: Option<String>,
}

impl Service for AdapterRefresh {
    fn name(&self) -> &'static str {
        "adapter_refresh"
    }

    fn every(&self) -> Duration {
        self.every
    }

    fn turn(&mut self) -> BoxFuture<'_, Result<Pace, Failure>> {
        Box::pin(async move {
            let now = crate::store::adapter::fingerprint(self.worker.pool()).await?;
            if self.seen.as_deref() != Some(now.as_str()) {
                self.worker.reload_adapters().await?;
                if self.seen.is_some() {
                    tracing::info!(worker = %self.worker.name(), "adapters changed; reloaded");
                }
                self.seen = Some(now);
            }
            Ok(Pace::Interval)
        })
    }
}
