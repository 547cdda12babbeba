//! The idempotency claims: a repeated key returns the original result, concurrent sends under
//! one key make one effect, and a key reused with other content is refused.

use super::*;

impl Run<'_> {
    pub(super) async fn idempotency(&self, checks: &mut Vec<ClaimCheck>) {
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

    pub(super) async fn replayed(
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

    pub(super) async fn concurrent(&self) -> Result<String, String> {
        let key = self.key("concurrent");
        let request = self.request(&key, &self.digest("concurrent"))?;
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

    pub(super) async fn conflict(
        &self,
        key: &RequestKey,
        original: &str,
    ) -> Result<String, String> {
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
}
