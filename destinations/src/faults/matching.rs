//! Which requests a rule applies to, and the facts about a request that rules match.

use serde::{Deserialize, Serialize};

use super::fault::Operation;

/// Which requests a rule applies to: `{"any": true}`, `{"idempotency_key": "…"}`,
/// `{"client_reference": "…"}` or `{"external_reference": "…"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "MatchRepr", into = "MatchRepr")]
pub enum Match {
    /// Every request of the rule's operation.
    Any,
    /// Requests carrying this `Idempotency-Key` (a withdrawal's own key for withdrawals).
    IdempotencyKey(String),
    /// Deliveries and lookups with this client reference.
    ClientReference(String),
    /// Withdrawals of this delivery.
    ExternalReference(String),
}

impl Match {
    /// Whether a request with these facts is matched.
    pub(crate) fn matches(&self, request: &Request<'_>) -> bool {
        match self {
            Match::Any => true,
            Match::IdempotencyKey(key) => request.idempotency_key == Some(key.as_str()),
            Match::ClientReference(reference) => {
                request.client_reference == Some(reference.as_str())
            }
            Match::ExternalReference(reference) => {
                request.external_reference == Some(reference.as_str())
            }
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum MatchRepr {
    Any(bool),
    IdempotencyKey(String),
    ClientReference(String),
    ExternalReference(String),
}

impl TryFrom<MatchRepr> for Match {
    type Error = &'static str;

    fn try_from(repr: MatchRepr) -> Result<Self, Self::Error> {
        match repr {
            MatchRepr::Any(true) => Ok(Match::Any),
            MatchRepr::Any(false) => Err("{\"any\": false} matches nothing; omit the rule"),
            MatchRepr::IdempotencyKey(key) => Ok(Match::IdempotencyKey(key)),
            MatchRepr::ClientReference(reference) => Ok(Match::ClientReference(reference)),
            MatchRepr::ExternalReference(reference) => Ok(Match::ExternalReference(reference)),
        }
    }
}

impl From<Match> for MatchRepr {
    fn from(matching: Match) -> Self {
        match matching {
            Match::Any => MatchRepr::Any(true),
            Match::IdempotencyKey(key) => MatchRepr::IdempotencyKey(key),
            Match::ClientReference(reference) => MatchRepr::ClientReference(reference),
            Match::ExternalReference(reference) => MatchRepr::ExternalReference(reference),
        }
    }
}

/// The facts about one well-formed request that rules match and random faults hash.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Request<'a> {
    pub operation: Operation,
    pub idempotency_key: Option<&'a str>,
    pub client_reference: Option<&'a str>,
    pub external_reference: Option<&'a str>,
    /// Whether the client reference, not the key, is the request's subject.
    pub reference_first: bool,
}

impl<'a> Request<'a> {
    /// A delivery; `idempotency_key` is the header's value, whether or not the kind uses it.
    pub fn deliver(idempotency_key: Option<&'a str>, client_reference: &'a str) -> Self {
        Request {
            operation: Operation::Deliver,
            idempotency_key,
            client_reference: Some(client_reference),
            external_reference: None,
            reference_first: false,
        }
    }

    /// A request of the payments or webhook API, whose `subject` (a charge's
    /// `metadata[subject]`, a search's queried `subject`, a webhook body's `subject` field) is
    /// matched as its client reference and comes before its key as its subject.
    pub fn by_subject(
        operation: Operation,
        subject: Option<&'a str>,
        idempotency_key: Option<&'a str>,
        external_reference: Option<&'a str>,
    ) -> Self {
        Request {
            operation,
            idempotency_key,
            client_reference: subject,
            external_reference,
            reference_first: true,
        }
    }

    /// A lookup by client reference.
    pub fn lookup(client_reference: &'a str) -> Self {
        Request {
            operation: Operation::Lookup,
            idempotency_key: None,
            client_reference: Some(client_reference),
            external_reference: None,
            reference_first: false,
        }
    }

    /// A withdrawal, with its own key.
    pub fn withdraw(idempotency_key: &'a str, external_reference: &'a str) -> Self {
        Request {
            operation: Operation::Withdraw,
            idempotency_key: Some(idempotency_key),
            client_reference: None,
            external_reference: Some(external_reference),
            reference_first: false,
        }
    }

    /// What random faults count sightings of: the key if the request has one, else its
    /// client reference, else its external reference (the client reference first for
    /// [`Request::by_subject`]).
    pub fn subject(&self) -> &'a str {
        let (first, second) = if self.reference_first {
            (self.client_reference, self.idempotency_key)
        } else {
            (self.idempotency_key, self.client_reference)
        };
        first
            .or(second)
            .or(self.external_reference)
            .unwrap_or_default()
    }
}
