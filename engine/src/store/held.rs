//! Held steps (docs/DESIGN.md §5, §20): claimed steps whose adapter may send nothing now wait
//! here, unsent and uncounted, until their adapter's current version passes verification and no
//! operator holds it. The trigger that keeps the claim queue keeps `step_held` too.

use sqlx::PgConnection;

/// Sends the held steps of adapter `name` (of every adapter, when `None`) that may send again
/// back to the claim queue, announcing each (their workflows are locked first, as a flush locks
/// them): all at once, or oldest first at `per_second` (a resume's ramp). Returns how many it
/// released.
pub async fn release(
    conn: &mut PgConnection,
    name: Option<&str>,
    per_second: Option<f64>,
) -> sqlx::Result<usize> {
    let owners = sqlx::query_scalar!(
        r#"select distinct s.workflow_id
           from step_held h join adapter a on a.name = h.adapter join step s on s.id = h.step_id
           where s.state = 'held' and a.verified_version = a.contract_version and a.held_at is null
             and ($1::text is null or a.name = $1)
           order by 1"#,
        name
    )
    .fetch_all(&mut *conn)
    .await?;
    if owners.is_empty() {
        return Ok(0);
    }
    super::conclusion::lock_workflows(conn, &owners).await?;
    let released = sqlx::query!(
        r#"with going as (
               select s.id, row_number() over (order by s.updated_at, s.id) - 1 as place
               from step s join step_held h on h.step_id = s.id join adapter a on a.name = s.adapter
               where s.workflow_id = any($1) and s.state = 'held'
                 and a.verified_version = a.contract_version and a.held_at is null
                 and ($2::text is null or a.name = $2)
           )
           update step s set state = 'ready', updated_at = now(),
                  run_after = now() + make_interval(secs => coalesce(g.place / $3::float8, 0))
           from going g
           where g.id = s.id
           returning s.id, s.workflow_id, s.logical, s.adapter"#,
        &owners,
        name,
        per_second
    )
    .fetch_all(&mut *conn)
    .await?;
    let events: Vec<super::conclusion::Announcing> = released
        .iter()
        .map(|r| super::conclusion::Announcing {
            event_id: uuid::Uuid::now_v7(),
            workflow: r.workflow_id,
            kind: crate::domain::EventKind::StepReleased.as_str(),
            payload: serde_json::json!({ "step": r.id, "logical": r.logical, "adapter": r.adapter }),
        })
        .collect();
    let spare: Vec<uuid::Uuid> = owners.iter().map(|_| uuid::Uuid::now_v7()).collect();
    super::conclusion::announce(conn, &events, &owners, &spare).await?;
    Ok(released.len())
}

/// Holds `steps`, claimed and found to belong to an adapter that may send nothing (its current
/// version is not verified, or an operator holds it): they leave the claim queue unsent, with
/// no attempt counted. Returns those held.
pub async fn hold(conn: &mut PgConnection, steps: &[uuid::Uuid]) -> sqlx::Result<Vec<uuid::Uuid>> {
    sqlx::query_scalar!(
        r#"update step s set state = 'held', updated_at = now()
           where s.id = any($1) and s.state = 'ready' and s.lease_holder is null
             and not exists (select 1 from adapter a where a.name = s.adapter
                             and a.verified_version = a.contract_version and a.held_at is null)
           returning s.id"#,
        steps
    )
    .fetch_all(conn)
    .await
}
