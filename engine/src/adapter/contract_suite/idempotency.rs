//! The idempotency key: a repeated key returns the original effect, also after its answer was
//! lost; concurrent sends under one key make one effect; a key reused with other content is
//! refused, and the rule that reads that refusal is proven with it.

use super::*;
use crate::domain::Operation;

/// The rule that read the refusal of the same key with another digest, when one did.
pub(super) struct Refusal {
    pub rule: usize,
    /// Whether the rule reads it as `failed_before_effect` (which a lookup must then prove).
    pub before_effect: bool,
}

impl Run<'_> {
    /// Replay, concurrency and conflict; returns the checks and the rule that read the refusal.
    pub(super) async fn idempotency(&self, probe: &Probe) -> (Vec<ClaimCheck>, Option<Refusal>) {
        let mut checks = Vec::new();
        let replay = self
            .replayed(&probe.key, &probe.digest, &probe.request, &probe.reference)
            .await;
        checks.push(held_or_contradicted(
            Claim::IdempotencyKey,
            "replay",
            replay,
        ));
        let concurrent = self.concurrent(&probe.request).await;
        checks.push(held_or_contradicted(
            Claim::IdempotencyKey,
            "concurrent sends",
            concurrent,
        ));
        let (seen, rule) = self
            .deliver(&probe.key, &self.digest("probe/other"), &probe.request)
            .await;
        let mut refusal = None;
        let outcome = match &seen {
            TransportObservation::Rejected { status, code }
            | TransportObservation::NotAccepted { status, code } => {
                let before_effect = matches!(seen, TransportObservation::NotAccepted { .. });
                if let Some(rule) = rule {
                    refusal = Some(Refusal {
                        rule,
                        before_effect,
                    });
                    if !before_effect {
                        checks.push(check(
                            Claim::Rule {
                                operation: Operation::Deliver,
                                index: rule,
                            },
                            "same key, other digest",
                            Verdict::Held,
                            format!("the refusal of the same key with another digest ({status}) was read as rejected `{code}`"),
                        ));
                    }
                }
                Ok(format!(
                    "the same key with another digest was refused with {status} `{code}`"
                ))
            }
            TransportObservation::Accepted {
                external_reference,
                replayed: true,
                ..
            } => Err(format!(
                "the same key with another digest was answered as a replay of {external_reference} \
                 (the original is {})",
                probe.reference
            )),
            TransportObservation::Accepted {
                external_reference,
                replayed: false,
                ..
            } => Err(format!(
                "the same key with another digest made {external_reference} besides {}",
                probe.reference
            )),
            other => Err(format!(
                "the same key with another digest {} instead of being refused",
                describe(other)
            )),
        };
        checks.push(held_or_contradicted(
            Claim::IdempotencyKey,
            "same key, other digest",
            outcome,
        ));
        (checks, refusal)
    }

    /// A send under `key` again must replay `original`.
    async fn replayed(
        &self,
        key: &RequestKey,
        digest: &InputDigest,
        request: &Value,
        original: &str,
    ) -> Result<String, String> {
        match self.deliver(key, digest, request).await.0 {
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
                "the same key made {original} and {external_reference}: the destination ignores the key"
            )),
            other => Err(format!(
                "a second send with the same key and digest {} instead of replaying {original}",
                describe(&other)
            )),
        }
    }

    async fn concurrent(&self, request: &Value) -> Result<String, String> {
        let key = self.key("concurrent");
        let prepared = self.prepare(&key, &self.digest("concurrent"), request)?;
        let sends = (0..CONCURRENT_SENDS)
            .map(|_| self.adapter.deliver_read(&key, &prepared))
            .map(|send| Box::pin(async move { send.await.0 }) as BoxFuture<'_, _>)
            .collect();
        let seen = join_all(sends).await;
        let made = references(&seen);
        let unaccepted: Vec<String> = seen
            .iter()
            .filter(|s| !matches!(s, TransportObservation::Accepted { .. }))
            .map(describe)
            .collect();
        let listed = made.iter().copied().collect::<Vec<_>>().join(", ");
        if made.len() > 1 {
            Err(format!(
                "{CONCURRENT_SENDS} concurrent sends under `{key}` made {} effects ({listed})",
                made.len()
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

    /// After each lost answer, a send under the same key must replay the effect the lost one
    /// made (its reference is kept for the lookup to compare).
    pub(super) async fn replay_lost(&self, lost: &mut [Lost], probe: &Probe) -> Vec<ClaimCheck> {
        let mut checks = Vec::new();
        for lost in lost.iter_mut() {
            if !lost.answered {
                checks.push(check(
                    Claim::IdempotencyKey,
                    lost.check,
                    Verdict::Inconclusive,
                    format!("the send under `{}` got no answer to lose", lost.key),
                ));
                continue;
            }
            let (seen, _) = self.deliver(&lost.key, &lost.digest, &probe.request).await;
            let (verdict, detail) = match &seen {
                TransportObservation::Accepted {
                    external_reference,
                    replayed: true,
                    ..
                } => {
                    lost.replayed = Some(external_reference.clone());
                    (
                        Verdict::Held,
                        format!(
                            "after its answer was lost, the same key replayed {external_reference}"
                        ),
                    )
                }
                TransportObservation::Accepted {
                    external_reference,
                    replayed: false,
                    ..
                } => (
                    Verdict::Contradicted,
                    format!(
                        "after its answer was lost, the same key made {external_reference} as a new effect: a retry would charge twice"
                    ),
                ),
                TransportObservation::ConnectFailed { .. }
                | TransportObservation::NotSent { .. } => (
                    Verdict::Inconclusive,
                    format!("the resend under `{}` {}", lost.key, describe(&seen)),
                ),
                other => (
                    Verdict::Contradicted,
                    format!(
                        "after its answer was lost, the same key {} instead of replaying the effect",
                        describe(other)
                    ),
                ),
            };
            checks.push(check(Claim::IdempotencyKey, lost.check, verdict, detail));
        }
        checks
    }
}
