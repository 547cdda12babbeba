//! Compensation steps: a request that the destination withdraw an effect, run as its own
//! external step under its own request key, linked to the step whose effect it withdraws.

use sqlx::PgConnection;
use uuid::Uuid;

/// Inserts compensation step `id`, ready to run, withdrawing an effect of `original`: its
/// logical name is the original's plus `.withdrawal`, its key the original's plus
/// `/withdraw-<generation>`.
pub async fn insert_withdrawal_step(
    conn: &mut PgConnection,
    id: Uuid,
    original: Uuid,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into step (id, workflow_id, logical, definition_version, generation, kind, adapter,
                             state, request_key)
           select $1, o.workflow_id, o.logical || '.withdrawal', o.definition_version, n.generation,
                  'compensation', o.adapter, 'ready',
                  coalesce(o.request_key, o.id::text) || '/withdraw-' || n.generation
           from step o,
                lateral (select count(*)::int as generation from step c
                         where c.workflow_id = o.workflow_id and c.logical = o.logical || '.withdrawal') n
           where o.id = $2"#,
        id,
        original,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Links compensation step `compensation` to `original` and the external reference it asks
/// the destination to withdraw (and the incident that asked, if one did).
pub async fn link(
    conn: &mut PgConnection,
    compensation: Uuid,
    original: Uuid,
    reference: &str,
    incident: Option<Uuid>,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into compensation_link (compensation_step_id, original_step_id, external_reference, incident_id)
           values ($1, $2, $3, $4)"#,
        compensation,
        original,
        reference,
        incident,
    )
    .execute(conn)
    .await?;
    Ok(())
}
