//! Leases on steps (docs/DESIGN.md §4): who may act on a step now. A write after a lease that
//! touches no row is [`LeaseLost`]: another worker, or the sweeper, owns the step, and the
//! stale writer changes nothing.

use sqlx::{Executor, PgConnection, Postgres};
use uuid::Uuid;

use super::guard::{GuardedError, guard};
use super::step::Claimed;
use crate::definition::StepKind;
use crate::domain::{StepState, TransportObservation};

/// Checkpoint 1, for up to `limit` steps at once: leases ready steps (and outcome-unknown steps
/// due for recovery) with `FOR UPDATE SKIP LOCKED`. Ready steps move to `running` and count
/// an attempt; [`insert_attempts`] records those attempts in the same transaction.
pub async fn claim(
    conn: &mut PgConnection,
    worker: &str,
    limit: i64,
    lease_secs: f64,
) -> sqlx::Result<Vec<Claimed>> {
    sqlx::query_as!(
        Claimed,
        r#"with due as (
               select id from step
               where state in ('ready', 'outcome_unknown') and run_after <= now()
                 and (lease_expires_at is null or lease_expires_at < now())
               order by run_after
               limit $2
               for update skip locked
           )
           update step s
              set lease_holder = $1,
                  lease_expires_at = now() + make_interval(secs => $3),
                  run_after = now() + make_interval(secs => $3),
                  state = case when s.state = 'ready' then 'running'::step_state else s.state end,
                  attempt_count = s.attempt_count + case when s.state = 'ready' then 1 else 0 end,
                  updated_at = now()
             from due, workflow w
            where s.id = due.id and w.id = s.workflow_id
           returning s.id, s.workflow_id, s.logical, w.definition_name, s.definition_version,
                     s.kind as "kind: StepKind", s.adapter,
                     s.state as "state: StepState", s.request_key, s.attempt_count,
                     s.unknown_since as "unknown_since: _",
                     coalesce(s.input, w.input) as "workflow_input!",
                     (select c.external_reference from compensation_link c
                       where c.compensation_step_id = s.id) as withdraws,
                     w.state = 'pending' as "workflow_pending!", null::uuid as attempt"#,
        worker,
        limit,
        lease_secs,
    )
    .fetch_all(conn)
    .await
}

/// Leases one step for an operator's lookup, whatever its state, unless someone holds it.
/// The caller has locked the row and checked that the action is permitted.
pub async fn lease_for_operator(
    conn: &mut PgConnection,
    step: Uuid,
    holder: &str,
    lease_secs: f64,
) -> sqlx::Result<Option<Claimed>> {
    sqlx::query_as!(
        Claimed,
        r#"update step s
              set lease_holder = $2, lease_expires_at = now() + make_interval(secs => $3),
                  updated_at = now()
             from workflow w
            where s.id = $1 and w.id = s.workflow_id
              and (s.lease_expires_at is null or s.lease_expires_at < now())
           returning s.id, s.workflow_id, s.logical, w.definition_name, s.definition_version,
                     s.kind as "kind: StepKind", s.adapter,
                     s.state as "state: StepState", s.request_key, s.attempt_count,
                     s.unknown_since as "unknown_since: _",
                     coalesce(s.input, w.input) as "workflow_input!",
                     (select c.external_reference from compensation_link c
                       where c.compensation_step_id = s.id) as withdraws,
                     w.state = 'pending' as "workflow_pending!", null::uuid as attempt"#,
        step,
        holder,
        lease_secs,
    )
    .fetch_optional(conn)
    .await
}

/// Extends the lease of a step this worker holds; fails with [`LeaseLost`] otherwise.
pub async fn renew_lease<'e, E>(
    executor: E,
    step: Uuid,
    worker: &str,
    lease_secs: f64,
) -> Result<(), GuardedError>
where
    E: Executor<'e, Database = Postgres>,
{
    let rows = sqlx::query!(
        r#"update step set lease_expires_at = now() + make_interval(secs => $3),
                           run_after = now() + make_interval(secs => $3)
           where id = $1 and lease_holder = $2"#,
        step,
        worker,
        lease_secs,
    )
    .execute(executor)
    .await?
    .rows_affected();
    guard(rows, step)
}

/// Locks a step this worker holds, for a transaction that settles it (and so ends the lease
/// itself); fails with [`LeaseLost`] otherwise. Unlike a renewal, it writes no row version.
pub async fn hold_lease(
    conn: &mut PgConnection,
    step: Uuid,
    worker: &str,
) -> Result<(), GuardedError> {
    let held = sqlx::query_scalar!(
        r#"select id from step where id = $1 and lease_holder = $2 for update"#,
        step,
        worker,
    )
    .fetch_optional(conn)
    .await?;
    guard(u64::from(held.is_some()), step)
}

/// Releases this worker's lease without changing the step's state.
pub async fn release_lease(
    conn: &mut PgConnection,
    step: Uuid,
    worker: &str,
) -> Result<(), GuardedError> {
    let rows = sqlx::query!(
        r#"update step set lease_holder = null, lease_expires_at = null, updated_at = now()
           where id = $1 and lease_holder = $2"#,
        step,
        worker,
    )
    .execute(conn)
    .await?
    .rows_affected();
    guard(rows, step)
}

/// Sweeper, part 1: steps whose worker vanished before persisting a request identity. No call
/// was made, so their open attempts end `failed_before_effect` and the steps are ready again.
pub async fn reclaim_expired_before_call(conn: &mut PgConnection) -> sqlx::Result<Vec<Uuid>> {
    let body = serde_json::to_value(TransportObservation::WorkerLost { during_call: false })
        .expect("an observation serializes");
    sqlx::query_scalar!(
        r#"with expired as (
               select id from step where state = 'running' and lease_expires_at < now()
               for update skip locked
           ), ended as (
               update attempt a set ended_at = now(), outcome = 'failed_before_effect', observation = $1
               from expired e where a.step_id = e.id and a.ended_at is null
               returning a.id, a.step_id
           ), observed as (
               insert into observation (step_id, attempt_id, kind, body)
               select step_id, id, 'transport', $1 from ended
           )
           update step s set state = 'ready', lease_holder = null, lease_expires_at = null,
                             run_after = now(), updated_at = now()
           from expired e where s.id = e.id
           returning s.id"#,
        body
    )
    .fetch_all(conn)
    .await
}

/// Sweeper, part 2: steps whose worker vanished after persisting a request identity. The call
/// may have happened: their attempts end `outcome_unknown`, the steps go to recovery.
pub async fn reclaim_expired_during_call(
    conn: &mut PgConnection,
) -> sqlx::Result<Vec<(Uuid, Uuid)>> {
    let body = serde_json::to_value(TransportObservation::WorkerLost { during_call: true })
        .expect("an observation serializes");
    let before = serde_json::to_value(TransportObservation::WorkerLost { during_call: false })
        .expect("an observation serializes");
    let rows = sqlx::query!(
        r#"with expired as (
               select id, workflow_id, request_key from step
               where state = 'invoking' and lease_expires_at < now()
               for update skip locked
           ), ended as (
               -- An attempt that never reached `invoking` sent nothing, whatever its step did.
               update attempt a set ended_at = now(),
                      outcome = case when a.invoked_at is null then 'failed_before_effect'::attempt_outcome
                                     else 'outcome_unknown'::attempt_outcome end,
                      observation = case when a.invoked_at is null then $2::jsonb else $1::jsonb end
               from expired e where a.step_id = e.id and a.ended_at is null
               returning a.id, a.step_id, a.observation
           ), observed as (
               insert into observation (step_id, attempt_id, request_key, kind, body)
               select ended.step_id, ended.id, e.request_key, 'transport', ended.observation
               from ended join expired e on e.id = ended.step_id
           )
           update step s set state = 'outcome_unknown', lease_holder = null, lease_expires_at = null,
                             run_after = now(), unknown_since = coalesce(s.unknown_since, now()),
                             updated_at = now()
           from expired e where s.id = e.id
           returning s.id, s.workflow_id"#,
        body,
        before,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.workflow_id)).collect())
}
