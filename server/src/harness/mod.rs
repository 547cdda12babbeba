//! What `z29c` runs to measure and to prove itself, beside serving: the benchmarks (`bench`),
//! the demo `make run` serves (`demo`), and the scenario harness that kills workers and judges
//! recovery from the destinations' ledgers (`scenario`).

pub mod bench;
pub mod demo;
pub mod scenario;
pub mod shipped;

use engine::domain::ContractKind;

/// The contract a synthetic destination of `kind` lets its adapter declare.
pub fn contract_kind(kind: destinations::Kind) -> ContractKind {
    match kind {
        destinations::Kind::Idempotent => ContractKind::Idempotent,
        destinations::Kind::Queryable => ContractKind::Queryable,
        destinations::Kind::Opaque => ContractKind::Opaque,
    }
}
