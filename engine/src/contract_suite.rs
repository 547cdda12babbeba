//! The adapter contract suite: "a contract claim is trusted only if the adapter's contract test
//! suite passes against it" (DESIGN.md § Adapter contract).
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

use std::collections::BTreeSet;
use std::future::poll_fn;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;
use uuid::Uuid;

use crate::adapter::{Adapter, BoxFuture, LookupObservation, WithdrawalObservation};
use crate::definition::PreparedRequest;
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

    /// A synthetic request following the destination protocol.
    fn request(key: &RequestKey, digest: &InputDigest) -> PreparedRequest {
        let body = json!({
            "client_reference": key.as_str(),
            "digest": digest.as_str(),
            "recipient": PROBE_RECIPIENT,
            "summary": "Z29C contract suite probe; not a document",
        });
        PreparedRequest {
            request_digest: InputDigest::of_json(&body),
            content_digest: digest.clone(),
            body,
        }
    }

    async fn deliver(&self, key: &RequestKey, digest: &InputDigest) -> TransportObservation {
        self.adapter.deliver(key, &Self::request(key, digest)).await
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

    async fn idempotency(&self, checks: &mut Vec<ClaimCheck>) {
        let key = self.key("replay");
        let digest = self.digest("replay");
        let original = self.accepted(&key, &digest).await;
        let replay = match &original {
            Ok(reference) => self.replayed(&key, &digest, reference).await,
            Err(why) => Err(why.clone()),
        };
        checks.push(check(claims::IDEMPOTENT_REPLAY, replay));
        checks.push(check(
            claims::IDEMPOTENT_UNDER_CONCURRENCY,
            self.concurrent().await,
        ));
        let conflict = match &original {
            Ok(reference) => self.conflict(&key, reference).await,
            Err(why) => Err(why.clone()),
        };
        checks.push(check(claims::IDEMPOTENCY_CONFLICT_REFUSED, conflict));
    }

    async fn replayed(
        &self,
        key: &RequestKey,
        digest: &InputDigest,
        original: &str,
    ) -> Result<String, String> {
        match self.deliver(key, digest).await {
            TransportObservation::Accepted {
                external_reference,
                replayed: true,
                ..
            } if external_reference == original => {
                Ok(format!("a second send under `{key}` replayed {original}"))
            }
            TransportObservation::Accepted {
                external_reference,
                replayed: false,
                ..
            } if external_reference == original => Err(format!(
                "a second send under `{key}` returned {original} without marking it replayed"
            )),
            TransportObservation::Accepted {
                external_reference, ..
            } => Err(format!(
                "a second send with the same key and digest was accepted as {external_reference} \
                 instead of replaying {original}"
            )),
            other => Err(format!(
                "a second send with the same key and digest {} instead of replaying {original}",
                describe(&other)
            )),
        }
    }

    async fn concurrent(&self) -> Result<String, String> {
        let key = self.key("concurrent");
        let request = Self::request(&key, &self.digest("concurrent"));
        let sends = (0..CONCURRENT_SENDS)
            .map(|_| self.adapter.deliver(&key, &request))
            .collect();
        let seen = join_all(sends).await;
        let mut references = BTreeSet::new();
        let mut unaccepted = Vec::new();
        for observation in &seen {
            match observation {
                TransportObservation::Accepted {
                    external_reference, ..
                } => {
                    references.insert(external_reference.as_str());
                }
                other => unaccepted.push(describe(other)),
            }
        }
        let listed = references.iter().copied().collect::<Vec<_>>().join(", ");
        if references.len() > 1 {
            Err(format!(
                "{CONCURRENT_SENDS} concurrent sends under `{key}` made {} deliveries ({listed})",
                references.len()
            ))
        } else if !unaccepted.is_empty() {
            Err(format!(
                "{} of {CONCURRENT_SENDS} concurrent sends under `{key}` were not accepted: {}",
                unaccepted.len(),
                unaccepted.join("; ")
            ))
        } else {
            Ok(format!(
                "all {CONCURRENT_SENDS} concurrent sends under `{key}` named {listed}"
            ))
        }
    }

    async fn conflict(&self, key: &RequestKey, original: &str) -> Result<String, String> {
        match self.deliver(key, &self.digest("replay/other")).await {
            TransportObservation::Rejected { status, code }
            | TransportObservation::NotAccepted { status, code } => Ok(format!(
                "the same key with another digest was refused with {status} `{code}`"
            )),
            TransportObservation::Accepted {
                external_reference,
                replayed: true,
                ..
            } => Err(format!(
                "the same key with another digest was answered as a replay of \
                 {external_reference} (the original is {original})"
            )),
            TransportObservation::Accepted {
                external_reference,
                replayed: false,
                ..
            } => Err(format!(
                "the same key with another digest was accepted as the new delivery \
                 {external_reference} besides {original}"
            )),
            other => Err(format!(
                "the same key with another digest {} instead of being refused",
                describe(&other)
            )),
        }
    }

    async fn lookup(&self, window_ms: u64, checks: &mut Vec<ClaimCheck>) {
        let window = Duration::from_millis(window_ms);
        let key = self.key("lookup");
        let digest = self.digest("lookup");
        let delivered = self.accepted(&key, &digest).await;
        // The destination committed before it answered, so the window has certainly started.
        let answered = Instant::now();

        let reference = match delivered {
            Ok(reference) => reference,
            Err(why) => {
                let absence = self.absence(&digest).await;
                checks.push(check(claims::LOOKUP_FINDS_DELIVERY, Err(why.clone())));
                checks.push(check(claims::LOOKUP_REPORTS_ABSENCE, absence));
                checks.push(check(
                    claims::LOOKUP_REPORTS_CONFLICTING_DIGEST,
                    Err(why.clone()),
                ));
                if window_ms > 0 {
                    checks.push(check(claims::LOOKUP_INSIDE_WINDOW, Err(why.clone())));
                }
                checks.push(check(claims::VISIBILITY_WINDOW, Err(why)));
                return;
            }
        };

        // First thing after the answer, so that a zero window is tested at its edge.
        let early = self.adapter.lookup(&key, digest.as_str()).await;
        let absence = self.absence(&digest).await;
        let inside = (window_ms > 0).then(|| inside_window(&early, &reference, window_ms));
        let at_window = if window_ms == 0 {
            early
        } else {
            // The window is real time at the destination: waiting it out is the check itself.
            tokio::time::sleep_until(answered + window).await;
            self.adapter.lookup(&key, digest.as_str()).await
        };
        let visible = window_not_longer(&at_window, &reference, window_ms);

        let found = if is_found(&at_window, &reference) {
            Ok(format!(
                "a lookup of `{key}` found {reference} with the same digest"
            ))
        } else {
            self.poll_until_found(&key, &digest, &reference, answered, window)
                .await
        };

        let conflicting = if found.is_ok() {
            match self
                .adapter
                .lookup(&key, self.digest("lookup/other").as_str())
                .await
            {
                LookupObservation::FoundWithConflictingDigest {
                    external_reference, ..
                } if external_reference == reference => Ok(format!(
                    "a lookup of `{key}` with another digest answered \
                     `found_with_conflicting_digest` for {reference}"
                )),
                other => Err(format!(
                    "a lookup of `{key}` with another digest answered {}",
                    describe_lookup(&other)
                )),
            }
        } else {
            Err(format!(
                "it could not be checked because the probe delivery {reference} was never found"
            ))
        };

        checks.push(check(claims::LOOKUP_FINDS_DELIVERY, found));
        checks.push(check(claims::LOOKUP_REPORTS_ABSENCE, absence));
        checks.push(check(
            claims::LOOKUP_REPORTS_CONFLICTING_DIGEST,
            conflicting,
        ));
        if let Some(inside) = inside {
            checks.push(check(claims::LOOKUP_INSIDE_WINDOW, inside));
        }
        checks.push(check(claims::VISIBILITY_WINDOW, visible));
    }

    /// A lookup of a reference this run never sent must answer `not_found`.
    async fn absence(&self, digest: &InputDigest) -> Result<String, String> {
        let never_sent = self.key("never-sent");
        match self.adapter.lookup(&never_sent, digest.as_str()).await {
            LookupObservation::NotFound => Ok(format!(
                "a lookup of the never-sent `{never_sent}` answered `not_found`"
            )),
            other => Err(format!(
                "a lookup of the never-sent `{never_sent}` answered {}",
                describe_lookup(&other)
            )),
        }
    }

    /// Asks until the delivery is found or the window plus [`LOOKUP_MARGIN`] has passed.
    async fn poll_until_found(
        &self,
        key: &RequestKey,
        digest: &InputDigest,
        reference: &str,
        answered: Instant,
        window: Duration,
    ) -> Result<String, String> {
        let deadline = answered + window + LOOKUP_MARGIN;
        loop {
            let seen = self.adapter.lookup(key, digest.as_str()).await;
            match &seen {
                LookupObservation::Found {
                    external_reference, ..
                } if external_reference == reference => {
                    return Ok(format!(
                        "a lookup of `{key}` found {reference} with the same digest after {} ms",
                        answered.elapsed().as_millis()
                    ));
                }
                LookupObservation::Found { .. }
                | LookupObservation::FoundWithConflictingDigest { .. } => {
                    return Err(format!(
                        "a lookup of `{key}` for {reference} answered {}",
                        describe_lookup(&seen)
                    ));
                }
                LookupObservation::NotFound
                | LookupObservation::Processing
                | LookupObservation::Unavailable { .. }
                | LookupObservation::NotSupported => {}
            }
            if Instant::now() + LOOKUP_POLL > deadline {
                return Err(format!(
                    "{reference} was still not found {} ms after it was accepted (declared window \
                     {} ms); the last lookup answered {}",
                    answered.elapsed().as_millis(),
                    window.as_millis(),
                    describe_lookup(&seen)
                ));
            }
            // Visibility is about real time: waiting for it is the check itself.
            tokio::time::sleep(LOOKUP_POLL).await;
        }
    }

    async fn no_lookup(&self) -> ClaimCheck {
        let key = self.key("never-sent");
        let outcome = match self
            .adapter
            .lookup(&key, self.digest("never-sent").as_str())
            .await
        {
            LookupObservation::NotSupported => {
                Ok("the adapter's lookup answers that it has none".to_owned())
            }
            other => Err(format!(
                "its lookup answered {} although the contract declares no lookup",
                describe_lookup(&other)
            )),
        };
        check(claims::NO_LOOKUP, outcome)
    }

    async fn withdrawal(&self, checks: &mut Vec<ClaimCheck>) {
        let delivery_key = self.key("withdrawn");
        let reference = match self
            .accepted(&delivery_key, &self.digest("withdrawn"))
            .await
        {
            Ok(reference) => reference,
            Err(why) => {
                checks.push(check(claims::WITHDRAWAL, Err(why.clone())));
                checks.push(check(claims::WITHDRAWAL_REPLAY, Err(why)));
                return;
            }
        };
        let key = self.key("withdrawal");
        let first = match self.adapter.withdraw(&key, &reference).await {
            WithdrawalObservation::Withdrawn {
                withdrawal_reference,
                ..
            } => Ok(withdrawal_reference),
            WithdrawalObservation::Transport(other) => Err(format!(
                "withdrawing {reference} under `{key}` {}",
                describe(&other)
            )),
        };
        let original = match first {
            Ok(original) => {
                checks.push(check(
                    claims::WITHDRAWAL,
                    Ok(format!(
                        "withdrawing {reference} under `{key}` recorded withdrawal {original}"
                    )),
                ));
                original
            }
            Err(why) => {
                checks.push(check(claims::WITHDRAWAL, Err(why.clone())));
                checks.push(check(claims::WITHDRAWAL_REPLAY, Err(why)));
                return;
            }
        };
        let again = match self.adapter.withdraw(&key, &reference).await {
            WithdrawalObservation::Withdrawn {
                withdrawal_reference,
                ..
            } if withdrawal_reference == original => Ok(format!(
                "withdrawing {reference} again under `{key}` returned {original} again"
            )),
            WithdrawalObservation::Withdrawn {
                withdrawal_reference,
                ..
            } => Err(format!(
                "withdrawing {reference} again under `{key}` returned {withdrawal_reference} \
                 instead of {original}"
            )),
            WithdrawalObservation::Transport(other) => Err(format!(
                "withdrawing {reference} again under `{key}` {}",
                describe(&other)
            )),
        };
        checks.push(check(claims::WITHDRAWAL_REPLAY, again));
    }
}

fn is_found(seen: &LookupObservation, reference: &str) -> bool {
    matches!(seen, LookupObservation::Found { external_reference, .. } if external_reference == reference)
}

/// Right after delivery, inside a window longer than zero: found and not found both fit the
/// claim, and the suite draws no conclusion from the absence.
fn inside_window(
    early: &LookupObservation,
    reference: &str,
    window_ms: u64,
) -> Result<String, String> {
    match early {
        LookupObservation::Found {
            external_reference, ..
        } if external_reference == reference => Ok(format!(
            "a lookup right after delivery already found {reference}; inside the declared \
             {window_ms} ms window only a `found` is conclusive"
        )),
        LookupObservation::NotFound => Ok(format!(
            "a lookup right after delivery answered `not_found`, which inside the declared \
             {window_ms} ms window is not proof of absence"
        )),
        LookupObservation::Processing => Ok(format!(
            "a lookup right after delivery answered `processing`, which inside the declared \
             {window_ms} ms window proves nothing either way"
        )),
        LookupObservation::Found { .. }
        | LookupObservation::FoundWithConflictingDigest { .. }
        | LookupObservation::Unavailable { .. }
        | LookupObservation::NotSupported => Err(format!(
            "a lookup right after delivering {reference} answered {}, which is neither the \
             delivery nor its not-yet-visible absence",
            describe_lookup(early)
        )),
    }
}

/// Once the declared window has passed since the destination answered, the delivery must be
/// visible; otherwise a `not_found` the engine takes as authoritative could be wrong.
fn window_not_longer(
    seen: &LookupObservation,
    reference: &str,
    window_ms: u64,
) -> Result<String, String> {
    let when = if window_ms == 0 {
        "right after the delivery was accepted".to_owned()
    } else {
        format!("{window_ms} ms after the delivery was accepted")
    };
    match seen {
        LookupObservation::Found {
            external_reference, ..
        } if external_reference == reference => Ok(format!(
            "a lookup {when} found {reference}, as the declared {window_ms} ms window promises"
        )),
        LookupObservation::NotFound if window_ms == 0 => Err(format!(
            "a lookup {when} answered `not_found` for {reference}: absence inside a zero window, \
             so the destination's status index lags and a `not_found` would wrongly be taken as \
             proof"
        )),
        LookupObservation::NotFound => Err(format!(
            "a lookup {when} still answered `not_found` for {reference}: the destination's status \
             index lags longer than the declared {window_ms} ms, so a `not_found` after the \
             window would wrongly be taken as proof"
        )),
        LookupObservation::Found { .. }
        | LookupObservation::FoundWithConflictingDigest { .. }
        | LookupObservation::Processing
        | LookupObservation::Unavailable { .. }
        | LookupObservation::NotSupported => Err(format!(
            "a lookup {when} answered {}, so the declared {window_ms} ms window could not be \
             confirmed",
            describe_lookup(seen)
        )),
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
        TransportObservation::WorkerLost { .. } => "lost its worker".to_owned(),
    }
}

/// What a lookup saw, as the protocol names it.
fn describe_lookup(seen: &LookupObservation) -> String {
    match seen {
        LookupObservation::Found {
            external_reference,
            all,
            ..
        } if all.len() > 1 => format!(
            "`found` {external_reference} among {} deliveries ({})",
            all.len(),
            all.join(", ")
        ),
        LookupObservation::Found {
            external_reference, ..
        } => format!("`found` {external_reference}"),
        LookupObservation::FoundWithConflictingDigest {
            external_reference,
            digest,
        } => format!("`found_with_conflicting_digest` {external_reference} (stored {digest})"),
        LookupObservation::NotFound => "`not_found`".to_owned(),
        LookupObservation::Processing => "`processing`".to_owned(),
        LookupObservation::Unavailable { detail } => format!("`unavailable` ({detail})"),
        LookupObservation::NotSupported => "that the adapter has no lookup".to_owned(),
    }
}
