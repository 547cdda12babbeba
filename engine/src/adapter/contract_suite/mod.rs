//! Verification of an adapter file against a sandbox (docs/DESIGN.md §5, the trust ladder): a
//! claim counts only where it was proven on its failure path.
//!
//! [`verify`] provokes every failure path the file's claims are about, against the live
//! destination behind the adapter, through the adapter itself (its templates, its rules, its
//! lookup), so it checks exactly what the engine will rely on:
//!
//! - the **probe** (`verify.probe`) must be accepted and read as a success;
//! - **lost answers**: the probe is sent again and the connection closed without reading the
//!   answer (at once, and after holding it past the deadline); the same-key replay must return
//!   that very effect, and the lookup must find exactly one;
//! - **declines and errors** (`verify.provoke`): each request must be answered as the file says,
//!   by the rule it names; a lookup must then *not* find a rejected attempt, and a rule reading
//!   an answer as `failed_before_effect` counts only once a lookup proved that nothing happened;
//! - the **idempotency key**: a replay, concurrent sends, the same key with other content;
//! - the **lookup**: found, not found for a key never sent, another digest, the visibility
//!   window, and with `pages` a walk over more than one page;
//! - **withdrawal**, twice under one key.
//!
//! Each check bears on one [`Claim`] and ends [`Verdict::Held`], [`Verdict::Contradicted`] or
//! [`Verdict::Inconclusive`]; a claim is verified when every check on it held, refuted when one
//! was contradicted, unverified otherwise (never provoked, or a check that could not run). Each
//! run uses fresh request keys (`contract-suite/<uuid>/…`); the probes are real effects at the
//! sandbox, which its records show.
//!
//! A misbehaving destination never makes the suite panic: whatever it answers, or fails to
//! answer, becomes a check whose detail says what was seen.

mod idempotency;
mod lookup;
mod provoke;
mod withdrawal;
mod words;

use std::future::poll_fn;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;
use uuid::Uuid;

use crate::adapter::{
    Adapter, BoxFuture, DataAdapter, LookupObservation, PreparedRequest, WithdrawalObservation,
};
use crate::domain::{Claim, InputDigest, RequestKey, TransportObservation, Trust};
use words::{describe, describe_lookup, describe_withdrawal, references};

/// How many sends race under one key in the concurrency check.
pub const CONCURRENT_SENDS: usize = 8;

/// How long past the declared visibility window the suite keeps looking for a delivery before
/// it concludes the lookup never finds it.
pub const LOOKUP_MARGIN: Duration = Duration::from_secs(2);

/// How often the suite asks again while waiting for a delivery to become visible.
const LOOKUP_POLL: Duration = Duration::from_millis(50);

/// The check that proves a rule reading an answer as failed before effect: the lookup found
/// nothing after it. It proves the rule only as far as the lookup itself is verified.
const NOTHING_HAPPENED: &str = "nothing happened";

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The failure path was provoked and the claim held.
    Held,
    /// The sandbox contradicted the claim: the detail is the evidence.
    Contradicted,
    /// The check could not run or could not tell (the sandbox unreachable, nothing to compare).
    Inconclusive,
}

/// One check of one claim against the live destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimCheck {
    pub claim: Claim,
    /// What was provoked, in a few words: "replay", "answer lost (connection closed)".
    pub check: &'static str,
    pub verdict: Verdict,
    /// What the suite saw, as a clause.
    pub detail: String,
}

/// What one claim came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimVerdict {
    pub claim: Claim,
    pub trust: Trust,
    /// What proved it, or the contradiction, or why it stays unverified.
    pub evidence: String,
}

/// Every check of one adapter's verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteReport {
    /// The adapter's registered name.
    pub adapter: String,
    /// Every claim its file makes, in the file's order.
    pub claims: Vec<Claim>,
    /// Every check, in the order they ran.
    pub checks: Vec<ClaimCheck>,
}

impl SuiteReport {
    /// What `claim` came to: refuted by any contradiction, verified when every check on it
    /// held, unverified when it was never provoked or a check could not tell.
    pub fn verdict(&self, claim: &Claim) -> ClaimVerdict {
        let on: Vec<&ClaimCheck> = self.checks.iter().filter(|c| c.claim == *claim).collect();
        let (trust, evidence) =
            if let Some(c) = on.iter().find(|c| c.verdict == Verdict::Contradicted) {
                (Trust::Refuted, c.detail.clone())
            } else if let Some(c) = on.iter().find(|c| c.verdict == Verdict::Inconclusive) {
                (Trust::Unverified, c.detail.clone())
            } else if on.is_empty() {
                (Trust::Unverified, never_provoked(claim))
            } else if let Some(lookup) = self.unproven_witness(&on) {
                (
                    Trust::Unverified,
                    format!(
                        "proven only by a lookup's `not_found`, and the lookup is {}: {}",
                        lookup.trust.label(),
                        lookup.evidence
                    ),
                )
            } else {
                let checks: Vec<&str> = on.iter().map(|c| c.check).collect();
                (Trust::Verified, format!("held under {}", checks.join(", ")))
            };
        ClaimVerdict {
            claim: claim.clone(),
            trust,
            evidence,
        }
    }

    /// The lookup's verdict when `checks` rest on its `not_found` (a rule reading an answer as
    /// failed before effect) and the lookup itself is not verified: a witness that proves
    /// nothing proves nothing of the rule either.
    fn unproven_witness(&self, checks: &[&ClaimCheck]) -> Option<ClaimVerdict> {
        if !checks.iter().any(|c| c.check == NOTHING_HAPPENED) {
            return None;
        }
        Some(self.verdict(&Claim::Lookup)).filter(|lookup| lookup.trust != Trust::Verified)
    }

    /// Every claim's verdict, in the file's order.
    pub fn verdicts(&self) -> Vec<ClaimVerdict> {
        self.claims.iter().map(|c| self.verdict(c)).collect()
    }

    /// The checks that bore on `claim`.
    pub fn checks_of<'a>(&'a self, claim: &'a Claim) -> impl Iterator<Item = &'a ClaimCheck> {
        self.checks.iter().filter(move |c| c.claim == *claim)
    }

    /// Whether the version may send: its probe was delivered and read as a success, and no
    /// claim was refuted. Unverified claims are allowed; they count for nothing.
    pub fn passed(&self) -> bool {
        self.verdict(&Claim::Delivery).trust == Trust::Verified
            && self.verdicts().iter().all(|v| v.trust != Trust::Refuted)
    }

    /// One line per claim: its trust, and for any but a verified one why.
    pub fn summary(&self) -> String {
        self.verdicts()
            .iter()
            .map(|v| match v.trust {
                Trust::Verified => format!("{}: verified", v.claim.label()),
                Trust::Unverified | Trust::Refuted => {
                    format!("{}: {} — {}", v.claim.label(), v.trust.label(), v.evidence)
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Every check with what was seen, for `--verbose`.
    pub fn details(&self) -> String {
        self.checks
            .iter()
            .map(|c| {
                format!(
                    "{} / {}: {:?} — {}",
                    c.claim.label(),
                    c.check,
                    c.verdict,
                    c.detail
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The refuted claims as one short clause, for an error message.
    pub fn refusal(&self) -> String {
        let refuted: Vec<String> = self
            .verdicts()
            .into_iter()
            .filter(|v| v.trust == Trust::Refuted)
            .map(|v| format!("{} refuted ({})", v.claim.label(), short(&v.evidence)))
            .collect();
        if refuted.is_empty() {
            let delivery = self.verdict(&Claim::Delivery);
            format!(
                "adapter `{}`: delivery {} ({})",
                self.adapter,
                delivery.trust.label(),
                short(&delivery.evidence)
            )
        } else {
            format!("adapter `{}`: {}", self.adapter, refuted.join("; "))
        }
    }
}

/// At most 200 characters of `text`, cut at a character boundary.
fn short(text: &str) -> String {
    if text.chars().count() <= 200 {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(200).collect::<String>())
    }
}

/// Why a claim no check bore on stays unverified.
fn never_provoked(claim: &Claim) -> String {
    match claim {
        Claim::Rule { .. } => "never provoked: the answers it reads as nothing having happened read as outcome unknown".to_owned(),
        _ => "never checked".to_owned(),
    }
}

/// Verifies every claim of `adapter`'s file against the destination it calls.
pub async fn verify(name: &str, adapter: &DataAdapter) -> SuiteReport {
    let run = Run {
        adapter,
        id: Uuid::new_v4(),
    };
    let mut report = SuiteReport {
        adapter: name.to_owned(),
        claims: adapter.spec().claims(),
        checks: Vec::new(),
    };
    let (probed, probe) = run.send_probe().await;
    report.checks.push(probed);
    let Some(probe) = probe else {
        // Nothing is trusted without a delivery read as a success.
        return report;
    };
    let spec = adapter.spec();
    let (around, lost, provoked, idempotency, withdrawal) = tokio::join!(
        async {
            match spec.lookup {
                Some(_) => Some(run.around_the_window(&probe).await),
                None => None,
            }
        },
        run.lose_answers(&probe),
        run.provoke(),
        async {
            match spec.idempotency {
                Some(_) => run.idempotency(&probe).await,
                None => (Vec::new(), None),
            }
        },
        async {
            match spec.withdraw {
                Some(_) => run.withdrawal().await,
                None => Vec::new(),
            }
        },
    );
    let (idempotency, refusal) = idempotency;
    report.checks.extend(idempotency);
    report.checks.extend(withdrawal);
    report.checks.extend(provoked.checks.iter().cloned());
    let mut lost = lost;
    if spec.idempotency.is_some() {
        report
            .checks
            .extend(run.replay_lost(&mut lost, &probe).await);
    }
    match around {
        Some(around) => {
            let lookups = run
                .lookup(&probe, around, &lost, &provoked, refusal.as_ref())
                .await;
            report.checks.extend(lookups);
        }
        None => report.checks.extend(run.no_lookup(&provoked)),
    }
    report
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

fn check(claim: Claim, check: &'static str, verdict: Verdict, detail: String) -> ClaimCheck {
    ClaimCheck {
        claim,
        check,
        verdict,
        detail,
    }
}

/// A check from an outcome: `Ok` held, `Err` contradicted.
fn held_or_contradicted(
    claim: Claim,
    name: &'static str,
    outcome: Result<String, String>,
) -> ClaimCheck {
    match outcome {
        Ok(detail) => check(claim, name, Verdict::Held, detail),
        Err(detail) => check(claim, name, Verdict::Contradicted, detail),
    }
}

/// The probe, once accepted: its key, digest and request, its reference, and when the
/// destination answered (its visibility window runs from then).
struct Probe {
    key: RequestKey,
    digest: InputDigest,
    request: Value,
    reference: String,
    answered: Instant,
}

/// A delivery whose answer the suite closed without reading.
struct Lost {
    /// "answer lost (connection closed)" or "answer lost (past the deadline)".
    check: &'static str,
    key: RequestKey,
    digest: InputDigest,
    /// Whether the destination began to answer (so it had the request).
    answered: bool,
    /// The effect a same-key replay returned, once one did.
    replayed: Option<String>,
}

/// One run of the suite: its adapter and the id that makes its keys fresh.
struct Run<'a> {
    adapter: &'a DataAdapter,
    id: Uuid,
}

impl Run<'_> {
    fn key(&self, label: &str) -> RequestKey {
        RequestKey::from(format!("contract-suite/{}/{label}", self.id.simple()))
    }

    fn digest(&self, label: &str) -> InputDigest {
        InputDigest::of_bytes(format!("contract-suite/{}/{label}", self.id.simple()).as_bytes())
    }

    /// Sends the file's probe: it must be accepted and read as a success (a sandbox that could
    /// not be reached proves nothing either way).
    async fn send_probe(&self) -> (ClaimCheck, Option<Probe>) {
        let request = self.probe_request();
        let key = self.key("probe");
        let digest = self.digest("probe");
        let (seen, _) = self.deliver(&key, &digest, &request).await;
        let answered = Instant::now();
        match seen {
            TransportObservation::Accepted {
                external_reference,
                replayed: false,
                ..
            } => {
                let detail = format!("the probe was accepted as {external_reference}");
                let probe = Probe {
                    key,
                    digest,
                    request,
                    reference: external_reference,
                    answered,
                };
                (
                    check(Claim::Delivery, "probe", Verdict::Held, detail),
                    Some(probe),
                )
            }
            other => {
                let verdict = match other {
                    TransportObservation::ConnectFailed { .. }
                    | TransportObservation::NotSent { .. }
                    | TransportObservation::DeadlineExceeded { .. }
                    | TransportObservation::ConnectionLost { .. } => Verdict::Inconclusive,
                    _ => Verdict::Contradicted,
                };
                let detail = format!("the probe {}, not read as a success", describe(&other));
                (check(Claim::Delivery, "probe", verdict, detail), None)
            }
        }
    }

    /// The file's `verify.probe` (a file without one is refused when it is parsed).
    fn probe_request(&self) -> Value {
        self.adapter.spec().probe().cloned().unwrap_or(Value::Null)
    }

    /// `request` shaped by the adapter under `key`, carrying `digest`.
    fn prepare(
        &self,
        key: &RequestKey,
        digest: &InputDigest,
        request: &Value,
    ) -> Result<PreparedRequest, String> {
        self.adapter
            .prepare(key, request, digest)
            .map_err(|e| format!("the adapter could not prepare its probe: {e}"))
    }

    /// Sends `request` under `key` and reads the answer with every rule of the file; with the
    /// index of the rule that matched.
    async fn deliver(
        &self,
        key: &RequestKey,
        digest: &InputDigest,
        request: &Value,
    ) -> (TransportObservation, Option<usize>) {
        match self.prepare(key, digest, request) {
            Ok(prepared) => self.adapter.deliver_read(key, &prepared).await,
            Err(detail) => (
                TransportObservation::UnreadableResponse { status: 0, detail },
                None,
            ),
        }
    }

    /// Sends the probe twice more, under fresh keys, and closes each connection without
    /// reading the answer: at once, and after holding it past the deadline.
    async fn lose_answers(&self, probe: &Probe) -> Vec<Lost> {
        let past_deadline = Duration::from_millis(self.adapter.contract().deadline_ms + 100);
        let ways = [
            (
                "answer lost (connection closed)",
                "lost/closed",
                Duration::ZERO,
            ),
            (
                "answer lost (past the deadline)",
                "lost/late",
                past_deadline,
            ),
        ];
        let sends = ways
            .into_iter()
            .map(|(check, label, hold)| {
                Box::pin(async move {
                    let key = self.key(label);
                    let digest = self.digest(label);
                    let answered = match self.prepare(&key, &digest, &probe.request) {
                        Ok(prepared) => self.adapter.deliver_unread(&key, &prepared, hold).await,
                        Err(_) => false,
                    };
                    Lost {
                        check,
                        key,
                        digest,
                        answered,
                        replayed: None,
                    }
                }) as BoxFuture<'_, Lost>
            })
            .collect();
        join_all(sends).await
    }
}
