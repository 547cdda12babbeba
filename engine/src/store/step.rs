//! Steps, attempts, request identities, observations and receipts: the SQL of the checkpoint
//! protocol. Every write after a lease is guarded by the lease holder and the expected state;
//! zero rows affected is reported as [`LeaseLost`], so a stale worker changes nothing.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{Executor, PgConnection, Postgres};
use uuid::Uuid;

use crate::definition::StepKind;
use crate::domain::{AttemptOutcome, StepState, TransportObservation};

/// A write after a lease touched no row: another worker (or the sweeper) owns the step now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("lease lost on step {step}")]
pub struct LeaseLost {
    pub step: Uuid,
}

/// Errors of a guarded write.
#[derive(Debug, thiserror::Error)]
pub enum GuardedError {
    #[error(transparent)]
    LeaseLost(#[from] LeaseLost),
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
}

fn guard(rows: u64, step: Uuid) -> Result<(), GuardedError> {
    if rows == 1 {
        Ok(())
    } else {
        Err(LeaseLost { step }.into())
    }
}

/// A step about to be inserted with its workflow.
#[derive(Debug, Clone)]
pub struct NewStep<'a> {
    pub workflow: Uuid,
    pub logical: &'a str,
    pub definition_version: i32,
    pub kind: StepKind,
    pub adapter: Option<&'a str>,
    pub state: StepState,
    pub depends_on: Vec<String>,
    pub required_fields: Vec<String>,
    pub accepts_waiver: bool,
}

/// Inserts a step; returns its id.
pub async fn insert(conn: &mut PgConnection, step: &NewStep<'_>) -> sqlx::Result<Uuid> {
    let id = Uuid::now_v7();
    sqlx::query!(
        r#"insert into step (id, workflow_id, logical, definition_version, kind, adapter, state,
                             depends_on, required_fields, accepts_waiver)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"#,
        id,
        step.workflow,
        step.logical,
        step.definition_version,
        step.kind as StepKind,
        step.adapter,
        step.state as StepState,
        &step.depends_on,
        &step.required_fields,
        step.accepts_waiver,
    )
    .execute(conn)
    .await?;
    Ok(id)
}

/// A step leased by a worker, with what it needs to run.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: Uuid,
    pub workflow_id: Uuid,
    pub logical: String,
    pub definition_version: i32,
    pub kind: StepKind,
    pub adapter: Option<String>,
    /// `Running` for a fresh attempt, `OutcomeUnknown` for a recovery.
    pub state: StepState,
    pub request_key: Option<String>,
    pub attempt_count: i32,
    pub unknown_since: Option<DateTime<Utc>>,
    /// The step's corrected input (a replacement's), else its workflow's.
    pub workflow_input: Value,
    /// For a compensation step: the external reference it asks the destination to withdraw.
    pub withdraws: Option<String>,
    /// The workflow had not started before this claim (its state must be refreshed).
    pub workflow_pending: bool,
    /// The attempt recorded with the claim, when it was a fresh one.
    pub attempt: Option<Uuid>,
}

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
           returning s.id, s.workflow_id, s.logical, s.definition_version,
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
           returning s.id, s.workflow_id, s.logical, s.definition_version,
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

/// Outputs and receipt fields of a workflow's succeeded steps, keyed by logical name:
/// `{"render": {...output}, "deliver": {"external_reference": …, "input_digest": …}}`.
pub async fn dependency_facts(conn: &mut PgConnection, workflow: Uuid) -> sqlx::Result<Value> {
    sqlx::query_scalar!(
        r#"select coalesce(jsonb_object_agg(s.logical,
                      coalesce(s.output, jsonb_build_object(
                          'external_reference', r.external_reference,
                          'input_digest', r.input_digest,
                          'request_key', r.request_key))), '{}') as "facts!"
           from step s left join receipt r on r.id = s.receipt_id
           where s.workflow_id = $1 and s.state = 'succeeded'"#,
        workflow
    )
    .fetch_one(conn)
    .await
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

/// The request identity to persist at checkpoint 3.
#[derive(Debug, Clone)]
pub struct RequestIdentity<'a> {
    pub key: &'a str,
    pub step: Uuid,
    pub digest: &'a str,
    pub summary: &'a Value,
    pub adapter: &'a str,
    pub contract_version: i32,
}

/// Persists the request identity unless it exists, and returns the digest bound to the key:
/// the caller compares it with the regenerated request's and refuses to send on a mismatch.
pub async fn bind_request(
    conn: &mut PgConnection,
    request: &RequestIdentity<'_>,
) -> sqlx::Result<String> {
    // First binding: one round trip. A key bound before (a resend) is read back instead.
    let inserted = sqlx::query_scalar!(
        r#"insert into external_request (request_key, step_id, input_digest, summary, adapter, contract_version, replaces_key)
           values ($1, $2, $3, $4, $5, $6,
                   (select o.request_key from step s join step o on o.id = s.replaces_step_id where s.id = $2))
           on conflict (request_key) do nothing
           returning input_digest"#,
        request.key,
        request.step,
        request.digest,
        request.summary,
        request.adapter,
        request.contract_version,
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(digest) = inserted {
        return Ok(digest);
    }
    sqlx::query_scalar!(
        r#"select input_digest from external_request where request_key = $1"#,
        request.key
    )
    .fetch_one(conn)
    .await
}

/// Checkpoint 3: the step is `invoking` under `key`, the attempt records when the call began.
pub async fn mark_invoking(
    conn: &mut PgConnection,
    step: Uuid,
    worker: &str,
    attempt: Uuid,
    key: &str,
) -> Result<(), GuardedError> {
    // One round trip: the step, its attempt and the request identity move together, and only
    // when the lease is still ours.
    let rows = sqlx::query_scalar!(
        r#"with invoking as (
               update step set state = 'invoking', request_key = $3, updated_at = now()
               where id = $1 and lease_holder = $2 and state in ('running', 'outcome_unknown')
               returning id
           ), began as (
               update attempt set invoked_at = now()
               where id = $4 and ended_at is null and exists (select 1 from invoking)
           ), sent as (
               update external_request set first_sent_at = coalesce(first_sent_at, now()), last_sent_at = now()
               where request_key = $3 and exists (select 1 from invoking)
           )
           select count(*) as "n!" from invoking"#,
        step,
        worker,
        key,
        attempt,
    )
    .fetch_one(conn)
    .await?;
    guard(u64::try_from(rows).unwrap_or(0), step)
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

/// Completes a pure step with its output, guarded by the lease.
pub async fn complete_pure(
    conn: &mut PgConnection,
    step: Uuid,
    worker: &str,
    output: &Value,
) -> Result<(), GuardedError> {
    let rows = sqlx::query!(
        r#"update step set state = 'succeeded', output = $3, lease_holder = null,
                           lease_expires_at = null, updated_at = now()
           where id = $1 and lease_holder = $2 and state = 'running'"#,
        step,
        worker,
        output,
    )
    .execute(conn)
    .await?
    .rows_affected();
    guard(rows, step)
}

/// A typed receipt about to be committed.
#[derive(Debug, Clone)]
pub struct NewReceipt<'a> {
    pub step: Uuid,
    pub request_key: &'a str,
    pub external_reference: &'a str,
    pub completion_state: &'a str,
    pub method: &'a str,
    pub result_summary: &'a Value,
    pub author: Option<&'a str>,
    pub evidence: Option<&'a str>,
    pub reason: Option<&'a str>,
}

/// What recording an accepted external reference did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiptOutcome {
    /// The receipt was committed and the step succeeded.
    Committed { receipt: Uuid },
    /// The step already had this very reference: nothing to do (a redelivery).
    AlreadyRecorded,
    /// The step already had another reference: a duplicate-effect incident holds both.
    Duplicate { incident: Uuid, existing: String },
}

/// Checkpoint 6: commits the receipt and marks the step succeeded, unless the step already
/// has a receipt — then the same reference is a no-op and another opens an incident.
/// `worker` guards the write when the caller holds a lease; `None` is for operator actions,
/// which lock the step row themselves.
pub async fn commit_receipt(
    conn: &mut PgConnection,
    worker: Option<&str>,
    receipt: &NewReceipt<'_>,
) -> Result<ReceiptOutcome, GuardedError> {
    let existing = sqlx::query!(
        r#"select r.external_reference from step s join receipt r on r.id = s.receipt_id
           where s.id = $1"#,
        receipt.step
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(existing) = existing {
        if existing.external_reference == receipt.external_reference {
            return Ok(ReceiptOutcome::AlreadyRecorded);
        }
        let incident = open_duplicate_incident(
            conn,
            receipt.step,
            &[
                (existing.external_reference.as_str(), None),
                (receipt.external_reference, Some(receipt.request_key)),
            ],
        )
        .await?;
        return Ok(ReceiptOutcome::Duplicate {
            incident,
            existing: existing.external_reference,
        });
    }
    let id = Uuid::now_v7();
    // One round trip: the receipt and the step that now points at it. A lost lease leaves no
    // row updated and the caller's transaction rolls the receipt back with it.
    let rows = sqlx::query_scalar!(
        r#"with locked as (
               -- The workflow row first, as every transaction that settles one of its steps
               -- takes it: the receipt's foreign key would otherwise share-lock it, and two steps
               -- finishing at once would each wait for the other's share lock to update it.
               select w.id from workflow w join step s on s.workflow_id = w.id
               where s.id = $10 for update of w
           ), receipted as (
               insert into receipt (id, step_id, workflow_id, definition_version, input_digest, request_key,
                                    adapter, contract_version, external_reference, completion_state, method,
                                    observed_at, result_summary, author, evidence, reason)
               select $1, s.id, s.workflow_id, s.definition_version, q.input_digest, q.request_key,
                      q.adapter, q.contract_version, $3, $4, $5::text::receipt_method, now(), $6, $7, $8, $9
               from step s join external_request q on q.request_key = $2 join locked on locked.id = s.workflow_id
               where s.id = $10
               returning id
           ), succeeded as (
               update step set state = 'succeeded', receipt_id = (select id from receipted), lease_holder = null,
                               lease_expires_at = null, unknown_since = null, updated_at = now()
               where id = $10 and ($11::text is null or lease_holder = $11)
                 and exists (select 1 from receipted)
               returning id
           )
           select count(*) as "n!" from succeeded"#,
        id,
        receipt.request_key,
        receipt.external_reference,
        receipt.completion_state,
        receipt.method,
        receipt.result_summary,
        receipt.author,
        receipt.evidence,
        receipt.reason,
        receipt.step,
        worker,
    )
    .fetch_one(conn)
    .await?;
    let rows = u64::try_from(rows).unwrap_or(0);
    guard(rows, receipt.step)?;
    Ok(ReceiptOutcome::Committed { receipt: id })
}

/// The step's open incident of `kind` (`duplicate_effect` or `digest_conflict`), opened now
/// (and announced as `incident.opened`) unless one is open already.
async fn open_incident(conn: &mut PgConnection, step: Uuid, kind: &str) -> sqlx::Result<Uuid> {
    let opened = sqlx::query!(
        r#"insert into integrity_incident (id, step_id, kind) values ($1, $2, $3::text::incident_kind)
           on conflict (step_id, kind) where resolved_at is null do nothing
           returning id"#,
        Uuid::now_v7(),
        step,
        kind,
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(opened) = opened {
        let s = sqlx::query!(
            r#"select workflow_id, logical, adapter from step where id = $1"#,
            step
        )
        .fetch_one(&mut *conn)
        .await?;
        super::workflow::announce(
            conn,
            s.workflow_id,
            "incident.opened",
            &serde_json::json!({
                "incident": opened.id, "step": step, "kind": kind,
                "logical": s.logical, "adapter": s.adapter,
            }),
        )
        .await?;
        return Ok(opened.id);
    }
    sqlx::query_scalar!(
        r#"select id from integrity_incident
           where step_id = $1 and kind = $2::text::incident_kind and resolved_at is null"#,
        step,
        kind,
    )
    .fetch_one(conn)
    .await
}

/// Opens (or extends) the step's open duplicate-effect incident with every reference given.
pub async fn open_duplicate_incident(
    conn: &mut PgConnection,
    step: Uuid,
    references: &[(&str, Option<&str>)],
) -> sqlx::Result<Uuid> {
    let incident = open_incident(conn, step, "duplicate_effect").await?;
    for (reference, key) in references {
        sqlx::query!(
            r#"insert into incident_reference (incident_id, external_reference, request_key)
               values ($1, $2, $3) on conflict do nothing"#,
            incident,
            reference,
            *key,
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(incident)
}

/// Where a step goes after an attempt that did not succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Back to `ready` after a pause (nothing was committed, or the rejection is retryable).
    RetryAfter { millis: i64 },
    /// `outcome_unknown`: automatic recovery looks again after the pause.
    Unknown { recheck_millis: i64 },
    /// `review_required`: a person decides.
    Review,
    /// `rejected` for good.
    Rejected,
}

/// Settles a step this worker holds (or, with `worker = None`, one the caller has locked) and
/// releases its lease.
pub async fn settle(
    conn: &mut PgConnection,
    step: Uuid,
    worker: Option<&str>,
    settle: Settle,
) -> Result<(), GuardedError> {
    let (state, millis) = match settle {
        Settle::RetryAfter { millis } => (StepState::Ready, millis),
        Settle::Unknown { recheck_millis } => (StepState::OutcomeUnknown, recheck_millis),
        Settle::Review => (StepState::ReviewRequired, 0),
        Settle::Rejected => (StepState::Rejected, 0),
    };
    let rows = sqlx::query!(
        r#"update step set state = $3, lease_holder = null, lease_expires_at = null,
                           run_after = now() + make_interval(secs => $4::bigint / 1000.0),
                           unknown_since = case when $3::step_state in ('outcome_unknown', 'review_required', 'rejected')
                                                then coalesce(unknown_since, now()) end,
                           updated_at = now()
           where id = $1 and ($2::text is null or lease_holder = $2)"#,
        step,
        worker,
        state as StepState,
        millis,
    )
    .execute(conn)
    .await?
    .rows_affected();
    guard(rows, step)
}

/// Moves blocked steps of `workflow` whose dependencies now hold what they need to `ready`. A
/// dependency with an open integrity incident holds nothing yet: which effect is canonical is
/// for a person to say. The workflow row is locked first, so steps finishing concurrently
/// cannot each miss the other's receipt.
pub async fn release_dependants(conn: &mut PgConnection, workflow: Uuid) -> sqlx::Result<u64> {
    sqlx::query!(
        r#"select id from workflow where id = $1 for update"#,
        workflow
    )
    .fetch_one(&mut *conn)
    .await?;
    // A separate statement: its snapshot starts after the lock was granted, so it sees the
    // receipt of a step that finished concurrently (one statement would have started earlier).
    Ok(sqlx::query!(
        // A step marked after a restore may have been sent by the live system since the backup:
        // it starts as outcome unknown, asked about (or reviewed) before anything is sent.
        r#"update step d set run_after = now(), updated_at = now(),
               state = case when d.restored_at is null then 'ready'::step_state
                            else 'outcome_unknown'::step_state end,
               unknown_since = case when d.restored_at is null then d.unknown_since else now() end
           where d.workflow_id = $1 and d.state = 'blocked'
             and not exists (
                 select 1 from unnest(d.depends_on) as dep(logical)
                 where not exists (
                     select 1 from step p
                     where p.workflow_id = d.workflow_id and p.logical = dep.logical
                       and (p.state = 'succeeded' or (p.state = 'waived' and d.accepts_waiver))
                       and not exists (select 1 from integrity_incident i
                                       where i.step_id = p.id and i.resolved_at is null)))"#,
        workflow
    )
    .execute(conn)
    .await?
    .rows_affected())
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
) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"select coalesce(greatest(0, (extract(epoch from now() - greatest(
                      q.last_sent_at + make_interval(secs => $3::bigint / 1000.0),
                      (select max(a.ended_at) from attempt a where a.step_id = $1)
                  )) * 1000)::bigint), 0) as "millis!"
           from external_request q where q.request_key = $2"#,
        step,
        key,
        deadline_ms,
    )
    .fetch_optional(conn)
    .await
    .map(|m| m.unwrap_or(0))
}

/// The adapter contract version a request was prepared under.
pub async fn request_contract_version(
    conn: &mut PgConnection,
    key: &str,
) -> sqlx::Result<Option<i32>> {
    sqlx::query_scalar!(
        r#"select contract_version from external_request where request_key = $1"#,
        key
    )
    .fetch_optional(conn)
    .await
}

/// The digest bound to `key` and its canonical summary.
pub async fn request_identity(
    conn: &mut PgConnection,
    key: &str,
) -> sqlx::Result<Option<(String, Value)>> {
    let row = sqlx::query!(
        r#"select input_digest, summary from external_request where request_key = $1"#,
        key
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| (r.input_digest, r.summary)))
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

/// Opens a digest-conflict incident: the destination holds the request key's reference
/// under another digest.
pub async fn open_digest_conflict(
    conn: &mut PgConnection,
    step: Uuid,
    external_reference: &str,
    request_key: &str,
    evidence: &Value,
) -> sqlx::Result<Uuid> {
    let incident = open_incident(conn, step, "digest_conflict").await?;
    sqlx::query!(
        r#"insert into incident_reference (incident_id, external_reference, request_key, evidence)
           values ($1, $2, $3, $4) on conflict do nothing"#,
        incident,
        external_reference,
        request_key,
        evidence,
    )
    .execute(conn)
    .await?;
    Ok(incident)
}

/// An explicit replacement of `original`: a new step (next generation, the newest definition
/// version, a new request key linked to the old one) that the worker runs like any other. The
/// original keeps its history and state; the workflow no longer waits for it.
pub async fn insert_replacement(
    conn: &mut PgConnection,
    original: Uuid,
    definition_version: i32,
    request_key: &str,
) -> sqlx::Result<Uuid> {
    let id = Uuid::now_v7();
    sqlx::query!(
        r#"insert into step (id, workflow_id, logical, definition_version, generation, kind, adapter, state,
                             depends_on, required_fields, accepts_waiver, request_key, replaces_step_id)
           select $1, o.workflow_id, o.logical, $3,
                  (select max(generation) + 1 from step g where g.workflow_id = o.workflow_id and g.logical = o.logical),
                  o.kind, o.adapter, 'ready', o.depends_on, o.required_fields, o.accepts_waiver, $4, o.id
           from step o where o.id = $2"#,
        id,
        original,
        definition_version,
        request_key,
    )
    .execute(conn)
    .await?;
    Ok(id)
}

/// The step row locked for an operator action: its state, kind, request key and generation.
pub async fn lock_for_action(
    conn: &mut PgConnection,
    step: Uuid,
) -> sqlx::Result<Option<(Uuid, StepState, StepKind, Option<String>, String, i32)>> {
    let row = sqlx::query!(
        r#"select workflow_id, state as "state: StepState", kind as "kind: StepKind", request_key, logical, definition_version
           from step where id = $1 for update"#,
        step
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| {
        (
            r.workflow_id,
            r.state,
            r.kind,
            r.request_key,
            r.logical,
            r.definition_version,
        )
    }))
}
