//! The lookup: it finds exactly the effect a request made — the probe, and the effects whose
//! answers were lost — never a declined attempt and never a key nobody sent; it reports another
//! digest; its index shows an effect once the declared window has passed; it walks every page.
//! It also proves the rules that read an answer as `failed_before_effect`: after such an answer
//! it must find nothing.

use super::idempotency::Refusal;
use super::provoke::Provocations;
use super::*;
use crate::domain::Operation;

/// The lookups of the probe made right after it was accepted and once its declared window had
/// passed: they must run on time, beside the slower checks.
pub(super) struct AroundTheWindow {
    early: LookupObservation,
    at_window: LookupObservation,
}

impl Run<'_> {
    /// The probe looked up at once, and again as soon as the declared window has passed.
    pub(super) async fn around_the_window(&self, probe: &Probe) -> AroundTheWindow {
        let early = self.look(&probe.key, &probe.digest, &probe.request).await;
        let window = Duration::from_millis(self.adapter.contract().visibility_window_ms);
        // The window is real time at the destination: waiting it out is the check itself.
        tokio::time::sleep_until(probe.answered + window).await;
        let at_window = self.look(&probe.key, &probe.digest, &probe.request).await;
        AroundTheWindow { early, at_window }
    }

    /// Every lookup check, once the deliveries they look for have been made.
    pub(super) async fn lookup(
        &self,
        probe: &Probe,
        around: AroundTheWindow,
        lost: &[Lost],
        provoked: &Provocations,
        refusal: Option<&Refusal>,
    ) -> Vec<ClaimCheck> {
        let window_ms = self.adapter.contract().visibility_window_ms;
        let window = Duration::from_millis(window_ms);
        let mut checks = Vec::new();
        if window_ms > 0 {
            let inside = inside_window(&around.early, &probe.reference, window_ms);
            checks.push(held_or_contradicted(
                Claim::Lookup,
                "inside the window",
                inside,
            ));
        }
        checks.push(held_or_contradicted(
            Claim::Lookup,
            "after the window",
            window_not_longer(&around.at_window, &probe.reference, window_ms),
        ));
        let found = self.finds_exactly(probe, window).await;
        let found_alone = found.is_ok();
        checks.push(held_or_contradicted(
            Claim::Lookup,
            "finds the probe",
            found,
        ));
        checks.push(held_or_contradicted(
            Claim::Lookup,
            "a key never sent",
            self.absence(probe).await,
        ));
        checks.push(held_or_contradicted(
            Claim::Lookup,
            "another digest",
            self.conflicting_digest(probe).await,
        ));
        if self
            .adapter
            .spec()
            .lookup
            .as_ref()
            .is_some_and(|l| l.pages.is_some())
        {
            checks.push(self.walks_pages(probe).await);
        }
        // Every other send happened before this point: one window from now covers them all.
        tokio::time::sleep(window).await;
        for lost in lost {
            checks.push(self.finds_lost(lost, probe, window).await);
        }
        for sent in &provoked.sent {
            checks.extend(self.after_provocation(sent).await);
        }
        if let Some(Refusal {
            rule,
            before_effect: true,
        }) = refusal
        {
            let claim = Claim::Rule {
                operation: Operation::Deliver,
                index: *rule,
            };
            checks.push(if found_alone {
                check(claim, NOTHING_HAPPENED, Verdict::Held, format!(
                    "after the refusal of the same key with another digest, the lookup still found only {}", probe.reference))
            } else {
                check(claim, NOTHING_HAPPENED, Verdict::Inconclusive,
                    "the lookup could not show that the refusal of the same key with another digest left nothing".to_owned())
            });
        }
        checks
    }

    async fn look(
        &self,
        key: &RequestKey,
        digest: &InputDigest,
        request: &Value,
    ) -> LookupObservation {
        self.adapter
            .look_up(key, digest.as_str(), request, None)
            .await
            .0
    }

    /// The probe is found, alone, under its own digest (asking again until the window and a
    /// margin have passed).
    async fn finds_exactly(&self, probe: &Probe, window: Duration) -> Result<String, String> {
        let deadline = probe.answered + window + LOOKUP_MARGIN;
        loop {
            let seen = self.look(&probe.key, &probe.digest, &probe.request).await;
            match &seen {
                LookupObservation::Found {
                    external_reference,
                    all,
                    ..
                } if *external_reference == probe.reference && all.len() <= 1 => {
                    return Ok(format!(
                        "a lookup of `{}` found {} alone, with the same digest",
                        probe.key, probe.reference
                    ));
                }
                LookupObservation::Found { .. }
                | LookupObservation::FoundWithConflictingDigest { .. } => {
                    return Err(format!(
                        "a lookup of `{}` for {} answered {}",
                        probe.key,
                        probe.reference,
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
                    "{} was still not found {} ms after it was accepted (declared window {} ms); the last lookup answered {}",
                    probe.reference,
                    probe.answered.elapsed().as_millis(),
                    window.as_millis(),
                    describe_lookup(&seen)
                ));
            }
            tokio::time::sleep(LOOKUP_POLL).await;
        }
    }

    /// A key this run never sent is not found.
    async fn absence(&self, probe: &Probe) -> Result<String, String> {
        let never_sent = self.key("never-sent");
        match self.look(&never_sent, &probe.digest, &probe.request).await {
            LookupObservation::NotFound => Ok(format!(
                "a lookup of the never-sent `{never_sent}` answered `not_found`"
            )),
            other => Err(format!(
                "a lookup of the never-sent `{never_sent}` answered {}",
                describe_lookup(&other)
            )),
        }
    }

    /// A lookup of the probe's key with another digest names the conflict.
    async fn conflicting_digest(&self, probe: &Probe) -> Result<String, String> {
        match self
            .look(
                &probe.key,
                &self.digest("probe/looked-other"),
                &probe.request,
            )
            .await
        {
            LookupObservation::FoundWithConflictingDigest {
                external_reference, ..
            } if external_reference == probe.reference => Ok(format!(
                "a lookup of `{}` with another digest answered `found_with_conflicting_digest` for {}",
                probe.key, probe.reference
            )),
            other => Err(format!(
                "a lookup of `{}` with another digest answered {}",
                probe.key,
                describe_lookup(&other)
            )),
        }
    }

    /// A walk with small pages, over more than one of them, comes to what one walk did.
    async fn walks_pages(&self, probe: &Probe) -> ClaimCheck {
        let (whole, _, items) = self
            .adapter
            .look_up(&probe.key, probe.digest.as_str(), &probe.request, None)
            .await;
        let most = self
            .adapter
            .spec()
            .lookup
            .as_ref()
            .and_then(|l| l.pages.as_ref())
            .map_or(2, |p| p.max.max(2));
        if items < 3 {
            return check(
                Claim::Lookup,
                "walks every page",
                Verdict::Inconclusive,
                format!(
                    "the list held {items} items: a walk over more than one page could not be provoked"
                ),
            );
        }
        let size = u32::try_from(
            items
                .div_ceil(usize::try_from(most - 1).unwrap_or(1))
                .max(2),
        )
        .unwrap_or(u32::MAX);
        let (paged, pages, _) = self
            .adapter
            .look_up(
                &probe.key,
                probe.digest.as_str(),
                &probe.request,
                Some(size),
            )
            .await;
        if pages < 2 {
            return check(
                Claim::Lookup,
                "walks every page",
                Verdict::Inconclusive,
                format!("a walk with pages of {size} read only {pages} page"),
            );
        }
        if paged == whole {
            check(
                Claim::Lookup,
                "walks every page",
                Verdict::Held,
                format!(
                    "a walk over {pages} pages of {size} answered {}, as one walk did",
                    describe_lookup(&paged)
                ),
            )
        } else {
            check(
                Claim::Lookup,
                "walks every page",
                Verdict::Contradicted,
                format!(
                    "a walk over {pages} pages of {size} answered {}, but one walk answered {}",
                    describe_lookup(&paged),
                    describe_lookup(&whole)
                ),
            )
        }
    }

    /// The effect of a send whose answer was lost is found, alone (and it is the one a replay
    /// returned, when one did).
    async fn finds_lost(&self, lost: &Lost, probe: &Probe, window: Duration) -> ClaimCheck {
        if !lost.answered {
            return check(
                Claim::Lookup,
                lost.check,
                Verdict::Inconclusive,
                format!("the send under `{}` got no answer to lose", lost.key),
            );
        }
        let deadline = Instant::now() + window + LOOKUP_MARGIN;
        loop {
            let seen = self.look(&lost.key, &lost.digest, &probe.request).await;
            let verdict = match &seen {
                LookupObservation::Found {
                    external_reference,
                    all,
                    ..
                } if all.len() <= 1 => match &lost.replayed {
                    Some(replayed) if replayed != external_reference => Some((
                        Verdict::Contradicted,
                        format!(
                            "after the answer under `{}` was lost, the lookup found {external_reference} but the replay returned {replayed}",
                            lost.key
                        ),
                    )),
                    _ => Some((
                        Verdict::Held,
                        format!(
                            "after the answer under `{}` was lost, the lookup found {external_reference} alone",
                            lost.key
                        ),
                    )),
                },
                LookupObservation::Found { .. }
                | LookupObservation::FoundWithConflictingDigest { .. } => Some((
                    Verdict::Contradicted,
                    format!(
                        "after the answer under `{}` was lost, the lookup answered {}",
                        lost.key,
                        describe_lookup(&seen)
                    ),
                )),
                LookupObservation::NotFound
                | LookupObservation::Processing
                | LookupObservation::Unavailable { .. }
                | LookupObservation::NotSupported => None,
            };
            if let Some((verdict, detail)) = verdict {
                return check(Claim::Lookup, lost.check, verdict, detail);
            }
            if Instant::now() + LOOKUP_POLL > deadline {
                let verdict = if matches!(seen, LookupObservation::NotFound) {
                    Verdict::Contradicted
                } else {
                    Verdict::Inconclusive
                };
                return check(
                    Claim::Lookup,
                    lost.check,
                    verdict,
                    format!(
                        "the destination took the request under `{}` and its answer was lost, but the lookup answered {}: a lost answer would be read as nothing having happened",
                        lost.key,
                        describe_lookup(&seen)
                    ),
                );
            }
            tokio::time::sleep(LOOKUP_POLL).await;
        }
    }

    /// After a provocation answered as expected, the lookup must find nothing: a declined
    /// attempt is not an effect (the lookup's claim), and a rule reading an answer as
    /// `failed_before_effect` is proven only by that absence (the rule's claim).
    async fn after_provocation(&self, sent: &super::provoke::Provoked) -> Option<ClaimCheck> {
        let (rule, before_effect) = sent.proven_by?;
        let seen = self.look(&sent.key, &sent.digest, &sent.request).await;
        let (name, key) = (&sent.name, &sent.key);
        let (claim, check_name, read_as) = if before_effect {
            let rule = Claim::Rule {
                operation: Operation::Deliver,
                index: rule,
            };
            (rule, NOTHING_HAPPENED, "read as failed before effect")
        } else {
            (Claim::Lookup, "a declined attempt", "rejected")
        };
        let (verdict, detail) = match &seen {
            LookupObservation::NotFound => (
                Verdict::Held,
                format!("after `{name}` was {read_as}, a lookup of `{key}` answered `not_found`"),
            ),
            LookupObservation::Found {
                external_reference, ..
            }
            | LookupObservation::FoundWithConflictingDigest {
                external_reference, ..
            } => (
                Verdict::Contradicted,
                if before_effect {
                    format!(
                        "`{name}` was read as failed before effect, but a lookup then found {external_reference}"
                    )
                } else {
                    format!(
                        "a lookup found {external_reference} for `{name}`, which was rejected: the lookup counts a declined attempt as found"
                    )
                },
            ),
            other => (
                Verdict::Inconclusive,
                format!(
                    "after `{name}` was {read_as}, a lookup answered {}",
                    describe_lookup(other)
                ),
            ),
        };
        Some(check(claim, check_name, verdict, detail))
    }
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
            "a lookup right after delivery already found {reference}; inside the declared {window_ms} ms window only a `found` is conclusive"
        )),
        LookupObservation::NotFound => Ok(format!(
            "a lookup right after delivery answered `not_found`, which inside the declared {window_ms} ms window is not proof of absence"
        )),
        LookupObservation::Processing => Ok(format!(
            "a lookup right after delivery answered `processing`, which inside the declared {window_ms} ms window proves nothing either way"
        )),
        LookupObservation::Found { .. }
        | LookupObservation::FoundWithConflictingDigest { .. }
        | LookupObservation::Unavailable { .. }
        | LookupObservation::NotSupported => Err(format!(
            "a lookup right after delivering {reference} answered {}, which is neither the delivery nor its not-yet-visible absence",
            describe_lookup(early)
        )),
    }
}

/// Once the declared window has passed since the destination answered, the effect must be
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
        LookupObservation::NotFound => Err(format!(
            "a lookup {when} still answered `not_found` for {reference}: the destination's index lags longer than the declared {window_ms} ms, so a `not_found` after the window would wrongly be taken as proof"
        )),
        LookupObservation::Found { .. }
        | LookupObservation::FoundWithConflictingDigest { .. }
        | LookupObservation::Processing
        | LookupObservation::Unavailable { .. }
        | LookupObservation::NotSupported => Err(format!(
            "a lookup {when} answered {}, so the declared {window_ms} ms window could not be confirmed",
            describe_lookup(seen)
        )),
    }
}
