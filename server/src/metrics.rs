//! `GET /metrics`: the engine's figures and the process's, in Prometheus text format. Each
//! scrape records into a fresh recorder (no process-global state): counters from the metrics
//! projection, gauges from durable state (each read from a small partial index or a kept
//! count, never a whole table: `engine::read::metrics`), then renders it.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use metrics_exporter_prometheus::PrometheusBuilder;
use sqlx::PgPool;

/// Renders every figure. Each scrape also folds the overview's state changes into its counts
/// (`read::stats::fold_counts`), so they stay few even when nobody opens the overview; the work
/// is bounded by what the engine wrote since the last fold, and a repeated scrape finds none.
pub async fn scrape(State(pool): State<PgPool>) -> impl IntoResponse {
    if let Err(error) = engine::read::stats::fold_counts(&pool).await {
        tracing::warn!(%error, "folding the overview's counts failed");
    }
    let figures = match engine::watch::telemetry::figures(&pool).await {
        Ok(f) => f,
        Err(error) => {
            tracing::warn!(%error, "metrics scrape failed");
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::CONTENT_TYPE, "text/plain")],
                "the database does not answer\n".to_owned(),
            );
        }
    };
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        describe();
        for (name, labels, value) in figures.counters {
            let labels: Vec<metrics::Label> = labels
                .into_iter()
                .map(|(k, v)| metrics::Label::new(k, v))
                .collect();
            metrics::counter!(name, labels).absolute(value as u64);
        }
        for (name, labels, value) in figures.gauges {
            let labels: Vec<metrics::Label> = labels
                .into_iter()
                .map(|(k, v)| metrics::Label::new(k, v))
                .collect();
            metrics::gauge!(name, labels).set(value);
        }
        metrics_process::Collector::default().collect();
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        handle.render(),
    )
}

fn describe() {
    use metrics::{describe_counter, describe_gauge};
    describe_counter!(
        "z29c_attempts_total",
        "Attempts ended, by logical step, adapter and outcome."
    );
    describe_counter!(
        "z29c_recovery_path_total",
        "Unknown outcomes settled, by path: replay, query, manual, waiver."
    );
    describe_counter!(
        "z29c_duplicates_detected_total",
        "Duplicate-effect incidents opened."
    );
    describe_counter!(
        "z29c_workflow_transitions_total",
        "Workflow state changes, by new state."
    );
    describe_counter!("z29c_alerts_opened_total", "Alerts opened, by rule.");
    describe_counter!(
        "z29c_projection_repairs_total",
        "Revision gaps repaired from durable state, by consumer."
    );
    describe_counter!(
        "z29c_invariant_violations_total",
        "Semantic invariant violations recorded, by kind."
    );
    describe_counter!(
        "z29c_lease_expiries_after_request_began_total",
        "Attempts whose worker vanished after the request began."
    );
    describe_gauge!(
        "z29c_steps_waiting",
        "Steps waiting for certainty or a person, by state."
    );
    describe_gauge!(
        "z29c_unknown_outcome_oldest_seconds",
        "Age of the oldest unknown outcome."
    );
    describe_gauge!("z29c_incidents_open", "Open integrity incidents, by kind.");
    describe_gauge!("z29c_alerts_open", "Open alerts, by rule.");
    describe_gauge!(
        "z29c_outbox_unpublished",
        "Outbox events not yet published."
    );
    describe_gauge!(
        "z29c_db_pool_connections",
        "Connections in the database pool."
    );
    describe_gauge!(
        "z29c_db_pool_idle_connections",
        "Idle connections in the database pool."
    );
}
