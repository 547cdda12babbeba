//! Leases on steps (docs/DESIGN.md §4): who may act on a step now. A lease is a row of `lease`,
//! one per claimed batch (or per operator's check), naming its holder, its expiry and its steps;
//! each step names its lease and holder. A renewal writes the one lease row. A write after a
//! lease that touches no row is [`LeaseLost`]: another worker, or the sweeper, owns the step,
//! and the stale writer changes nothing.

use sqlx::{Executor, PgConnection, Postgres};
use uuid::Uuid;

use super::guard::{GuardedError, guard};
use super::step::Claimed;
use crate::domain::StepKind;
use crate::domain::{StepState, TransportObservation};

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
        r#"with free as (
               select s.id from step s
               where s.id = $1
                 and not exists (select 1 from lease l where l.id = s.lease_id and l.expires_at > now())
           ), leased as (
               insert into lease (id, holder, expires_at, steps)
               select $4, $2, now() + make_interval(secs => $3), array[id] from free
               returning id
           )
           update step s
              set lease_holder = $2, lease_id = leased.id, updated_at = now()
             from workflow w, leased
            where s.id = $1 and w.id = s.workflow_id
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
        Uuid::now_v7(),
    )
    .fetch_optional(conn)
    .await
}

/// Extends the lease under which this worker holds `step`; fails with [`LeaseLost`] otherwise.
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
        r#"update lease l set expires_at = now() + make_interval(secs => $3)
           from step s
           where s.id = $1 and s.lease_holder = $2 and l.id = s.lease_id"#,
        step,
        worker,
        lease_secs,
    )
    .execute(executor)
    .await?
    .rows_affected();
    guard(rows, step)
}

/// Extends every lease in `leases` that `holder` still holds: one row per batch in flight.
pub async fn renew_leases<'e, E>(
    executor: E,
    holder: &str,
    leases: &[Uuid],
    lease_secs: f64,
) -> sqlx::Result<u64>
where
    E: Executor<'e, Database = Postgres>,
{
    Ok(sqlx::query!(
        r#"update lease set expires_at = now() + make_interval(secs => $3)
           where id = any($1) and holder = $2"#,
        leases,
        holder,
        lease_secs,
    )
    .execute(executor)
    .await?
    .rows_affected())
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

/// Releases this worker's lease without changing the step's state (a claimable step is queued
/// again by the table's trigger).
pub async fn release_lease(
    conn: &mut PgConnection,
    step: Uuid,
    worker: &str,
) -> Result<(), GuardedError> {
    let rows = sqlx::query!(
        r#"update step set lease_holder = null, lease_id = null, updated_at = now()
           where id = $1 and lease_holder = $2"#,
        step,
        worker,
    )
    .execute(conn)
    .await?
    .rows_affected();
    guard(rows, step)
}

/// What the sweeper did with the steps of expired leases.
#[derive(Debug, Default)]
pub struct Reclaimed {
    /// Steps whose worker vanished before persisting a request identity: ready again.
    pub to_ready: Vec<Uuid>,
    /// Steps whose worker vanished after it: (step, workflow), in recovery.
    pub to_recovery: Vec<(Uuid, Uuid)>,
}

/// The sweeper: ends what the holders of expired leases left unfinished, then drops the
/// leases. A step still `running` made no call: its open attempt ends `failed_before_effect`
/// and the step is ready again. A step `invoking` may have been sent: its open attempt ends
/// `outcome_unknown` (or `failed_before_effect` if it never reached the call) and the step
/// goes to recovery. Any other step under such a lease (an operator's check) is released.
pub async fn reclaim_expired(conn: &mut PgConnection) -> sqlx::Result<Reclaimed> {
    let expired = sqlx::query_scalar!(
        r#"select id from lease where expires_at < now() order by id for update skip locked"#
    )
    .fetch_all(&mut *conn)
    .await?;
    if expired.is_empty() {
        return Ok(Reclaimed::default());
    }
    let before = serde_json::to_value(TransportObservation::WorkerLost { during_call: false })
        .expect("an observation serializes");
    let during = serde_json::to_value(TransportObservation::WorkerLost { during_call: true })
        .expect("an observation serializes");
    let to_ready = sqlx::query_scalar!(
        r#"with expired as (
               select unnest(steps) as step_id, id as lease_id from lease where id = any($1)
           ), caught as (
               update step s set state = 'ready', lease_holder = null, lease_id = null,
                                 run_after = now(), updated_at = now()
               from expired e where s.id = e.step_id and s.lease_id = e.lease_id and s.state = 'running'
               returning s.id, s.request_key
           ), observed as (
               insert into observation (step_id, attempt_id, request_key, kind, body, outcome)
               select a.step_id, a.id, c.request_key, 'transport', $2, 'failed_before_effect'
               from attempt a join caught c on c.id = a.step_id
               where a.ended_at is null
           )
           select id as "id!" from caught"#,
        &expired,
        before,
    )
    .fetch_all(&mut *conn)
    .await?;
    let rows = sqlx::query!(
        r#"with expired as (
               select unnest(steps) as step_id, id as lease_id from lease where id = any($1)
           ), caught as (
               update step s set state = 'outcome_unknown', lease_holder = null, lease_id = null,
                                 run_after = now(), unknown_since = coalesce(s.unknown_since, now()),
                                 updated_at = now()
               from expired e where s.id = e.step_id and s.lease_id = e.lease_id and s.state = 'invoking'
               returning s.id, s.workflow_id, s.request_key
           ), observed as (
               -- An attempt that never reached the call sent nothing, whatever its step did.
               insert into observation (step_id, attempt_id, request_key, kind, body, outcome)
               select a.step_id, a.id, c.request_key, 'transport',
                      case when a.invoked_at is null then $2::jsonb else $3::jsonb end,
                      case when a.invoked_at is null then 'failed_before_effect'::attempt_outcome
                           else 'outcome_unknown'::attempt_outcome end
               from attempt a join caught c on c.id = a.step_id
               where a.ended_at is null
           ), released as (
               update step s set lease_holder = null, lease_id = null, updated_at = now()
               from expired e where s.id = e.step_id and s.lease_id = e.lease_id
                 and s.state not in ('running', 'invoking')
           )
           select id as "id!", workflow_id as "workflow_id!" from caught"#,
        &expired,
        before,
        during,
    )
    .fetch_all(&mut *conn)
    .await?;
    sqlx::query!(r#"delete from lease where id = any($1)"#, &expired)
        .execute(&mut *conn)
        .await?;
    Ok(Reclaimed {
        to_ready,
        to_recovery: rows.into_iter().map(|r| (r.id, r.workflow_id)).collect(),
    })
}
