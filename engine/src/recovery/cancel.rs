//! Cancelling a whole workflow: every step still unsettled is cancelled through the same path
//! as the console's *Cancel* on one step, so the contract decides for each (a step whose call
//! may be in flight is never cancelled behind the destination's back) and each is audited.

use sqlx::PgPool;
use uuid::Uuid;

use crate::operators::Operator;
use crate::store::step;

use super::{Action, ActionError, Request, perform};

/// What cancelling a workflow did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cancelled {
    /// The steps cancelled by name (each also cancels the unstarted steps after it).
    pub steps: Vec<Uuid>,
    pub message: String,
}

/// Cancels every unsettled external step of `workflow`, oldest first. Refuses, changing nothing
/// more, at the first step the contract or the role does not let `operator` cancel; a workflow
/// with no unsettled step is refused as already finished.
pub async fn cancel_workflow(
    pool: &PgPool,
    operator: &Operator,
    workflow: Uuid,
    reason: &str,
) -> Result<Cancelled, ActionError> {
    let mut cancelled = Vec::new();
    let mut tried = Vec::new();
    while let Some(next) = step::next_unsettled_external(pool, workflow, &tried).await? {
        tried.push(next);
        let request = Request {
            operator,
            step: next,
            seen_version: None,
            reason,
            action: Action::Cancel,
        };
        match perform(pool, request).await {
            Ok(_) => cancelled.push(next),
            Err(error) if cancelled.is_empty() => return Err(error),
            Err(error) => {
                return Err(ActionError::Conflict(format!(
                    "{} step(s) were cancelled, then one was refused: {error}",
                    cancelled.len()
                )));
            }
        }
    }
    if cancelled.is_empty() {
        return Err(if step::workflow_exists(pool, workflow).await? {
            ActionError::Conflict(
                "Every step of this workflow is settled already; there is nothing to cancel."
                    .into(),
            )
        } else {
            ActionError::NotFound
        });
    }
    Ok(Cancelled {
        message: format!(
            "Workflow cancelled: {} step(s) and the steps after them that had not started.",
            cancelled.len()
        ),
        steps: cancelled,
    })
}
