//! The server's own maintenance services (docs/DESIGN.md §19), beside the engine's
//! (`engine::maintenance`): they tend what only the server holds, its session store and its
//! latency recorder. `startup` runs them with the engine's in one `Services`.

use std::time::Duration;

use engine::adapter::BoxFuture;
use engine::maintenance::{Failure, Pace, Service};
use metrics_exporter_prometheus::PrometheusHandle;
use tower_sessions::session_store::ExpiredDeletion;
use tower_sessions_sqlx_store::PostgresStore;

/// `session_cleanup`: deletes the console sessions that expired.
pub(crate) struct SessionCleanup(pub PostgresStore);

impl Service for SessionCleanup {
    fn name(&self) -> &'static str {
        "session_cleanup"
    }

    fn every(&self) -> Duration {
        Duration::from_secs(10 * 60)
    }

    fn turn(&mut self) -> BoxFuture<'_, Result<Pace, Failure>> {
        Box::pin(async move {
            self.0.delete_expired().await?;
            Ok(Pace::Interval)
        })
    }
}

/// `metrics_upkeep`: drains the latency histograms into their buckets, so they stay small
/// between scrapes.
pub(crate) struct MetricsUpkeep(pub &'static PrometheusHandle);

impl Service for MetricsUpkeep {
    fn name(&self) -> &'static str {
        "metrics_upkeep"
    }

    fn every(&self) -> Duration {
        Duration::from_secs(5)
    }

    fn turn(&mut self) -> BoxFuture<'_, Result<Pace, Failure>> {
        self.0.run_upkeep();
        Box::pin(std::future::ready(Ok(Pace::Interval)))
    }
}

/// The services every long-running `z29c` process runs: the metrics upkeep, when this process
/// records latency histograms.
pub(crate) fn of_every_process() -> Vec<Box<dyn Service>> {
    crate::metrics::install()
        .map(|handle| Box::new(MetricsUpkeep(handle)) as Box<dyn Service>)
        .into_iter()
        .collect()
}
