//! The server's own maintenance services (docs/DESIGN.md §19), beside the engine's
//! (`engine::maintenance`): they tend what only the server holds, its session store and its
//! latency recorder. `startup` runs them with the engine's in one `Services`.

use std::time::Duration;

use engine::adapter::BoxFuture;
use engine::maintenance::{Failure, Periodic, Service};
use metrics_exporter_prometheus::PrometheusHandle;
use tower_sessions::session_store::ExpiredDeletion;
use tower_sessions_sqlx_store::PostgresStore;

/// `session_cleanup`: every ten minutes, deletes the console sessions that expired.
pub(crate) fn session_cleanup(store: PostgresStore) -> impl Service {
    let every = Duration::from_secs(10 * 60);
    Periodic::new(
        "session_cleanup",
        every,
        move || -> BoxFuture<'static, Result<(), Failure>> {
            let store = store.clone();
            Box::pin(async move {
                store.delete_expired().await?;
                Ok(())
            })
        },
    )
}

/// `metrics_upkeep`: every five seconds, drains the latency histograms into their buckets, so
/// they stay small between scrapes.
fn metrics_upkeep(handle: &'static PrometheusHandle) -> impl Service {
    let every = Duration::from_secs(5);
    Periodic::new(
        "metrics_upkeep",
        every,
        move || -> BoxFuture<'static, Result<(), Failure>> {
            handle.run_upkeep();
            Box::pin(std::future::ready(Ok(())))
        },
    )
}

/// The services every long-running `z29c` process runs: the metrics upkeep, when this process
/// records latency histograms.
pub(crate) fn of_every_process() -> Vec<Box<dyn Service>> {
    crate::metrics::install()
        .map(|handle| Box::new(metrics_upkeep(handle)) as Box<dyn Service>)
        .into_iter()
        .collect()
}
