//! The lookup claims: a delivery is found by its client reference within the declared
//! visibility window, and a reference never sent is not found.

use super::*;

impl Run<'_> {
    pub(super) async fn lookup(&self, window_ms: u64, checks: &mut Vec<ClaimCheck>) {
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
            self.conflicting_digest(&key, &reference).await
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

    /// A lookup of a delivered key with another digest must name the conflict.
    async fn conflicting_digest(
        &self,
        key: &RequestKey,
        reference: &str,
    ) -> Result<String, String> {
        match self
            .adapter
            .lookup(key, self.digest("lookup/other").as_str())
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
    }

    /// A lookup of a reference this run never sent must answer `not_found`.
    pub(super) async fn absence(&self, digest: &InputDigest) -> Result<String, String> {
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
    pub(super) async fn poll_until_found(
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

    pub(super) async fn no_lookup(&self) -> ClaimCheck {
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
}

pub(super) fn is_found(seen: &LookupObservation, reference: &str) -> bool {
    matches!(seen, LookupObservation::Found { external_reference, .. } if external_reference == reference)
}

/// Right after delivery, inside a window longer than zero: found and not found both fit the
/// claim, and the suite draws no conclusion from the absence.
pub(super) fn inside_window(
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
pub(super) fn window_not_longer(
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

/// What a lookup saw, as the protocol names it.
pub(super) fn describe_lookup(seen: &LookupObservation) -> String {
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
