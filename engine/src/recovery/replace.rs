//! Replacement steps: when the bytes of a request must change (a definition bug fixed, or a
//! durable rejection), the old key is never reused with new bytes. A replacement step gets a
//! new request key, linked to the original, and runs under the newest definition version
//! (docs/DESIGN.md §2, §7).

use serde_json::{Value, json};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::definition::{Catalog, CatalogError};
use crate::domain::StepKind;
use crate::domain::{EventKind, InputDigest, RequestKey, StepKey, StepState};
use crate::store::action::{self, StepFacts};
use crate::store::journal::{self, Actor, AuditEntry};
use crate::store::{self, step, workflow};

use super::error::ActionError;
use crate::domain::AuditAction;

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
    let locked = action::lock_for_action(&mut tx, original)
        .await?
        .ok_or(ReplaceError::NotFound(original))?;
    let replaceable = locked.kind != StepKind::Pure
        && matches!(
            locked.state,
            StepState::Rejected | StepState::ReviewRequired
        );
    if !replaceable {
        return Err(ReplaceError::NotReplaceable(locked.state));
    }
    // Safe only where nothing can have happened: a durable rejection, or attempts that all
    // ended before the boundary (authority denied, request diverged, nothing accepted).
    // Authoritative absence proven by a lookup is the console's case, through the same table.
    let outcomes = store::replacement::outcomes_that_may_have_reached(&mut tx, original).await?;
    if let Some(outcome) = outcomes.first() {
        return Err(ReplaceError::MayHaveHappened(outcome.label()));
    }
    let (replacement, details) = create_replacement(&mut tx, &locked, original, None)
        .await
        .map_err(|e| match e {
            ActionError::Conflict(_) => ReplaceError::AlreadyReplaced,
            ActionError::Sqlx(e) => ReplaceError::Sqlx(e),
            other => ReplaceError::Sqlx(sqlx::Error::Protocol(other.to_string())),
        })?;
    journal::audit(
        &mut tx,
        &AuditEntry {
            actor,
            action: AuditAction::Replace,
            workflow: Some(locked.workflow_id),
            step: Some(original),
            reason: Some(reason),
            details,
        },
    )
    .await?;
    workflow::refresh_state(&mut tx, locked.workflow_id).await?;
    tx.commit().await?;
    Ok(replacement)
}

/// The new step replacing `original`, with a new request key linked to the old and, when
/// given, corrected input (normalized and digested here; the old digest stays on the old step).
pub(crate) async fn create_replacement(
    conn: &mut PgConnection,
    locked: &StepFacts,
    original: Uuid,
    corrected: Option<&Value>,
) -> Result<(Uuid, Value), ActionError> {
    if store::replacement::is_replaced(&mut *conn, original).await? {
        return Err(ActionError::Conflict(
            "This step was replaced already; open its replacement.".into(),
        ));
    }
    let workflow = workflow::by_id(&mut *conn, locked.workflow_id)
        .await?
        .ok_or(ActionError::NotFound)?;
    let definition = Catalog::newest(&mut *conn, &workflow.definition_name)
        .await
        .map_err(|e| match e {
            CatalogError::Sqlx(e) => ActionError::from(e),
            other => ActionError::Conflict(format!("The replacement cannot be made: {other}.")),
        })?;
    let newest = definition.version();
    let corrected = match corrected {
        None => None,
        // PostgreSQL stores no NUL character in text or jsonb, and intake refuses it the same way.
        Some(input) if input.to_string().contains("\\u0000") => {
            return Err(ActionError::Invalid(
                "The corrected input must not contain the NUL character.".into(),
            ));
        }
        Some(input) => {
            let normalized = definition
                .normalize(input)
                .map_err(|e| ActionError::Invalid(format!("The corrected {e}.")))?;
            let digest = InputDigest::of_json(&normalized);
            Some((normalized, digest))
        }
    };
    let generations =
        store::replacement::generations(&mut *conn, locked.workflow_id, &locked.logical).await?;
    let old_key = locked
        .request_key
        .clone()
        .map(RequestKey::from)
        .unwrap_or_else(|| {
            RequestKey::derive(
                locked.workflow_id,
                &StepKey::new(locked.logical.clone(), locked.definition_version),
            )
        });
    let new_key = RequestKey::replacement(&old_key, u32::try_from(generations).unwrap_or(u32::MAX));
    let replacement = step::insert_replacement(conn, original, newest, new_key.as_str()).await?;
    if let Some((input, digest)) = &corrected {
        store::replacement::set_corrected_input(&mut *conn, replacement, input, digest.as_str())
            .await?;
    }
    workflow::announce(
        conn,
        locked.workflow_id,
        EventKind::StepReplaced,
        &json!({ "step": original, "replacement": replacement }),
    )
    .await?;
    let new_digest = corrected
        .as_ref()
        .map_or(workflow.input_digest.clone(), |(_, d)| d.to_string());
    Ok((
        replacement,
        json!({
            "replacement": replacement,
            "old_key": old_key,
            "new_key": new_key,
            "old_input_digest": workflow.input_digest,
            "new_input_digest": new_digest,
        }),
    ))
}
