//! Replacement steps: when the bytes of a request must change (a definition bug fixed, or a
//! durable rejection), the old key is never reused with new bytes. A replacement step gets a
//! new request key, linked to the original, and runs under the newest definition version.

use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::definition::{DOCUMENT_DELIVERY_VERSIONS, StepKind};
use crate::domain::{RequestKey, StepKey, StepState};
use crate::store::journal::{self, Actor, AuditEntry};
use crate::store::{step, workflow};

/// Why a step cannot be replaced.
#[derive(Debug, thiserror::Error)]
pub enum ReplaceError {
    #[error("no step {0}")]
    NotFound(Uuid),
    #[error("only an external step that was rejected or waits for review can be replaced; this one is {}", .0.label().to_lowercase())]
    NotReplaceable(StepState),
    #[error(
        "the request may have reached the destination (an attempt ended {0}); a replacement could deliver twice"
    )]
    MayHaveHappened(&'static str),
    #[error("this step was replaced already")]
    AlreadyReplaced,
    #[error("a replacement needs a reason")]
    NoReason,
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
}

/// Creates the replacement of `original` and records who asked and why.
pub async fn replace_step(
    pool: &PgPool,
    original: Uuid,
    actor: Actor<'_>,
    reason: &str,
) -> Result<Uuid, ReplaceError> {
    if reason.trim().is_empty() {
        return Err(ReplaceError::NoReason);
    }
    let mut tx = pool.begin().await?;
    let (workflow_id, state, kind, request_key, logical, version) =
        step::lock_for_action(&mut tx, original)
            .await?
            .ok_or(ReplaceError::NotFound(original))?;
    let replaceable =
        kind != StepKind::Pure && matches!(state, StepState::Rejected | StepState::ReviewRequired);
    if !replaceable {
        return Err(ReplaceError::NotReplaceable(state));
    }
    // Safe only where nothing can have happened: a durable rejection, or attempts that all
    // ended before the boundary (authority denied, request diverged, nothing accepted).
    // Authoritative absence proven by a lookup is the console's case, through the same table.
    let outcomes = sqlx::query_scalar!(
        r#"select outcome as "outcome!: crate::domain::AttemptOutcome" from attempt
           where step_id = $1 and outcome in ('outcome_unknown', 'succeeded')"#,
        original
    )
    .fetch_all(&mut *tx)
    .await?;
    if let Some(outcome) = outcomes.first() {
        return Err(ReplaceError::MayHaveHappened(outcome.label()));
    }
    let replaced = sqlx::query_scalar!(
        r#"select exists(select 1 from step where replaces_step_id = $1) as "replaced!""#,
        original
    )
    .fetch_one(&mut *tx)
    .await?;
    if replaced {
        return Err(ReplaceError::AlreadyReplaced);
    }
    let generations: i64 = sqlx::query_scalar!(
        r#"select count(*) as "n!" from step where workflow_id = $1 and logical = $2"#,
        workflow_id,
        logical
    )
    .fetch_one(&mut *tx)
    .await?;
    let old_key = request_key
        .map(RequestKey::from)
        .unwrap_or_else(|| RequestKey::derive(workflow_id, &StepKey::new(logical, version)));
    let new_key = RequestKey::replacement(&old_key, u32::try_from(generations).unwrap_or(u32::MAX));
    let newest = *DOCUMENT_DELIVERY_VERSIONS.last().expect("a version");
    let replacement = step::insert_replacement(&mut tx, original, newest, new_key.as_str()).await?;
    journal::audit(
        &mut tx,
        &AuditEntry {
            actor,
            action: "replace",
            workflow: Some(workflow_id),
            step: Some(original),
            reason: Some(reason),
            details: json!({ "replacement": replacement, "old_key": old_key, "new_key": new_key }),
        },
    )
    .await?;
    workflow::announce(
        &mut tx,
        workflow_id,
        "step.replaced",
        &json!({ "step": original, "replacement": replacement }),
    )
    .await?;
    workflow::refresh_state(&mut tx, workflow_id).await?;
    tx.commit().await?;
    Ok(replacement)
}
