//! What a definition's step is (docs/DESIGN.md §16): local, or across the boundary. Mirrors the
//! PostgreSQL enum `step_kind`.

use serde::{Deserialize, Serialize};

/// Whether the step runs locally or crosses the boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(sqlx::Type))]
#[cfg_attr(
    feature = "runtime",
    sqlx(type_name = "step_kind", rename_all = "snake_case")
)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// Deterministic and local: safe to run again.
    Pure,
    /// Calls an adapter: its effect outlives any transaction.
    External,
    /// Calls an adapter to counteract an earlier effect.
    Compensation,
}
