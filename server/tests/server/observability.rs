//! Where time goes, as the people who run Z29C see it: latency histograms in `/metrics` after a
//! real run against a destination, and the run's spans at an OpenTelemetry collector.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use destinations::{Config, Kind, RunningDestination};
use http::StatusCode;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;
use sqlx::PgPool;
use tracing_subscriber::layer::SubscriberExt;

use crate::own_api::{
    adapter_file, apply_files, definition_file, drive, lose_the_next_answer, start,
};

/// An idempotent destination of its own, with the `notice` definition and the adapter applied
/// and verified against it; returns the destination and the adapter's name.
async fn notice_destination(pool: &PgPool) -> (RunningDestination, String) {
    let destination = destinations::spawn(
        destinations::database_beside(pool).await.unwrap(),
        Config::new(Kind::Idempotent),
    )
    .await
    .unwrap();
    let url = destination.base_url();
    let adapter = adapter_file("idempotent-docs.yaml", &url, None);
    let name = apply_files(pool, &adapter, &definition_file("notice.v1.yaml"), &url).await;
    (destination, name)
}

/// Starts one notice through `adapter` over the API and drives it until it completes.
async fn run_one_notice(pool: &PgPool, adapter: &str, key: &str) {
    let input = json!({ "adapter": adapter, "to": "ada", "text": "Your parcel is on its way" });
    let (status, started) = start(pool, "notice", key, input).await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    let workflow = started["id"].as_str().unwrap().to_owned();
    assert_eq!(drive(pool, &workflow).await, "completed");
}

/// The count in each bucket line of histogram `name` whose labels contain every one of
/// `labels`, with the bucket's upper bound.
fn buckets(text: &str, name: &str, labels: &[&str]) -> Vec<(String, u64)> {
    let prefix = format!("{name}_bucket{{");
    text.lines()
        .filter(|line| line.starts_with(&prefix))
        .filter(|line| labels.iter().all(|label| line.contains(label)))
        .map(|line| {
            let (series, count) = line.rsplit_once(' ').unwrap();
            let le = series
                .split("le=\"")
                .nth(1)
                .unwrap()
                .trim_end_matches("\"}");
            (le.to_owned(), count.parse().unwrap())
        })
        .collect()
}

/// Whether some finite bucket of the series counted anything (`+Inf` alone would not say the
/// buckets were chosen so the values land in them).
fn some_finite_bucket_counted(buckets: &[(String, u64)]) -> bool {
    buckets.iter().any(|(le, count)| le != "+Inf" && *count > 0)
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn after_a_run_metrics_show_filled_buckets_for_adapter_calls_and_ready_to_receipt(
    pool: PgPool,
) {
    server::metrics::install().expect("no other recorder in this process");
    let (_destination, adapter) = notice_destination(&pool).await;
    run_one_notice(&pool, &adapter, "notice-metrics").await;

    let text = crate::support::scrape_metrics(&pool).await;

    let adapter_label = format!("adapter=\"{adapter}\"");
    let calls = buckets(
        &text,
        "z29c_adapter_call_duration_seconds",
        &[&adapter_label, "outcome=\"succeeded\""],
    );
    assert!(some_finite_bucket_counted(&calls), "{text}");
    let receipts = buckets(
        &text,
        "z29c_step_ready_to_receipt_seconds",
        &[&adapter_label],
    );
    assert!(some_finite_bucket_counted(&receipts), "{text}");
    let sends = buckets(&text, "z29c_step_claim_to_send_seconds", &[&adapter_label]);
    assert!(some_finite_bucket_counted(&sends), "{text}");
    // The start went through the router: its handler is timed under its route pattern.
    let started = buckets(
        &text,
        "z29c_http_request_duration_seconds",
        &[
            "route=\"/api/v1/workflows\"",
            "method=\"POST\"",
            "status=\"201\"",
        ],
    );
    assert!(some_finite_bucket_counted(&started), "{text}");
    // The durable figures are still there beside the process's histograms.
    assert!(text.contains("z29c_outbox_unpublished"), "{text}");
}

/// An OTLP/HTTP collector stand-in on a port of its own: keeps the body of every export.
async fn collector() -> (String, Arc<Mutex<Vec<Bytes>>>) {
    let received: Arc<Mutex<Vec<Bytes>>> = Arc::default();
    let kept = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: Bytes| {
            let kept = kept.clone();
            async move {
                kept.lock().unwrap().push(body);
                // An empty ExportTraceServiceResponse: everything was accepted.
                (
                    [(http::header::CONTENT_TYPE, "application/x-protobuf")],
                    Vec::new(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, received)
}

/// `traces` once every span ended so far is exported. The export blocks until the collector
/// answers, and the collector runs on the test's thread: the flush runs on another.
async fn flushed(traces: server::telemetry::Tracing) -> server::telemetry::Tracing {
    tokio::task::spawn_blocking(move || {
        traces.flush();
        traces
    })
    .await
    .unwrap()
}

/// Every span in the exports the collector received.
fn spans(bodies: &[Bytes]) -> Vec<Span> {
    bodies
        .iter()
        .flat_map(|body| {
            ExportTraceServiceRequest::decode(body.clone())
                .expect("an OTLP protobuf export")
                .resource_spans
        })
        .flat_map(|resource| resource.scope_spans)
        .flat_map(|scope| scope.spans)
        .collect()
}

/// The string value of attribute `key` of `span`.
fn attribute<'s>(span: &'s Span, key: &str) -> Option<&'s str> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
        .and_then(|value| match value {
            AnyValue::StringValue(s) => Some(s.as_str()),
            _ => None,
        })
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn with_a_collector_named_each_attempt_of_a_workflows_step_arrives_as_a_trace_with_its_checkpoints_and_call(
    pool: PgPool,
) {
    let (url, received) = collector().await;
    let traces = server::telemetry::Tracing::to(Some(&url))
        .unwrap()
        .expect("an endpoint turns tracing on");
    // This test's own subscriber, on this thread only (the test's runtime runs every task on
    // it): nothing process-wide is installed, so no other test sees these spans.
    let subscriber = tracing_subscriber::registry().with(traces.layer());
    let guard = tracing::subscriber::set_default(subscriber);
    let (destination, adapter) = notice_destination(&pool).await;
    // The first answer is lost: recovery replays the key in a second attempt.
    lose_the_next_answer(&destination);
    run_one_notice(&pool, &adapter, "notice-traced").await;
    drop(guard);
    let traces = flushed(traces).await;

    let spans = spans(&received.lock().unwrap());
    let attempts: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "step.attempt" && attribute(s, "logical") == Some("send"))
        .collect();
    assert!(
        attempts.len() >= 2,
        "the lost answer and its replay are two attempts: {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    for attempt in &attempts {
        assert_eq!(attribute(attempt, "adapter"), Some(adapter.as_str()));
        let in_trace: Vec<&str> = spans
            .iter()
            .filter(|s| s.trace_id == attempt.trace_id && s.span_id != attempt.span_id)
            .map(|s| s.name.as_str())
            .collect();
        assert!(in_trace.contains(&"adapter.call"), "{in_trace:?}");
        assert!(in_trace.contains(&"checkpoint.conclude"), "{in_trace:?}");
        assert!(
            attempt.parent_span_id.is_empty(),
            "an attempt starts its trace"
        );
    }
    let trace_ids: std::collections::BTreeSet<&Vec<u8>> =
        attempts.iter().map(|a| &a.trace_id).collect();
    assert_eq!(trace_ids.len(), attempts.len(), "one trace per attempt");
    // Checkpoints 2–3, before each call, are a span of their own too.
    assert!(
        spans
            .iter()
            .any(|s| s.name == "checkpoint.obligation" && trace_ids.contains(&s.trace_id)),
        "the obligation checkpoint is traced"
    );
    traces.shutdown();
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn with_log_lines_quieted_to_warnings_the_attempts_still_reach_the_collector(pool: PgPool) {
    let (url, received) = collector().await;
    let args = server::telemetry::TelemetryArgs {
        log_format: server::telemetry::LogFormat::Text,
        otlp_endpoint: Some(url.clone()),
        trace_filter: server::telemetry::DEFAULT_FILTER.to_owned(),
    };
    let traces = server::telemetry::Tracing::to(Some(&url))
        .unwrap()
        .expect("an endpoint turns tracing on");
    // The subscriber `serve` installs, as it is with RUST_LOG=warn.
    let subscriber = server::telemetry::subscriber(&args, "warn", Some(&traces)).unwrap();
    let guard = tracing::subscriber::set_default(subscriber);
    let (_destination, adapter) = notice_destination(&pool).await;
    run_one_notice(&pool, &adapter, "notice-quiet").await;
    drop(guard);
    let traces = flushed(traces).await;

    let spans = spans(&received.lock().unwrap());
    assert!(
        spans
            .iter()
            .any(|s| s.name == "step.attempt" && attribute(s, "adapter") == Some(adapter.as_str())),
        "the attempt is traced whatever the log lines' filter: {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    traces.shutdown();
}
