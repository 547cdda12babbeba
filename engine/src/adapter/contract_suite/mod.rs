//! The adapter contract suite: "a contract claim is trusted only if the adapter's contract test
//! suite passes against it" (docs/DESIGN.md §5).
//!
//! [`verify`] exercises every claim of an adapter's [`SideEffectContract`] against the live
//! destination behind it, through the [`Adapter`] trait alone, so it checks exactly what the
//! engine will rely on: the adapter and its destination together. Each run uses fresh request
//! keys (`contract-suite/<uuid>/…`) and synthetic requests addressed to
//! [`PROBE_RECIPIENT`]. The probes are real effects at the destination: a destination's ledger
//! shows them, and people can tell them apart by that recipient.
//!
//! A misbehaving destination never makes the suite panic: whatever it answers, or fails to
//! answer, becomes a failed [`ClaimCheck`] whose detail says what was seen.
//!
//! The claims are checked by concern: [`idempotency`], [`lookup`], [`withdrawal`].

mod idempotency;
mod lookup;
mod withdrawal;

use std::collections::BTreeSet;
use std::future::poll_fn;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;
use uuid::Uuid;

use crate::adapter::PreparedRequest;
use crate::adapter::{Adapter, BoxFuture, LookupObservation, WithdrawalObservation};
use crate::domain::{Compensation, InputDigest, RequestKey, TransportObservation};

/// The recipient of every probe delivery the suite makes.
pub const PROBE_RECIPIENT: &str = "contract-suite@z29c.invalid";

/// How many sends race under one key in the concurrency check.
pub const CONCURRENT_SENDS: usize = 8;

/// How long past the declared visibility window the suite keeps looking for a delivery before
/// it concludes the lookup never finds it.
pub const LOOKUP_MARGIN: Duration = Duration::from_secs(2);

/// How often the suite asks again while waiting for a delivery to become visible.
const LOOKUP_POLL: Duration = Duration::from_millis(50);

/// The claims the suite checks, worded to read in "adapter `x` claims …, but …".
pub mod claims {
    /// Same key and digest twice: the second send replays the original delivery.
    pub const IDEMPOTENT_REPLAY: &str =
        "an idempotency key (the same key and digest replay the original delivery)";
    /// Concurrent sends with one key all name one delivery.
    pub const IDEMPOTENT_UNDER_CONCURRENCY: &str =
        "an idempotency key (concurrent sends with one key make one delivery)";
    /// The same key with another digest is refused, never accepted.
    pub const IDEMPOTENCY_CONFLICT_REFUSED: &str =
        "an idempotency key (the same key with another digest is refused)";
    /// A delivery is found under its client reference, with its external reference.
    pub const LOOKUP_FINDS_DELIVERY: &str =
        "a status lookup (a delivery is found under its client reference)";
    /// A reference nobody sent is not found.
    pub const LOOKUP_REPORTS_ABSENCE: &str =
        "a status lookup (a reference that was never sent is not found)";
    /// A lookup with another digest reports the conflict rather than a match.
    pub const LOOKUP_REPORTS_CONFLICTING_DIGEST: &str =
        "a status lookup (a lookup with another digest reports the conflict)";
    /// Inside the declared window a lookup answers found or not-yet-visible, and the suite
    /// treats neither `not_found` as proof.
    pub const LOOKUP_INSIDE_WINDOW: &str =
        "a status lookup (inside the visibility window, absence is not proof)";
    /// Once the declared window has passed, a delivery is visible: the destination's real
    /// window is not longer than declared, so a later `not_found` is authoritative.
    pub const VISIBILITY_WINDOW: &str = "a visibility window no shorter than the destination's (a delivery is visible once the declared window has passed)";
    /// An adapter that declares no lookup answers that it has none.
    pub const NO_LOOKUP: &str = "no status lookup (the adapter answers that it has none)";
    /// A delivery can be withdrawn, and the withdrawal has its own reference.
    pub const WITHDRAWAL: &str = "withdrawal (a delivery can be withdrawn under its own key)";
    /// Withdrawing again with the same key returns the original withdrawal.
    pub const WITHDRAWAL_REPLAY: &str =
        "withdrawal (withdrawing again with the same key returns the original withdrawal)";
}

/// The result of checking one claim against the live destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimCheck {
    /// The claim, one of [`claims`].
    pub claim: &'static str,
    /// Whether the destination behaved as claimed.
    pub passed: bool,
    /// What the suite saw, as a clause that reads after "but" when the check failed.
    pub detail: String,
}

/// Every check of one adapter's suite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteReport {
    /// The adapter's registered name.
    pub adapter: String,
    /// One check per claim, in the order they ran.
    pub checks: Vec<ClaimCheck>,
}

impl SuiteReport {
    /// Whether every check passed: only then may the contract be trusted.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }

    /// The failed checks.
    pub fn failures(&self) -> impl Iterator<Item = &ClaimCheck> {
        self.checks.iter().filter(|c| !c.passed)
    }

    /// One sentence: that the adapter passed, or each failed claim and what was seen instead.
    pub fn summary(&self) -> String {
        if self.passed() {
            format!(
                "adapter `{}` honours every claim its contract suite checked ({} checks).",
                self.adapter,
                self.checks.len()
            )
        } else {
            format!("{}.", self.failure_clause())
        }
    }

    /// The failed claims as one clause without a full stop, for longer sentences.
    pub(crate) fn failure_clause(&self) -> String {
        let failures: Vec<String> = self
            .failures()
            .map(|c| format!("claims {}, but {}", c.claim, c.detail))
            .collect();
        format!("adapter `{}` {}", self.adapter, failures.join("; it also "))
    }
}

/// Checks every claim of `adapter`'s contract against its live destination.
pub async fn verify(name: &str, adapter: &dyn Adapter) -> SuiteReport {
    let contract = adapter.contract().clone();
    let run = Run {
        adapter,
        id: Uuid::new_v4(),
    };
    let mut checks = Vec::new();
    if contract.accepts_idempotency_key {
        run.idempotency(&mut checks).await;
    }
    if contract.query_by_client_reference {
        run.lookup(contract.visibility_window_ms, &mut checks).await;
    } else {
        checks.push(run.no_lookup().await);
    }
    match contract.compensation {
        Compensation::None => {}
        Compensation::SupportedWithLimits(_) => run.withdrawal(&mut checks).await,
    }
    SuiteReport {
        adapter: name.to_owned(),
        checks,
    }
}

/// Polls `futures` together on the current task and returns their outputs in order.
pub(crate) async fn join_all<'a, T>(futures: Vec<BoxFuture<'a, T>>) -> Vec<T> {
    let mut pending: Vec<Option<BoxFuture<'a, T>>> = futures.into_iter().map(Some).collect();
    let mut outputs: Vec<Option<T>> = pending.iter().map(|_| None).collect();
    poll_fn(|cx| {
        for (slot, output) in pending.iter_mut().zip(outputs.iter_mut()) {
            if let Some(future) = slot
                && let Poll::Ready(value) = Pin::as_mut(future).poll(cx)
            {
                *output = Some(value);
                *slot = None;
            }
        }
        if pending.iter().all(Option::is_none) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

fn check(claim: &'static str, outcome: Result<String, String>) -> ClaimCheck {
    match outcome {
        Ok(detail) => ClaimCheck {
            claim,
            passed: true,
            detail,
        },
        Err(detail) => ClaimCheck {
            claim,
            passed: false,
            detail,
        },
    }
}

/// One run of the suite: its adapter and the id that makes its keys fresh.
struct Run<'a> {
    adapter: &'a dyn Adapter,
    id: Uuid,
}

impl Run<'_> {
    fn key(&self, label: &str) -> RequestKey {
        RequestKey::from(format!("contract-suite/{}/{label}", self.id.simple()))
    }

    fn digest(&self, label: &str) -> InputDigest {
        InputDigest::of_bytes(format!("contract-suite/{}/{label}", self.id.simple()).as_bytes())
    }

    /// A synthetic request: the probe the adapter shapes for its destination.
    fn request(&self, key: &RequestKey, digest: &InputDigest) -> Result<PreparedRequest, String> {
        let probe = self.adapter.probe().unwrap_or_else(|| {
            json!({
                "recipient": PROBE_RECIPIENT,
                "summary": "Z29C contract suite probe; not a document",
            })
        });
        self.adapter
            .prepare(key, &probe, digest)
            .map_err(|e| format!("the adapter could not prepare its probe: {e}"))
    }

    async fn deliver(&self, key: &RequestKey, digest: &InputDigest) -> TransportObservation {
        match self.request(key, digest) {
            Ok(request) => self.adapter.deliver(key, &request).await,
            Err(detail) => TransportObservation::UnreadableResponse { status: 0, detail },
        }
    }

    /// Delivers a probe and returns its external reference, or why there is none.
    async fn accepted(&self, key: &RequestKey, digest: &InputDigest) -> Result<String, String> {
        match self.deliver(key, digest).await {
            TransportObservation::Accepted {
                external_reference, ..
            } => Ok(external_reference),
            other => Err(format!(
                "the probe delivery under `{key}` {}",
                describe(&other)
            )),
        }
    }
}

/// What a send saw, as a predicate ("the probe delivery … was refused …").
fn describe(seen: &TransportObservation) -> String {
    match seen {
        TransportObservation::AuthorityDenied { reason } => {
            format!("was denied authority ({reason})")
        }
        TransportObservation::RequestDiverged { .. } => {
            "diverged from the request bound to its key".to_owned()
        }
        TransportObservation::ConnectFailed { detail } => {
            format!("could not connect to the destination ({detail})")
        }
        TransportObservation::NotAccepted { status, code } => {
            format!("was refused with {status} `{code}`, nothing committed")
        }
        TransportObservation::Rejected { status, code } => {
            format!("was rejected with {status} `{code}`")
        }
        TransportObservation::Accepted {
            external_reference,
            replayed: false,
            ..
        } => format!("was accepted as {external_reference}"),
        TransportObservation::Accepted {
            external_reference,
            replayed: true,
            ..
        } => format!("was answered as a replay of {external_reference}"),
        TransportObservation::DeadlineExceeded { deadline_ms } => {
            format!("got no answer within the {deadline_ms} ms deadline")
        }
        TransportObservation::Restored => "was caught by a database restore".to_owned(),
        TransportObservation::ConnectionLost { detail } => {
            format!("lost its connection before an answer ({detail})")
        }
        TransportObservation::UnexpectedStatus { status } => {
            format!("was answered {status} without the promise that nothing was committed")
        }
        TransportObservation::UnreadableResponse { status, detail } => {
            format!("got an unreadable {status} answer ({detail})")
        }
        TransportObservation::Unmatched { status, excerpt } => {
            format!("was answered {status}, which no outcome rule recognizes ({excerpt})")
        }
        TransportObservation::WorkerLost { .. } => "lost its worker".to_owned(),
    }
}
