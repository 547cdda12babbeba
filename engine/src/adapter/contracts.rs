//! The contracts of the three destination kinds of `destinations/PROTOCOL.md`, as adapters
//! declare them.

use crate::domain::{Compensation, ContractKind, SideEffectContract, UnknownOutcomePolicy};

const WITHDRAWAL_LIMITS: &str = "a withdrawn document may already have been read";

/// The contract of a destination kind: what a destination of that kind can prove.
pub fn declared(
    kind: ContractKind,
    deadline_ms: u64,
    visibility_window_ms: u64,
    review_unknown: bool,
) -> SideEffectContract {
    let (idempotent, queryable) = match kind {
        ContractKind::Idempotent => (true, false),
        ContractKind::Queryable => (false, true),
        ContractKind::Opaque => (false, false),
    };
    SideEffectContract {
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
    }
}
