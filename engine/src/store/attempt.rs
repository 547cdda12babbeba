//! Attempts and their observations: one worker execution of a step, what the transport saw,
//! and the policy decision taken before the boundary (docs/DESIGN.md §3, §4).

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::guard::{GuardedError, LeaseLost, guard};
use crate::domain::{AttemptOutcome, TransportObservation};

/// Marks the unconsumed operator authorizations of `steps` used by the attempts about to be
/// recorded; returns (step, authorization) pairs.
pub async fn consume_authorizations(
    conn: &mut PgConnection,
    steps: &[Uuid],
) -> sqlx::Result<Vec<(Uuid, Uuid)>> {
    let rows = sqlx::query!(
        r#"update operator_authorization set consumed_at = now()
           where step_id = any($1) and consumed_at is null
           returning step_id, id"#,
        steps
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.step_id, r.id)).collect())
}

/// Records one open attempt per (step, attempt id, number), in one statement.
pub async fn insert_attempts(
    conn: &mut PgConnection,
    worker: &str,
    lease_secs: f64,
    steps: &[Uuid],
    attempts: &[Uuid],
    numbers: &[i32],
    authorizations: &[Option<Uuid>],
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into attempt (id, step_id, number, worker, lease_expires_at, authorization_id)
           select a, s, n, $1, now() + make_interval(secs => $2), z
           from unnest($3::uuid[], $4::uuid[], $5::int[], $6::uuid[]) as t(s, a, n, z)"#,
        worker,
        lease_secs,
        steps,
        attempts,
        numbers,
        authorizations as &[Option<Uuid>],
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Checkpoint 2's record: the authority decision taken just before the boundary.
pub async fn authority_check(
    conn: &mut PgConnection,
    step: Uuid,
    attempt: Uuid,
    adapter: &str,
    subject: &str,
) -> sqlx::Result<Option<String>> {
    let suspension = sqlx::query_scalar!(
        r#"select scope || ' ' || value || ' is suspended: ' || reason as "why!"
           from authority_suspension
           where (scope = 'adapter' and value = $1) or (scope = 'subject' and value = $2)
           order by scope limit 1"#,
        adapter,
        subject,
    )
    .fetch_optional(&mut *conn)
    .await?;
    let scope = serde_json::json!({ "adapter": adapter, "subject": subject, "action": "deliver" });
    let reason = suspension
        .clone()
        .unwrap_or_else(|| "no suspension applies".to_owned());
    sqlx::query!(
        r#"insert into authority_decision (step_id, attempt_id, granted, scope, reason)
           values ($1, $2, $3, $4, $5)"#,
        step,
        attempt,
        suspension.is_none(),
        scope,
        reason,
    )
    .execute(conn)
    .await?;
    Ok(suspension)
}

/// Checkpoint 5: ends the attempt with its outcome and observation (never touched again) and
/// appends the observation to the step's timeline.
pub async fn end_attempt(
    conn: &mut PgConnection,
    step: Uuid,
    attempt: Uuid,
    request_key: Option<&str>,
    observation: &TransportObservation,
) -> Result<(), GuardedError> {
    let body = serde_json::to_value(observation).expect("an observation serializes");
    // One round trip: the attempt ends and its observation joins the timeline, or neither.
    let rows = sqlx::query_scalar!(
        r#"with ended as (
               update attempt set ended_at = now(), outcome = $2, observation = $3
               where id = $1 and ended_at is null
               returning id
           ), observed as (
               insert into observation (step_id, attempt_id, request_key, kind, body)
               select $4, id, $5, 'transport', $3 from ended
           )
           select count(*) as "n!" from ended"#,
        attempt,
        observation.outcome() as AttemptOutcome,
        body,
        step,
        request_key,
    )
    .fetch_one(conn)
    .await?;
    // Someone else (the sweeper) ended it: this worker's view is stale.
    guard(u64::try_from(rows).unwrap_or(0), step)
}

/// Appends an observation (transport, lookup or compensation) to the step's timeline.
pub async fn record_observation(
    conn: &mut PgConnection,
    step: Uuid,
    attempt: Option<Uuid>,
    request_key: Option<&str>,
    kind: &str,
    body: &Value,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into observation (step_id, attempt_id, request_key, kind, body)
           values ($1, $2, $3, $4, $5)"#,
        step,
        attempt,
        request_key,
        kind,
        body,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// How long ago, by the database's clock, the last call under `key` could still have reached
/// the destination: measured from the later of the last attempt's end and the last send plus
/// the adapter's deadline (a destination may accept as late as that). Zero when it never ended.
/// A status index lags *acceptance*, so this, not the time of sending, is what a visibility
/// window is compared with.
pub async fn millis_since_last_call_ended(
    conn: &mut PgConnection,
    step: Uuid,
    key: &str,
    deadline_ms: i64,
    now: Option<DateTime<Utc>>,
) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"select coalesce(greatest(0, (extract(epoch from coalesce($4::timestamptz, now()) - greatest(
                      q.last_sent_at + make_interval(secs => $3::bigint / 1000.0),
                      (select max(a.ended_at) from attempt a where a.step_id = $1)
                  )) * 1000)::bigint), 0) as "millis!"
           from external_request q where q.request_key = $2"#,
        step,
        key,
        deadline_ms,
        // Named: with sqlx's `time` feature on (the server's sessions) it would infer `time`.
        now as Option<DateTime<Utc>>,
    )
    .fetch_optional(conn)
    .await
    .map(|m| m.unwrap_or(0))
}

/// The newest attempt of `step` that has not ended.
pub async fn open_attempt<'e, E>(executor: E, step: Uuid) -> sqlx::Result<Uuid>
where
    E: sqlx::PgExecutor<'e>,
{
    sqlx::query_scalar!(
        r#"select id from attempt where step_id = $1 and ended_at is null order by number desc limit 1"#,
        step
    )
    .fetch_one(executor)
    .await
}

/// Ends the open attempt of a pure step, which has no transport to observe.
pub async fn end_pure_attempt(conn: &mut PgConnection, attempt: Uuid) -> sqlx::Result<()> {
    sqlx::query!(
        r#"update attempt set ended_at = now(), outcome = 'succeeded' where id = $1 and ended_at is null"#,
        attempt
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Counts and records a new attempt for a step this worker holds in recovery; returns its number.
pub async fn begin_recovery_attempt(
    conn: &mut PgConnection,
    step: Uuid,
    worker: &str,
    attempt: Uuid,
    lease_secs: f64,
    authorization: Option<Uuid>,
) -> Result<i32, GuardedError> {
    let number = sqlx::query_scalar!(
        r#"update step set attempt_count = attempt_count + 1, updated_at = now()
           where id = $1 and lease_holder = $2 and state = 'outcome_unknown'
           returning attempt_count"#,
        step,
        worker,
    )
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(LeaseLost { step })?;
    insert_attempts(
        conn,
        worker,
        lease_secs,
        &[step],
        &[attempt],
        &[number],
        &[authorization],
    )
    .await?;
    Ok(number)
}
