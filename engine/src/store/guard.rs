//! The guard every write after a lease passes through: zero rows touched means the lease was
//! lost (docs/DESIGN.md §4), reported as [`LeaseLost`] so a stale writer changes nothing.

use uuid::Uuid;

/// A write after a lease touched no row: another worker (or the sweeper) owns the step now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("lease lost on step {step}")]
pub struct LeaseLost {
    pub step: Uuid,
}

/// Errors of a guarded write.
#[derive(Debug, thiserror::Error)]
pub enum GuardedError {
    #[error(transparent)]
    LeaseLost(#[from] LeaseLost),
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
}

/// `Ok` if the guarded write touched its one row.
pub(super) fn guard(rows: u64, step: Uuid) -> Result<(), GuardedError> {
    if rows == 1 {
        Ok(())
    } else {
        Err(LeaseLost { step }.into())
    }
}
