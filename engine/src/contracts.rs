//! The contracts of the three destination kinds of `destinations/PROTOCOL.md`, as adapters
//! declare them.

use crate::domain::{Compensation, SideEffectContract, UnknownOutcomePolicy};

const WITHDRAWAL_LIMITS: &str = "a withdrawn document may already have been read";

/// The contract of a destination kind (`idempotent`, `queryable` or `opaque`).
pub fn declared(
    kind: &str,
    deadline_ms: u64,
    visibility_window_ms: u64,
    review_unknown: bool,
) -> Option<SideEffectContract> {
    let (idempotent, queryable) = match kind {
        "idempotent" => (true, false),
        "queryable" => (false, true),
        "opaque" => (false, false),
        _ => return None,
    };
    Some(SideEffectContract {
        accepts_idempotency_key: idempotent,
        query_by_client_reference: queryable,
        visibility_window_ms: if queryable { visibility_window_ms } else { 0 },
        create_after_authoritative_absence: queryable,
        compensation: Compensation::SupportedWithLimits(WITHDRAWAL_LIMITS.to_owned()),
        unknown_outcome_policy: if review_unknown {
            UnknownOutcomePolicy::Review
        } else {
            UnknownOutcomePolicy::Query
        },
        retryable_rejections: vec!["rate_limited".to_owned()],
        deadline_ms,
    })
}
