//! How a receipt was obtained (docs/DESIGN.md §8). Mirrors the PostgreSQL enum `receipt_method`.

use serde::{Deserialize, Serialize};

use super::outcome::TransportObservation;

/// How the external reference a receipt names was proven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(sqlx::Type))]
#[cfg_attr(
    feature = "runtime",
    sqlx(type_name = "receipt_method", rename_all = "snake_case")
)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptMethod {
    /// The destination's answer to the call itself.
    DirectResponse,
    /// The destination's answer to the same key sent again: the original result.
    IdempotentReplay,
    /// A status lookup by client reference found the request.
    StatusQuery,
    /// An operator attached evidence of the effect.
    ManualEvidence,
}

impl ReceiptMethod {
    /// The name PostgreSQL and the API use.
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiptMethod::DirectResponse => "direct_response",
            ReceiptMethod::IdempotentReplay => "idempotent_replay",
            ReceiptMethod::StatusQuery => "status_query",
            ReceiptMethod::ManualEvidence => "manual_evidence",
        }
    }

    /// How a call's answer proves its reference, if it was accepted at all.
    pub fn of_answer(observation: &TransportObservation) -> Option<ReceiptMethod> {
        match observation {
            TransportObservation::Accepted { replayed: true, .. } => {
                Some(ReceiptMethod::IdempotentReplay)
            }
            TransportObservation::Accepted { .. } => Some(ReceiptMethod::DirectResponse),
            TransportObservation::AuthorityDenied { .. }
            | TransportObservation::RequestDiverged { .. }
            | TransportObservation::ConnectFailed { .. }
            | TransportObservation::NotSent { .. }
            | TransportObservation::NotAccepted { .. }
            | TransportObservation::Rejected { .. }
            | TransportObservation::DeadlineExceeded { .. }
            | TransportObservation::ConnectionLost { .. }
            | TransportObservation::UnexpectedStatus { .. }
            | TransportObservation::UnreadableResponse { .. }
            | TransportObservation::Unmatched { .. }
            | TransportObservation::Unproven { .. }
            | TransportObservation::Restored
            | TransportObservation::WorkerLost { .. } => None,
        }
    }
}

impl std::fmt::Display for ReceiptMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_accepted_answer_is_a_direct_response_unless_it_was_replayed() {
        let accepted = |replayed| TransportObservation::Accepted {
            status: 201,
            external_reference: "x-82".into(),
            replayed,
            fields: Default::default(),
        };
        assert_eq!(
            ReceiptMethod::of_answer(&accepted(false)),
            Some(ReceiptMethod::DirectResponse)
        );
        assert_eq!(
            ReceiptMethod::of_answer(&accepted(true)),
            Some(ReceiptMethod::IdempotentReplay)
        );
    }

    #[test]
    fn the_method_serialises_under_the_name_postgresql_uses() {
        for method in [
            ReceiptMethod::DirectResponse,
            ReceiptMethod::IdempotentReplay,
            ReceiptMethod::StatusQuery,
            ReceiptMethod::ManualEvidence,
        ] {
            assert_eq!(
                serde_json::to_value(method).unwrap(),
                serde_json::json!(method.as_str())
            );
        }
    }
}
