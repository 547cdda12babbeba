//! Operator authorizations: an approver's permission for one more attempt under an adapter
//! that cannot prove the first one's outcome, with the duplicate risk acknowledged. The worker
//! marks them used by the attempt that carries them.

use sqlx::PgConnection;
use uuid::Uuid;

/// Records authorization `id` for another attempt of `step`, acknowledging the duplicate risk.
pub async fn insert(
    conn: &mut PgConnection,
    id: Uuid,
    step: Uuid,
    (author, reason): (&str, &str),
    proposal: Option<Uuid>,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into operator_authorization (id, step_id, author, reason, acknowledged_duplicate_risk, proposal_id)
           values ($1, $2, $3, $4, true, $5)"#,
        id,
        step,
        author,
        reason,
        proposal,
    )
    .execute(conn)
    .await?;
    Ok(())
}
