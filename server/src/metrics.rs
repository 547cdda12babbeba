//! `GET /metrics`: the engine's figures and the process's, in Prometheus text format. Each
//! scrape records the durable figures into a fresh recorder: counters from the metrics
//! projection, gauges from durable state (each read from a small partial index or a kept
//! count, never a whole table: `engine::read::metrics`), then renders it. After them come the
//! latency histograms this process recorded since it started ([`install`]): the engine's
//! (`engine::watch::latency`) and the HTTP handlers' ([`time_request`]). Who may scrape is the
//! router's to check (`http::scrape`).

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use sqlx::PgPool;

/// Seconds each console page, server function and API request took, by route pattern (never
/// the raw path), method and status.
pub const HTTP_REQUEST: &str = "z29c_http_request_duration_seconds";

/// The histograms' buckets, in seconds: 1 ms to 60 s.
const BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0,
];

/// The process's recorder, once installed (`None` when another recorder was installed first).
static PROCESS: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process-wide recorder the latency histograms go to, once; later calls return
/// the same handle. Serving and worker processes call it at start; what is recorded before
/// it is lost.
pub fn install() -> Option<&'static PrometheusHandle> {
    PROCESS
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets(&BUCKETS)
                .expect("the bucket list is not empty");
            match builder.install_recorder() {
                Ok(handle) => {
                    describe_histograms();
                    Some(handle)
                }
                Err(error) => {
                    tracing::warn!(%error, "latency histograms are off: a recorder was installed already");
                    None
                }
            }
        })
        .as_ref()
}

/// The latency histograms this process recorded, in Prometheus text format (empty before
/// [`install`]).
pub fn process_histograms() -> String {
    PROCESS
        .get()
        .and_then(Option::as_ref)
        .map(PrometheusHandle::render)
        .unwrap_or_default()
}

/// `GET /metrics` of a `z29c worker --metrics-addr`: the process's histograms only (the
/// durable figures are the serving process's to report), once `http::scrape` let the token in.
pub async fn scrape_process() -> impl IntoResponse {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        process_histograms(),
    )
}

/// Middleware: times each request into [`HTTP_REQUEST`], labelled by the route pattern that
/// matched (`unmatched` for the fallback: assets and not-found pages).
pub async fn time_request(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    // Any token is a method: only the standard ones become labels, so a client cannot mint series.
    let method = match *request.method() {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    };
    let started = Instant::now();
    let response = next.run(request).await;
    metrics::histogram!(
        HTTP_REQUEST,
        "route" => route,
        "method" => method,
        "status" => response.status().as_str().to_owned(),
    )
    .record(started.elapsed());
    response
}

fn describe_histograms() {
    use metrics::{Unit, describe_histogram};
    for (name, description) in engine::watch::latency::HISTOGRAMS {
        describe_histogram!(name, Unit::Seconds, description);
    }
    describe_histogram!(
        HTTP_REQUEST,
        Unit::Seconds,
        "Console pages, server functions and API requests, by route pattern, method and status."
    );
}

/// Renders every figure. Each scrape also folds the overview's state changes into its counts
/// (`read::stats::fold_counts`), so they stay few even when nobody opens the overview; the work
/// is bounded by what the engine wrote since the last fold, and a repeated scrape finds none.
pub async fn scrape(pool: &PgPool) -> Response {
    if let Err(error) = engine::read::stats::fold_counts(pool).await {
        tracing::warn!(%error, "folding the overview's counts failed");
    }
    let figures = match engine::watch::telemetry::figures(pool).await {
        Ok(f) => f,
        Err(error) => {
            tracing::warn!(%error, "metrics scrape failed");
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::CONTENT_TYPE, "text/plain")],
                "the database does not answer\n".to_owned(),
            )
                .into_response();
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
    let mut text = handle.render();
    text.push_str(&process_histograms());
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        text,
    )
        .into_response()
}

fn describe() {
    use metrics::{describe_counter, describe_gauge};
    describe_archive();
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
        "z29c_adapter_held",
        "1 for each adapter an operator holds: nothing new is sent to it."
    );
    describe_gauge!(
        "z29c_adapter_limit",
        "Each limited adapter's outbound limit in force (its file's, or an approver's override), by limit: requests_per_second, in_flight."
    );
    describe_gauge!(
        "z29c_proposals_waiting",
        "Actions proposed by one approver that wait for a second (four eyes)."
    );
    describe_counter!(
        "z29c_notes_total",
        "Notes operators left on workflows, steps and incidents."
    );
    describe_gauge!(
        "z29c_workflows_paused",
        "Workflows an operator paused: no step of them starts."
    );
    describe_gauge!(
        "z29c_outbox_unpublished",
        "Outbox events not yet handed to every consumer."
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

/// The archiver's figures (docs/DESIGN.md §21).
fn describe_archive() {
    use metrics::{describe_counter, describe_gauge};
    describe_counter!(
        "z29c_archived_workflows_total",
        "Settled workflows the archiver moved to the archive, each leaving a tombstone."
    );
    describe_counter!(
        "z29c_archived_audit_entries_total",
        "Audit entries naming no workflow moved to the archive past their retention."
    );
    describe_counter!(
        "z29c_outbox_events_dropped_total",
        "Outbox events dropped once every consumer had passed them and their retention."
    );
    describe_counter!(
        "z29c_archive_bytes_total",
        "Compressed bytes the archiver has written."
    );
    describe_gauge!(
        "z29c_archive_last_turn_seconds",
        "How long the archiver's last turn took."
    );
    describe_gauge!(
        "z29c_oldest_settled_workflow_age_seconds",
        "Age of the oldest settled workflow still in the hot tables; less the retention, how far the archiver is behind."
    );
}
