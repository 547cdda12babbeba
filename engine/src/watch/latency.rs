//! Where time goes, as latency histograms recorded into the process's `metrics` recorder: the
//! server installs a Prometheus one (`/metrics`, `z29c worker --metrics-addr`); in a process
//! that installs none, recording does nothing. Unlike the rest of [`crate::watch`] these are
//! what one process saw since it started, not durable figures: each process reports its own,
//! and Prometheus sums them.

use std::time::{Duration, SystemTime};

use uuid::Uuid;

use crate::domain::AttemptOutcome;

/// Seconds an outbound call to a destination took (a delivery or a withdrawal), by adapter and
/// by the attempt outcome the transport's observation means.
pub const ADAPTER_CALL: &str = "z29c_adapter_call_duration_seconds";
/// Seconds from the claim that took a due step to its receipt's commit, by adapter. Measured
/// in the worker from the claim's commit: the claim replaces the step's due time with its lease,
/// so the time a step waited for a free worker before that is not in it.
pub const READY_TO_RECEIPT: &str = "z29c_step_ready_to_receipt_seconds";
/// Seconds from the claim's commit to the first byte of the call (authority, request identity).
pub const CLAIM_TO_SEND: &str = "z29c_step_claim_to_send_seconds";
/// Seconds from an outbox event's creation to the end of its handling by every consumer.
pub const OUTBOX_LAG: &str = "z29c_outbox_lag_seconds";

/// The engine's histograms and what each measures, for the exporter's `# HELP` lines.
pub const HISTOGRAMS: [(&str, &str); 4] = [
    (
        ADAPTER_CALL,
        "Outbound calls to destinations, by adapter and outcome.",
    ),
    (
        READY_TO_RECEIPT,
        "From the claim of a due step to its receipt's commit, by adapter.",
    ),
    (
        CLAIM_TO_SEND,
        "From the claim of a step to the start of its call, by adapter.",
    ),
    (
        OUTBOX_LAG,
        "From an outbox event's creation to its handling by every consumer.",
    ),
];

/// The label an attempt outcome carries in [`ADAPTER_CALL`].
fn outcome_label(outcome: AttemptOutcome) -> &'static str {
    match outcome {
        AttemptOutcome::Rejected => "rejected",
        AttemptOutcome::FailedBeforeEffect => "failed_before_effect",
        AttemptOutcome::OutcomeUnknown => "outcome_unknown",
        AttemptOutcome::Succeeded => "succeeded",
    }
}

/// Records one outbound call to `adapter` that took `took` and ended in `outcome`.
pub fn adapter_call(adapter: &str, outcome: AttemptOutcome, took: Duration) {
    metrics::histogram!(ADAPTER_CALL, "adapter" => adapter.to_owned(), "outcome" => outcome_label(outcome))
        .record(took);
}

/// Records a receipt committed `took` after the claim of its step.
pub fn ready_to_receipt(adapter: &str, took: Duration) {
    metrics::histogram!(READY_TO_RECEIPT, "adapter" => adapter.to_owned()).record(took);
}

/// Records a call that began `took` after the claim of its step.
pub fn claim_to_send(adapter: &str, took: Duration) {
    metrics::histogram!(CLAIM_TO_SEND, "adapter" => adapter.to_owned()).record(took);
}

/// Records that the event `event_id` (a version 7 UUID, so it carries its creation time) has
/// just been handled by every consumer.
pub fn outbox_handled(event_id: Uuid) {
    let Some((secs, nanos)) = event_id.get_timestamp().map(|t| t.to_unix()) else {
        return;
    };
    let created = SystemTime::UNIX_EPOCH + Duration::new(secs, nanos);
    // A clock stepped back makes the lag zero, never negative.
    let lag = SystemTime::now()
        .duration_since(created)
        .unwrap_or_default();
    metrics::histogram!(OUTBOX_LAG).record(lag);
}
