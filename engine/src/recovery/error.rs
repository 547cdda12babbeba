//! Why an operator action did nothing, in words fit for a page or an API answer. Driver and
//! worker errors never reach those words: they are logged where they are converted, and the
//! operator reads a fixed sentence.

use crate::store::guard::GuardedError;
use crate::worker::WorkerError;

/// Why nothing was done.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    #[error("no such step")]
    NotFound,
    /// The operator's role does not allow the action.
    #[error("{0}")]
    Forbidden(String),
    /// The contract does not permit it in the step's current state.
    #[error("{0}")]
    NotPermitted(String),
    /// The step changed since the page (or the caller's `If-Match`) saw it.
    #[error("{0}")]
    Stale(String),
    /// A worker holds the step right now, or the workflow is in no state for the action.
    #[error("{0}")]
    Conflict(String),
    /// A required field is missing or malformed.
    #[error("{0}")]
    Invalid(String),
    /// The lookup (or the regeneration of a restored request) failed; the cause is logged.
    #[error("The destination could not be asked; nothing changed. Try again in a moment.")]
    Destination,
    /// The database failed; the driver's text stays in [`std::error::Error::source`], for the
    /// log, and out of the message.
    #[error("The database did not answer; nothing was done. Try again in a moment.")]
    Sqlx(#[from] sqlx::Error),
}

impl From<GuardedError> for ActionError {
    fn from(error: GuardedError) -> Self {
        match error {
            GuardedError::LeaseLost(_) => ActionError::Conflict(
                "A worker took this step over while you acted; reload to see what it did.".into(),
            ),
            GuardedError::Sqlx(e) => e.into(),
        }
    }
}

impl From<WorkerError> for ActionError {
    /// Logs the worker's error, which may carry driver text, and keeps it off the page.
    fn from(error: WorkerError) -> Self {
        tracing::warn!(%error, "an operator action could not ask the destination");
        ActionError::Destination
    }
}
