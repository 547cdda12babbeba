//! How a receipt was obtained (docs/DESIGN.md §8). Mirrors the PostgreSQL enum `receipt_method`.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::outcome::TransportObservation;

/// The receipt an accepted answer makes, but for the rows it names: the reference, how the
/// answer proves it, whether it proves a delivery or a withdrawal, and a bounded summary of
/// the answer. The one constructor both ways an attempt settles use (docs/DESIGN.md §8).
#[derive(Debug, Clone, PartialEq)]
pub struct AcceptedReceipt {
    pub external_reference: String,
    pub method: ReceiptMethod,
    /// `accepted` for a delivery, `withdrawn` for a compensation step's withdrawal.
    pub completion_state: &'static str,
    pub summary: Value,
}

/// How much of an answer's typed fields a receipt keeps.
const SUMMARY_BYTES: usize = 3072;

impl AcceptedReceipt {
    /// What a receipt proves: `withdrawn` for a compensation step's withdrawal, else `accepted`.
    pub fn completion_state(withdrawal: bool) -> &'static str {
        if withdrawal { "withdrawn" } else { "accepted" }
    }

    /// The receipt `observation` makes, if the destination accepted the request; `withdrawal`
    /// when the call was a compensation step's withdrawal. A rule reading a whole body is cut
    /// off at 3 KiB of typed fields.
    pub fn of_answer(observation: &TransportObservation, withdrawal: bool) -> Option<Self> {
        let TransportObservation::Accepted {
            external_reference,
            replayed,
            status,
            fields,
        } = observation
        else {
            return None;
        };
        let fields = json!(fields);
        let fields = if fields.to_string().len() > SUMMARY_BYTES {
            json!({ "omitted": "the typed fields came to more than 3 KiB" })
        } else {
            fields
        };
        Some(Self {
            external_reference: external_reference.clone(),
            method: ReceiptMethod::of_answer(observation)?,
            completion_state: Self::completion_state(withdrawal),
            summary: json!({ "status": status, "replayed": replayed, "fields": fields }),
        })
    }
}

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
    fn a_receipt_keeps_the_typed_fields_unless_they_exceed_three_kibibytes() {
        let accepted = |value: &str| TransportObservation::Accepted {
            status: 201,
            external_reference: "ch_1".into(),
            replayed: false,
            fields: [("note".to_owned(), serde_json::json!(value))].into(),
        };
        let small = AcceptedReceipt::of_answer(&accepted("paid"), true).unwrap();
        assert_eq!(small.completion_state, "withdrawn");
        assert_eq!(small.summary["fields"]["note"], "paid");
        let large = AcceptedReceipt::of_answer(&accepted(&"x".repeat(4000)), false).unwrap();
        assert_eq!(large.completion_state, "accepted");
        assert!(large.summary["fields"]["omitted"].is_string());
        assert_eq!(
            AcceptedReceipt::of_answer(&TransportObservation::Restored, false),
            None
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
