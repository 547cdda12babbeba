//! Attempt outcomes, classified by when and how the transport failed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::contract::SideEffectContract;

/// The outcome of one attempt. Mirrors the PostgreSQL enum `attempt_outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(sqlx::Type))]
#[cfg_attr(
    feature = "runtime",
    sqlx(type_name = "attempt_outcome", rename_all = "snake_case")
)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// A durable domain rejection by the destination.
    Rejected,
    /// Evidence that the side-effect boundary was not crossed.
    FailedBeforeEffect,
    /// The request may have been accepted; the evidence is insufficient.
    OutcomeUnknown,
    /// A durable receipt or verified external reference exists.
    Succeeded,
}

impl AttemptOutcome {
    /// The label people see.
    pub fn label(self) -> &'static str {
        match self {
            AttemptOutcome::Rejected => "Rejected",
            AttemptOutcome::FailedBeforeEffect => "No effect",
            AttemptOutcome::OutcomeUnknown => "Outcome unknown",
            AttemptOutcome::Succeeded => "Succeeded",
        }
    }
}

/// What the transport saw of one call: the facts an attempt's outcome is classified from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "observed", rename_all = "snake_case")]
pub enum TransportObservation {
    /// Current authority was denied before the call; nothing was sent.
    AuthorityDenied { reason: String },
    /// The regenerated request differs from the bytes bound to its key; nothing was sent.
    RequestDiverged { bound: String, regenerated: String },
    /// The connection could not be opened: the request never left this process.
    ConnectFailed { detail: String },
    /// The request could not be made at all (a header value with a line break, a URL that is
    /// none, a host the deployment does not allow): nothing left this process, and sending it
    /// again would fail the same way.
    NotSent { detail: String },
    /// The destination answered that it committed nothing (the protocol's `accepted: false`).
    NotAccepted { status: u16, code: String },
    /// The destination durably rejected the request.
    Rejected { status: u16, code: String },
    /// The destination accepted (or replayed) the request and named its external reference.
    Accepted {
        status: u16,
        external_reference: String,
        replayed: bool,
        /// The typed receipt fields the adapter's outcome rule mapped from the answer.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        fields: BTreeMap<String, serde_json::Value>,
    },
    /// No complete answer before the deadline, after the request was sent.
    DeadlineExceeded { deadline_ms: u64 },
    /// The connection closed or reset after the request was sent, before a complete answer.
    ConnectionLost { detail: String },
    /// A status without the protocol's promise that nothing was committed (a 5xx, say).
    UnexpectedStatus { status: u16 },
    /// An answer that could not be understood.
    UnreadableResponse { status: u16, detail: String },
    /// An answer no outcome rule of the adapter recognizes: the outcome is unknown, and a
    /// bounded excerpt of the body is kept as evidence.
    Unmatched { status: u16, excerpt: String },
    /// An answer the adapter's first matching rule reads as `rejected` or
    /// `failed_before_effect`, though verification never proved that rule on its failure path
    /// (docs/DESIGN.md §5): nothing proves that nothing happened, so the outcome is unknown.
    Unproven {
        status: u16,
        /// The rule, as `deliver.outcomes[3]`.
        rule: String,
        /// What the rule would have concluded: "failed before effect `bad_gateway`".
        reads_as: String,
        excerpt: String,
    },
    /// The database was restored from a backup taken before this step finished: the live
    /// system may have sent the request after the backup, so nothing here proves it did not.
    Restored,
    /// The worker's lease expired with the attempt open: it died, hung or was cut off.
    /// `during_call` says whether the request identity had been persisted (a call may be out).
    WorkerLost { during_call: bool },
}

impl TransportObservation {
    /// Classifies the observation as docs/DESIGN.md §3 says: by when and how it
    /// failed, never "failed" where the effect may have happened.
    pub fn outcome(&self) -> AttemptOutcome {
        match self {
            TransportObservation::AuthorityDenied { .. }
            | TransportObservation::RequestDiverged { .. }
            | TransportObservation::ConnectFailed { .. }
            | TransportObservation::NotSent { .. }
            | TransportObservation::NotAccepted { .. } => AttemptOutcome::FailedBeforeEffect,
            TransportObservation::Rejected { .. } => AttemptOutcome::Rejected,
            TransportObservation::Accepted { .. } => AttemptOutcome::Succeeded,
            TransportObservation::WorkerLost { during_call: false } => {
                AttemptOutcome::FailedBeforeEffect
            }
            TransportObservation::WorkerLost { during_call: true }
            | TransportObservation::Restored
            | TransportObservation::DeadlineExceeded { .. }
            | TransportObservation::ConnectionLost { .. }
            | TransportObservation::UnexpectedStatus { .. }
            | TransportObservation::UnreadableResponse { .. }
            | TransportObservation::Unmatched { .. }
            | TransportObservation::Unproven { .. } => AttemptOutcome::OutcomeUnknown,
        }
    }

    /// Whether another attempt may follow this one without asking anybody: only when nothing
    /// was committed, or the rejection code is declared retryable.
    pub fn may_retry(&self, contract: &SideEffectContract) -> bool {
        match self {
            TransportObservation::ConnectFailed { .. }
            | TransportObservation::NotAccepted { .. }
            | TransportObservation::WorkerLost { during_call: false } => true,
            TransportObservation::Rejected { code, .. } => contract.rejection_is_retryable(code),
            // Made again, the request would fail the same way: a person decides.
            TransportObservation::NotSent { .. }
            | TransportObservation::AuthorityDenied { .. }
            | TransportObservation::RequestDiverged { .. }
            | TransportObservation::Accepted { .. }
            | TransportObservation::DeadlineExceeded { .. }
            | TransportObservation::ConnectionLost { .. }
            | TransportObservation::UnexpectedStatus { .. }
            | TransportObservation::UnreadableResponse { .. }
            | TransportObservation::Unmatched { .. }
            | TransportObservation::Unproven { .. }
            | TransportObservation::WorkerLost { during_call: true }
            | TransportObservation::Restored => false,
        }
    }

    /// One sentence for the evidence page.
    pub fn describe(&self) -> String {
        match self {
            TransportObservation::AuthorityDenied { reason } => {
                format!("Not sent: current authority was denied ({reason}).")
            }
            TransportObservation::RequestDiverged { bound, regenerated } => format!(
                "Not sent: the regenerated request has digest {regenerated}, but its key is bound to {bound}; a replacement step is needed."
            ),
            TransportObservation::ConnectFailed { detail } => {
                format!("Not sent: the connection could not be opened ({detail}).")
            }
            TransportObservation::NotSent { detail } => {
                format!("Not sent: the request could not be made ({detail}).")
            }
            TransportObservation::NotAccepted { status, code } => {
                format!(
                    "The destination answered {status} `{code}` and promised nothing was committed."
                )
            }
            TransportObservation::Rejected { status, code } => {
                format!("The destination rejected the request: {status} `{code}`.")
            }
            TransportObservation::Accepted {
                external_reference,
                replayed: false,
                ..
            } => format!("Accepted with external reference {external_reference}."),
            TransportObservation::Accepted {
                external_reference,
                replayed: true,
                ..
            } => format!(
                "The destination returned the original result {external_reference} for the same key."
            ),
            TransportObservation::DeadlineExceeded { deadline_ms } => format!(
                "The request was sent; no answer came within the {deadline_ms} ms deadline."
            ),
            TransportObservation::ConnectionLost { detail } => {
                format!(
                    "The request was sent; the connection was lost before an answer ({detail})."
                )
            }
            TransportObservation::UnexpectedStatus { status } => {
                format!(
                    "The request was sent; the destination answered {status} without saying whether it committed."
                )
            }
            TransportObservation::UnreadableResponse { status, detail } => {
                format!("The request was sent; the answer ({status}) could not be read ({detail}).")
            }
            TransportObservation::Unmatched { status, excerpt } => format!(
                "The destination answered {status}, which no outcome rule of the adapter recognizes: {excerpt}"
            ),
            TransportObservation::Unproven {
                status,
                rule,
                reads_as,
                excerpt,
            } => format!(
                "The destination answered {status}, which the adapter's rule {rule} reads as {reads_as}; verification never proved that rule, so the outcome is unknown: {excerpt}"
            ),
            TransportObservation::Restored => {
                "The database was restored from a backup: the live system may have sent this request after the backup was taken.".to_owned()
            }
            TransportObservation::WorkerLost { during_call: false } => {
                "The worker's lease expired before the request identity was persisted: no call was made.".to_owned()
            }
            TransportObservation::WorkerLost { during_call: true } => {
                "The worker's lease expired after the request identity was persisted: the call may have been made.".to_owned()
            }
        }
    }
}

/// What an `observation` row records (`observation.kind`): a call's answer, a lookup's, a
/// compensation's, or a pure step's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(sqlx::Type))]
#[cfg_attr(
    feature = "runtime",
    sqlx(type_name = "text", rename_all = "snake_case")
)]
#[serde(rename_all = "snake_case")]
pub enum ObservationKind {
    Transport,
    Lookup,
    Compensation,
    Pure,
}

#[cfg(test)]
mod tests {
    use super::super::contract::fixtures::opaque;
    use super::*;

    #[test]
    fn no_attempt_label_says_failed() {
        for outcome in [
            AttemptOutcome::Rejected,
            AttemptOutcome::FailedBeforeEffect,
            AttemptOutcome::OutcomeUnknown,
            AttemptOutcome::Succeeded,
        ] {
            assert!(
                !outcome.label().to_lowercase().contains("fail"),
                "{outcome:?}"
            );
        }
    }

    fn outcome(o: TransportObservation) -> AttemptOutcome {
        o.outcome()
    }

    #[test]
    fn a_refused_connection_is_failed_before_effect() {
        let o = TransportObservation::ConnectFailed {
            detail: "connection refused".into(),
        };
        assert_eq!(outcome(o.clone()), AttemptOutcome::FailedBeforeEffect);
        assert!(o.may_retry(&opaque()));
    }

    #[test]
    fn denied_authority_is_failed_before_effect_and_not_retried_automatically() {
        let o = TransportObservation::AuthorityDenied {
            reason: "adapter suspended".into(),
        };
        assert_eq!(outcome(o.clone()), AttemptOutcome::FailedBeforeEffect);
        assert!(!o.may_retry(&opaque()));
    }

    #[test]
    fn an_explicit_not_accepted_answer_is_failed_before_effect() {
        let o = TransportObservation::NotAccepted {
            status: 503,
            code: "unavailable".into(),
        };
        assert_eq!(outcome(o), AttemptOutcome::FailedBeforeEffect);
    }

    #[test]
    fn a_rejection_is_retryable_only_when_its_code_is_declared() {
        let limited = TransportObservation::Rejected {
            status: 422,
            code: "rate_limited".into(),
        };
        let unknown_recipient = TransportObservation::Rejected {
            status: 422,
            code: "recipient_unknown".into(),
        };
        assert_eq!(outcome(limited.clone()), AttemptOutcome::Rejected);
        assert!(limited.may_retry(&opaque()));
        assert!(!unknown_recipient.may_retry(&opaque()));
    }

    #[test]
    fn a_timeout_after_sending_is_outcome_unknown_never_failed() {
        let o = TransportObservation::DeadlineExceeded { deadline_ms: 2_000 };
        assert_eq!(outcome(o.clone()), AttemptOutcome::OutcomeUnknown);
        assert!(!o.may_retry(&opaque()));
    }

    #[test]
    fn a_reset_connection_after_sending_is_outcome_unknown() {
        let o = TransportObservation::ConnectionLost {
            detail: "connection reset".into(),
        };
        assert_eq!(outcome(o), AttemptOutcome::OutcomeUnknown);
    }

    #[test]
    fn a_server_error_after_sending_is_outcome_unknown() {
        assert_eq!(
            outcome(TransportObservation::UnexpectedStatus { status: 500 }),
            AttemptOutcome::OutcomeUnknown
        );
        assert_eq!(
            outcome(TransportObservation::UnreadableResponse {
                status: 201,
                detail: "eof".into()
            }),
            AttemptOutcome::OutcomeUnknown
        );
    }

    #[test]
    fn a_worker_lost_during_the_call_leaves_the_outcome_unknown() {
        assert_eq!(
            outcome(TransportObservation::WorkerLost { during_call: true }),
            AttemptOutcome::OutcomeUnknown
        );
        let before = TransportObservation::WorkerLost { during_call: false };
        assert_eq!(outcome(before.clone()), AttemptOutcome::FailedBeforeEffect);
        assert!(before.may_retry(&opaque()));
    }

    #[test]
    fn an_accepted_answer_or_an_idempotent_replay_succeeds() {
        for replayed in [false, true] {
            let o = TransportObservation::Accepted {
                status: 201,
                external_reference: "x-82".into(),
                replayed,
                fields: BTreeMap::new(),
            };
            assert_eq!(outcome(o), AttemptOutcome::Succeeded);
        }
    }
}
