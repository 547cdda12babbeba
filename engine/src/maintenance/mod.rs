//! Maintenance (docs/DESIGN.md §19): every periodic job a process runs beside the checkpoint
//! protocol is a [`Service`] with a name and a pace, and [`Services`] is the one place that
//! starts them, each in a task of its own, and stops them together.
//!
//! | service                 | runs in                          | every                                   |
//! |-------------------------|----------------------------------|-----------------------------------------|
//! | `lease_sweeper`         | each worker                      | 1 s                                     |
//! | `invariant_pass`        | each worker, one turn per interval across processes | `invariant_interval`, first after one |
//! | `adapter_refresh`       | each worker that loads its adapters | `adapter_refresh`                    |
//! | `outbox_publisher`      | `z29c serve`                     | on NOTIFY, at least every second        |
//! | `alert_evaluation`      | `z29c serve`                     | `--observe-every-secs`                  |
//! | `adapter_breaker`       | `z29c serve`                     | `--observe-every-secs`                  |
//! | `webhook_delivery`      | `z29c serve --webhook`           | `--observe-every-secs`                  |
//! | `notification_delivery` | `z29c serve --webhook`           | `--observe-every-secs`                  |
//! | `sign_in_forgetting`    | `z29c serve`                     | 10 min                                  |
//! | `session_cleanup`, `metrics_upkeep` | the server (its session store and recorder) | 10 min, 5 s |

mod observe;
mod worker;

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::adapter::BoxFuture;

pub use observe::{
    OutboxPublisher, adapter_breaker, alert_evaluation, notification_delivery, sign_in_forgetting,
    webhook_delivery,
};
pub use worker::{for_worker, run_worker};

/// Why a turn failed: logged with the service's name; the next turn comes at the usual pace.
pub type Failure = Box<dyn std::error::Error + Send + Sync>;

/// When a service's next turn comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// After the service's interval (or sooner, when it is woken).
    Interval,
    /// At once: the turn left work behind.
    Again,
    /// After this long (or sooner, when it is woken).
    After(Duration),
}

/// One periodic job.
pub trait Service: Send + 'static {
    /// The name logs use.
    fn name(&self) -> &'static str;
    /// The usual time between two turns.
    fn every(&self) -> Duration;
    /// How long after the start the first turn comes.
    fn first_after(&self) -> Duration {
        Duration::ZERO
    }
    /// One turn, run to its end (stopping waits for it).
    fn turn(&mut self) -> BoxFuture<'_, Result<Pace, Failure>>;
    /// Resolves when the service has reason to turn before its pace says (a NOTIFY, say).
    fn woken(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::pending())
    }
}

/// One job of a [`Periodic`] service: each call starts a turn.
pub trait Job: FnMut() -> BoxFuture<'static, Result<(), Failure>> + Send + 'static {}

impl<F> Job for F where F: FnMut() -> BoxFuture<'static, Result<(), Failure>> + Send + 'static {}

/// A service that runs one job at a fixed interval and keeps no state between turns.
pub struct Periodic<J> {
    name: &'static str,
    every: Duration,
    first_after: Duration,
    job: J,
}

impl<J: Job> Periodic<J> {
    /// `job` every `every`, the first time at once.
    pub fn new(name: &'static str, every: Duration, job: J) -> Self {
        Self {
            name,
            every,
            first_after: Duration::ZERO,
            job,
        }
    }

    /// The same service, its first turn `after` the start.
    pub fn starting_after(self, after: Duration) -> Self {
        Self {
            first_after: after,
            ..self
        }
    }
}

impl<J: Job> Service for Periodic<J> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn every(&self) -> Duration {
        self.every
    }

    fn first_after(&self) -> Duration {
        self.first_after
    }

    fn turn(&mut self) -> BoxFuture<'_, Result<Pace, Failure>> {
        let job = (self.job)();
        Box::pin(async move {
            job.await?;
            Ok(Pace::Interval)
        })
    }
}

/// Services running, each in its own task, until [`Services::stop`].
pub struct Services {
    stop: watch::Sender<bool>,
    running: Vec<(&'static str, JoinHandle<()>)>,
}

impl Services {
    /// Starts every service of `services`.
    pub fn start(services: Vec<Box<dyn Service>>) -> Self {
        let (stop, stopped) = watch::channel(false);
        let running = services
            .into_iter()
            .map(|service| (service.name(), tokio::spawn(keep(service, stopped.clone()))))
            .collect();
        Self { stop, running }
    }

    /// The names of the services running, in the order they were given.
    pub fn names(&self) -> Vec<&'static str> {
        self.running.iter().map(|(name, _)| *name).collect()
    }

    /// Stops every service: a turn under way runs to its end, no other starts.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for (name, task) in self.running {
            if let Err(error) = task.await {
                tracing::error!(service = name, %error, "a maintenance service panicked");
            }
        }
    }
}

/// Runs `service` turn after turn at its pace until `stopped` says so.
async fn keep(mut service: Box<dyn Service>, mut stopped: watch::Receiver<bool>) {
    let name = service.name();
    let mut wait = service.first_after();
    loop {
        tokio::select! {
            biased;
            _ = stopped.wait_for(|stop| *stop) => return,
            () = tokio::time::sleep(wait) => {}
            () = service.woken(), if !wait.is_zero() => {}
        }
        if *stopped.borrow() {
            return;
        }
        wait = match service.turn().await {
            Ok(Pace::Again) => Duration::ZERO,
            Ok(Pace::After(after)) => after,
            Ok(Pace::Interval) => service.every(),
            Err(error) => {
                tracing::warn!(service = name, %error, "maintenance turn failed; it runs again at its pace");
                service.every()
            }
        };
    }
}

#[cfg(test)]
mod tests;
