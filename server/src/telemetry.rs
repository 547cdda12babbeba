//! Logs and traces: log lines on stderr as text or JSON, and, only when a collector is named,
//! OpenTelemetry traces exported over OTLP/HTTP (protobuf) from a batch on a thread of its own.
//! Each step attempt is one trace (`engine::worker` opens the spans); every call to a
//! destination carries the attempt's W3C `traceparent`.

use std::collections::HashMap;

use anyhow::Context as _;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// For people: one line per event, fields as `key=value`.
    Text,
    /// For programs: one JSON object per line, its span and fields as members.
    Json,
}

/// The logging and tracing options every command takes.
#[derive(Debug, Clone, clap::Args)]
pub struct TelemetryArgs {
    /// How log lines on stderr are written: `text`, or `json` (one object per line).
    #[arg(
        long,
        env = "Z29C_LOG_FORMAT",
        value_enum,
        default_value = "text",
        global = true
    )]
    pub log_format: LogFormat,
    /// Export traces to this OpenTelemetry collector over OTLP/HTTP with protobuf bodies: its
    /// base URL (`/v1/traces` is appended). Tracing is off unless this or
    /// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL) is set.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", global = true)]
    pub otlp_endpoint: Option<String>,
    /// Which spans are exported, in `RUST_LOG`'s syntax. Traces have a filter of their own, so
    /// quieting the log lines (`RUST_LOG=warn`) never turns tracing off.
    #[arg(long, env = "Z29C_TRACE_FILTER", default_value = DEFAULT_FILTER, global = true)]
    pub trace_filter: String,
}

/// What is logged without `RUST_LOG`, and traced without `--trace-filter`.
pub const DEFAULT_FILTER: &str = "info,sqlx=warn,tower_sessions=warn";

/// Where traces go: the tracer provider, whose batch must be flushed before the process ends.
pub struct Tracing {
    provider: SdkTracerProvider,
}

impl Tracing {
    /// Traces exported to the collector at `endpoint` (a base URL, as `--otlp-endpoint`
    /// takes it), or to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT when `endpoint` is `None`; `None`
    /// when neither names one: tracing stays off.
    pub fn to(endpoint: Option<&str>) -> anyhow::Result<Option<Self>> {
        let builder = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary);
        let builder = match endpoint.filter(|e| !e.trim().is_empty()) {
            Some(base) => {
                builder.with_endpoint(format!("{}/v1/traces", base.trim().trim_end_matches('/')))
            }
            None if std::env::var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                .is_ok_and(|url| !url.trim().is_empty()) =>
            {
                builder
            }
            None => return Ok(None),
        };
        let exporter = builder
            .build()
            .context("building the OTLP trace exporter")?;
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name("z29c")
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        engine::adapter::set_trace_context(current_traceparent);
        Ok(Some(Self { provider }))
    }

    /// The layer that turns `tracing` spans into OpenTelemetry spans for this provider.
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + use<S>
    where
        S: Subscriber + Send + Sync + for<'span> LookupSpan<'span>,
    {
        tracing_opentelemetry::layer().with_tracer(self.provider.tracer("z29c"))
    }

    /// Exports every span ended so far; blocks until the collector answered or gave up.
    pub fn flush(&self) {
        if let Err(error) = self.provider.force_flush() {
            eprintln!("z29c: traces could not be flushed: {error}");
        }
    }

    /// Exports what is left and stops the exporter's thread.
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown() {
            eprintln!("z29c: the trace exporter did not shut down cleanly: {error}");
        }
    }
}

/// Installs the process's subscriber ([`subscriber`]) with `RUST_LOG` (or the default filter)
/// for the log lines. The caller shuts the returned [`Tracing`] down before exiting, so the
/// last spans reach the collector.
pub fn init(args: &TelemetryArgs) -> anyhow::Result<Option<Tracing>> {
    let log_filter = std::env::var("RUST_LOG").unwrap_or_else(|_| DEFAULT_FILTER.to_owned());
    let tracing = Tracing::to(args.otlp_endpoint.as_deref())?;
    subscriber(args, &log_filter, tracing.as_ref())?.init();
    Ok(tracing)
}

/// Log lines in the chosen format, filtered by `log_filter`, and the trace exporter when one is
/// configured, filtered by `--trace-filter`: each layer has its own filter, so neither gates
/// the other.
pub fn subscriber(
    args: &TelemetryArgs,
    log_filter: &str,
    tracing: Option<&Tracing>,
) -> anyhow::Result<impl Subscriber + Send + Sync + use<>> {
    let log_filter = EnvFilter::try_new(log_filter).context("reading RUST_LOG")?;
    let trace_filter = EnvFilter::try_new(&args.trace_filter).context("reading --trace-filter")?;
    let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let lines = match args.log_format {
        LogFormat::Text => lines.boxed(),
        LogFormat::Json => lines.json().boxed(),
    };
    let spans = tracing.map(|t| t.layer().with_filter(trace_filter));
    Ok(tracing_subscriber::registry()
        .with(lines.with_filter(log_filter))
        .with(spans))
}

/// The W3C `traceparent` of the current span, when it is traced.
fn current_traceparent() -> Option<String> {
    let context = tracing::Span::current().context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    carrier.remove("traceparent")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_endpoint_leaves_tracing_off() {
        // Only the argument is read here; the traces-only variable must be absent for this.
        if std::env::var_os("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none() {
            assert!(Tracing::to(None).unwrap().is_none());
            assert!(Tracing::to(Some("  ")).unwrap().is_none());
        }
    }

    #[test]
    fn a_traced_span_gives_a_w3c_traceparent_and_an_untraced_one_none() {
        assert_eq!(current_traceparent(), None, "outside any span");
        let traces = Tracing::to(Some("http://127.0.0.1:9")).unwrap().unwrap();
        let subscriber = tracing_subscriber::registry().with(traces.layer());
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("step.attempt");
            let _entered = span.enter();
            let header = current_traceparent().expect("a traced span has a traceparent");
            let parts: Vec<&str> = header.split('-').collect();
            assert_eq!(parts.len(), 4, "{header}");
            assert_eq!(parts[0], "00", "{header}");
            assert_eq!(parts[1].len(), 32, "{header}");
            assert_eq!(parts[2].len(), 16, "{header}");
            let trace_id = span.context().span().span_context().trace_id();
            assert_eq!(parts[1], trace_id.to_string(), "{header}");
        });
    }
}
