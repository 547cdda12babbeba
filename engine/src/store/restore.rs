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
               update step set state = 'outcome_unknown', lease_holder = null, lease_id = null,
                      run_after = now(), unknown_since = coalesce(unknown_since, now())
               where state::text = any($2) and state <> 'blocked' and kind <> 'pure'
               returning id, workflow_id, request_key
           ), open as (
               select a.id, a.step_id from attempt a join caught c on c.id = a.step_id
               where a.ended_at is null
           ), observed as (
               -- The open attempt ends with it; a step with none gets the observation alone.
               insert into observation (step_id, attempt_id, request_key, kind, body, outcome)
               select c.id, o.id, c.request_key, 'transport', $1,
                      case when o.id is not null then 'outcome_unknown'::attempt_outcome end
               from caught c left join open o on o.step_id = c.id
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
        r#"update lease set expires_at = now() - interval '1 second'
           where id in (select lease_id from step where state = 'running')"#
    )
    .execute(conn)
    .await?;
    Ok(())
}
