//! Replacement steps: what deciding a replacement reads (whether an attempt may have reached
//! the destination, whether the step was replaced already, how many generations it has), and
//! the corrected input a replacement carries. The step row itself is inserted by
//! [`super::step::insert_replacement`].

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::domain::AttemptOutcome;

/// The outcomes of `step`'s attempts that may have reached the destination (ended unknown, or
/// succeeded); empty when every attempt ended before the boundary.
pub async fn outcomes_that_may_have_reached(
    conn: &mut PgConnection,
    step: Uuid,
) -> sqlx::Result<Vec<AttemptOutcome>> {
    sqlx::query_scalar!(
        r#"select outcome as "outcome!: crate::domain::AttemptOutcome" from attempt
           where step_id = $1 and outcome in ('outcome_unknown', 'succeeded')"#,
        step
    )
    .fetch_all(conn)
    .await
}

/// Whether some step replaces `original` already.
pub async fn is_replaced(conn: &mut PgConnection, original: Uuid) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"select exists(select 1 from step where replaces_step_id = $1) as "replaced!""#,
        original
    )
    .fetch_one(conn)
    .await
}

/// How many steps (generations) `workflow` has under the logical name `logical`.
pub async fn generations(
    conn: &mut PgConnection,
    workflow: Uuid,
    logical: &str,
) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"select count(*) as "n!" from step where workflow_id = $1 and logical = $2"#,
        workflow,
        logical
    )
    .fetch_one(conn)
    .await
}

/// Gives `replacement` its own input and digest, replacing the workflow's for this step.
pub async fn set_corrected_input(
    conn: &mut PgConnection,
    replacement: Uuid,
    input: &Value,
    digest: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"update step set input = $2, input_digest = $3 where id = $1"#,
        replacement,
        input,
        digest,
    )
    .execute(conn)
    .await?;
    Ok(())
}
