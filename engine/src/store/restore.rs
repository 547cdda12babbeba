//! The statements that prepare a restored database before workers resume (docs/DESIGN.md
//! §12): external steps the backup saw unfinished are keyed, marked restored, and the ones
//! caught mid-call or ready go to recovery instead of being sent blind.

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

/// Gives every external step in one of the `unfinished` states its request key (the derived
/// one, as `RequestKey::derive` makes it, where none was persisted, so recovery can ask about
/// it) and marks it restored. Returns (step, state) of each.
pub async fn mark_restored(
    conn: &mut PgConnection,
    unfinished: &[String],
) -> sqlx::Result<Vec<(Uuid, String)>> {
    let rows = sqlx::query!(
        r#"update step set request_key = coalesce(request_key,
               'w-' || replace(workflow_id::text, '-', '') || '/' || logical || '-v' || definition_version),
               restored_at = now(), updated_at = now()
           where state::text = any($1) and kind <> 'pure'
           returning id, state::text as "state!""#,
        unfinished
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.state)).collect())
}

/// Moves every external step in one of the `unfinished` states except `blocked` to
/// `outcome_unknown`: its open attempt (if any) ends with observation `restored`, which is
/// also recorded as a transport observation. Returns (step, workflow) of each.
pub async fn send_to_recovery(
    conn: &mut PgConnection,
    restored: &Value,
    unfinished: &[String],
) -> sqlx::Result<Vec<(Uuid, Uuid)>> {
    let rows = sqlx::query!(
        r#"with caught as (
               update step set state = 'outcome_unknown', lease_holder = null, lease_expires_at = null,
                      run_after = now(), unknown_since = coalesce(unknown_since, now())
               where state::text = any($2) and state <> 'blocked' and kind <> 'pure'
               returning id, workflow_id, request_key
           ), ended as (
               update attempt a set ended_at = now(), outcome = 'outcome_unknown', observation = $1
               from caught c where a.step_id = c.id and a.ended_at is null
               returning a.id, a.step_id
           ), observed as (
               insert into observation (step_id, attempt_id, request_key, kind, body)
               select c.id, e.id, c.request_key, 'transport', $1
               from caught c left join ended e on e.step_id = c.id
           )
           select id, workflow_id from caught"#,
        restored,
        unfinished
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.workflow_id)).collect())
}

/// Expires the lease of every step still `running`, so the reclaim that follows finds them.
pub async fn expire_running_leases(conn: &mut PgConnection) -> sqlx::Result<()> {
    sqlx::query!(
        r#"update step set lease_expires_at = now() - interval '1 second' where state = 'running'"#
    )
    .execute(conn)
    .await?;
    Ok(())
}
