//! The contracts of the three destination kinds of `destinations/PROTOCOL.md`, as their
//! adapter files (`adapters/*-docs.yaml`, [`super::protocol`]) declare them.

use super::protocol::protocol_spec;
use crate::domain::{ContractKind, SideEffectContract};

/// The contract of a destination kind: what a destination of that kind can prove.
pub fn declared(
    kind: ContractKind,
    deadline_ms: u64,
    visibility_window_ms: u64,
    review_unknown: bool,
) -> SideEffectContract {
    protocol_spec(kind, "", deadline_ms, visibility_window_ms, review_unknown).contract()
}
