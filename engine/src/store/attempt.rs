//! Attempts and their observations: one worker execution of a step, what the transport saw,
//! and the policy decision taken before the boundary (docs/DESIGN.md §3, §4).

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::guard::{GuardedError, LeaseLost, guard};
use crate::domain::{
    AttemptOutcome, Authority, ObservationKind, Suspension, SuspensionScope, TransportObservation,
};

/// Checkpoint 2: the authority decision taken just before the boundary, from the suspensions
/// in force now. It is recorded with the attempt it was taken for ([`record`]); no credential
/// is involved.
pub async fn authority_check(
    conn: &mut PgConnection,
    adapter: &str,
    subject: &str,
) -> sqlx::Result<Authority> {
    let suspensions = suspensions(conn).await?;
    Ok(Authority::decide(&suspensions, adapter, subject))
}

/// Every authority suspension in force.
pub async fn suspensions(conn: &mut PgConnection) -> sqlx::Result<Vec<Suspension>> {
    sqlx::query_as!(
        Suspension,
        r#"select scope as "scope: SuspensionScope", value, reason
           from authority_suspension order by scope, value"#
    )
    .fetch_all(conn)
    .await
}

/// An attempt about to be recorded: append-only, with the request identity and the authority
/// decision it was made under.
#[derive(Debug, Clone)]
pub struct NewAttempt<'a> {
    pub id: Uuid,
    pub step: Uuid,
    pub worker: &'a str,
    pub request_key: &'a str,
    pub request_digest: Option<&'a str>,
    pub authority: &'a Value,
}

/// Records attempt `attempt` of a step this worker holds (`running` or in recovery), counting
/// it on the step. With `invoked`, this is checkpoint 3: the step becomes `invoking` under the
/// request key, the attempt says when the call began, and the bound request when it was sent.
/// Without, the attempt never reaches the call (authority denied, request diverged).
pub async fn record(
    conn: &mut PgConnection,
    attempt: &NewAttempt<'_>,
    invoked: bool,
) -> Result<i32, GuardedError> {
    sqlx::query_scalar!(
        r#"with counted as (
               update step set attempt_count = attempt_count + 1, updated_at = now(),
                      state = case when $7 then 'invoking'::step_state else state end,
                      request_key = case when $7 then $4 else request_key end
               where id = $2 and lease_holder = $3 and state in ('running', 'outcome_unknown')
               returning attempt_count
           ), recorded as (
               insert into attempt_start (id, step_id, number, worker, started_at, invoked_at,
                                          request_key, request_digest, authority)
               select $1, $2, attempt_count, $3, clock_timestamp(), case when $7 then clock_timestamp() end,
                      $4, $5, $6
               from counted
           ), sent as (
               update external_request set first_sent_at = coalesce(first_sent_at, now()), last_sent_at = now()
               where $7 and request_key = $4 and exists (select 1 from counted)
           )
           select attempt_count from counted"#,
        attempt.id,
        attempt.step,
        attempt.worker,
        attempt.request_key,
        attempt.request_digest,
        attempt.authority,
        invoked,
    )
    .fetch_optional(conn)
    .await?
    .ok_or(LeaseLost { step: attempt.step }.into())
}

/// Checkpoint 5: ends the attempt with its outcome, by appending the observation that names
/// it to the step's timeline. An attempt ends once: if it has ended already (the sweeper ended
/// it), this worker's view is stale.
pub async fn end_attempt(
    conn: &mut PgConnection,
    step: Uuid,
    attempt: Uuid,
    request_key: Option<&str>,
    observation: &TransportObservation,
) -> Result<(), GuardedError> {
    let body = serde_json::to_value(observation).expect("an observation serializes");
    let rows = sqlx::query!(
        r#"insert into observation (step_id, attempt_id, request_key, kind, body, outcome)
           select $1, $2, $3, 'transport', $4, $5
           where not exists (select 1 from receipt where attempt_id = $2)
           on conflict (attempt_id) where outcome is not null do nothing"#,
        step,
        attempt,
        request_key,
        body,
        observation.outcome() as AttemptOutcome,
    )
    .execute(conn)
    .await?
    .rows_affected();
    guard(rows, step)
}

/// Appends an observation (transport, lookup or compensation) to the step's timeline.
pub async fn record_observation(
    conn: &mut PgConnection,
    step: Uuid,
    attempt: Option<Uuid>,
    request_key: Option<&str>,
    kind: ObservationKind,
    body: &Value,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into observation (step_id, attempt_id, request_key, kind, body)
           values ($1, $2, $3, $4, $5)"#,
        step,
        attempt,
        request_key,
        kind as ObservationKind,
        body,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// How long ago, by the database's clock, the last call under `key` could still have reached
/// the destination: measured from the later of the last attempt's end and the last send plus
/// the adapter's deadline (a destination may accept as late as that); negative while that moment
/// is still ahead (a lookup inside the deadline). Zero when nothing was sent under the key.
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
        r#"select coalesce((extract(epoch from coalesce($4::timestamptz, now()) - greatest(
                      q.last_sent_at + make_interval(secs => $3::bigint / 1000.0),
                      (select max(a.ended_at) from attempt a where a.step_id = $1)
                  )) * 1000)::bigint, 0) as "millis!"
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
