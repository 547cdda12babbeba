//! Waivers: an operator accepts a step's residual uncertainty, naming it; the step counts as
//! done and its dependants run.

use sqlx::PgConnection;
use uuid::Uuid;

/// Records waiver `id` of `step`, with the residual uncertainty it accepts.
pub async fn insert(
    conn: &mut PgConnection,
    id: Uuid,
    step: Uuid,
    (author, reason, residual): (&str, &str, &str),
    proposal: Option<Uuid>,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into waiver (id, step_id, author, reason, residual_uncertainty, proposal_id)
           values ($1, $2, $3, $4, $5, $6)"#,
        id,
        step,
        author,
        reason,
        residual,
        proposal,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Marks `step` waived under `waiver`.
pub async fn mark_step_waived(
    conn: &mut PgConnection,
    step: Uuid,
    waiver: Uuid,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"update step set state = 'waived', waiver_id = $2, unknown_since = null, updated_at = now()
           where id = $1"#,
        step,
        waiver,
    )
    .execute(conn)
    .await?;
    Ok(())
}
