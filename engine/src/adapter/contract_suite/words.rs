//! What the suite saw, in words: each observation as a predicate or a phrase, for the details
//! of its checks.

use std::collections::BTreeSet;

use crate::adapter::{LookupObservation, WithdrawalObservation};
use crate::domain::TransportObservation;

/// What a send saw, as a predicate ("the probe … was refused …").
pub(super) fn describe(seen: &TransportObservation) -> String {
    match seen {
        TransportObservation::AuthorityDenied { reason } => {
            format!("was denied authority ({reason})")
        }
        TransportObservation::RequestDiverged { .. } => {
            "diverged from the request bound to its key".to_owned()
        }
        TransportObservation::ConnectFailed { detail } => {
            format!("could not reach the sandbox ({detail})")
        }
        TransportObservation::NotSent { detail } => {
            format!("could not be made ({detail})")
        }
        TransportObservation::NotAccepted { status, code } => {
            format!("was answered {status} and read as failed before effect `{code}`")
        }
        TransportObservation::Rejected { status, code } => {
            format!("was answered {status} and read as rejected `{code}`")
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
        TransportObservation::Unmatched { status, excerpt } => {
            format!("was answered {status}, which no outcome rule recognizes ({excerpt})")
        }
        TransportObservation::Unproven { status, rule, .. } => {
            format!("was answered {status}, read by the unproven rule {rule}")
        }
        TransportObservation::WorkerLost { .. } => "lost its worker".to_owned(),
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
            "`found` {external_reference} among {} effects ({})",
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

/// The distinct references among `seen`, in order.
pub(super) fn references(seen: &[TransportObservation]) -> BTreeSet<&str> {
    seen.iter()
        .filter_map(|s| match s {
            TransportObservation::Accepted {
                external_reference, ..
            } => Some(external_reference.as_str()),
            _ => None,
        })
        .collect()
}

/// What a withdrawal saw, as a predicate.
pub(super) fn describe_withdrawal(seen: &WithdrawalObservation) -> String {
    match seen {
        WithdrawalObservation::Withdrawn {
            withdrawal_reference,
            ..
        } => format!("recorded withdrawal {withdrawal_reference}"),
        WithdrawalObservation::Transport(other) => describe(other),
    }
}
