//! The `step` row: one logical step of a workflow, its state and what it waits for. Every
//! write after a lease is guarded by the holder and the expected state (see [`super::lease`]).

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::guard::{GuardedError, guard};
use crate::domain::StepKind;
use crate::domain::{RequestKey, StepKey, StepState};

/// A step about to be inserted with its workflow.
#[derive(Debug, Clone)]
pub struct NewStep<'a> {
    pub id: Uuid,
    pub workflow: Uuid,
    pub logical: &'a str,
    pub definition_version: i32,
    pub kind: StepKind,
    pub adapter: Option<&'a str>,
    pub state: StepState,
    pub depends_on: Vec<String>,
    pub required_fields: Vec<String>,
    pub accepts_waiver: bool,
    /// A pure step settled at admission: its output (its state is then `succeeded`).
    pub output: Option<Value>,
}

/// Inserts the steps of a new workflow in one statement. An external step gets its request
/// key now: it is derived, never random, and setting it later would change an indexed column
/// on the happy path (docs/DESIGN.md §4).
pub async fn insert_all(conn: &mut PgConnection, steps: &[NewStep<'_>]) -> sqlx::Result<()> {
    let rows: Vec<Value> = steps
        .iter()
        .map(|s| {
            let key = (s.kind != StepKind::Pure).then(|| {
                RequestKey::derive(s.workflow, &StepKey::new(s.logical, s.definition_version))
                    .as_str()
                    .to_owned()
            });
            serde_json::json!({
                "id": s.id, "workflow_id": s.workflow, "logical": s.logical,
                "definition_version": s.definition_version, "kind": s.kind, "adapter": s.adapter,
                "state": s.state, "depends_on": s.depends_on, "required_fields": s.required_fields,
                "accepts_waiver": s.accepts_waiver, "request_key": key, "output": s.output,
            })
        })
        .collect();
    sqlx::query!(
        r#"insert into step (id, workflow_id, logical, definition_version, kind, adapter, state,
                             depends_on, required_fields, accepts_waiver, request_key, output, attempt_count)
           select t.id, t.workflow_id, t.logical, t.definition_version, t.kind, t.adapter, t.state,
                  array(select jsonb_array_elements_text(t.depends_on)),
                  array(select jsonb_array_elements_text(t.required_fields)),
                  t.accepts_waiver, t.request_key, t.output,
                  -- A pure step settled at admission has run once, as a worker's run counts.
                  case when t.output is null then 0 else 1 end
           from jsonb_to_recordset($1) as t(id uuid, workflow_id uuid, logical text,
                definition_version int, kind step_kind, adapter text, state step_state,
                depends_on jsonb, required_fields jsonb, accepts_waiver bool, request_key text,
                output jsonb)"#,
        Value::Array(rows),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A step leased by a worker, with what it needs to run.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: Uuid,
    pub workflow_id: Uuid,
    pub logical: String,
    pub definition_name: String,
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

/// Reads one step in the shape the worker runs it, without leasing it: what regenerating its
/// request needs, for a caller that holds the step row locked.
pub async fn read_claimed(conn: &mut PgConnection, step: Uuid) -> sqlx::Result<Option<Claimed>> {
    sqlx::query_as!(
        Claimed,
        r#"select s.id, s.workflow_id, s.logical, w.definition_name, s.definition_version,
                  s.kind as "kind: StepKind", s.adapter,
                  s.state as "state: StepState", s.request_key, s.attempt_count,
                  s.unknown_since as "unknown_since: _",
                  coalesce(s.input, w.input) as "workflow_input!",
                  (select c.external_reference from compensation_link c
                    where c.compensation_step_id = s.id) as withdraws,
                  w.state = 'pending' as "workflow_pending!", null::uuid as attempt
           from step s join workflow w on w.id = s.workflow_id
           where s.id = $1"#,
        step,
    )
    .fetch_optional(conn)
    .await
}

/// Outputs and receipt fields of a workflow's succeeded steps, keyed by logical name (an
/// external step's typed receipt fields, when its adapter's rule read any, beside its
/// reference, digest and key):
/// `{"render": {...output}, "deliver": {"external_reference": …, "input_digest": …}}`.
pub async fn dependency_facts(conn: &mut PgConnection, workflow: Uuid) -> sqlx::Result<Value> {
    sqlx::query_scalar!(
        r#"select coalesce(jsonb_object_agg(s.logical,
                      coalesce(s.output, coalesce(r.result_summary -> 'fields', '{}') || jsonb_build_object(
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

/// Where a step goes after an attempt that did not succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Back to `ready` after a pause (nothing was committed, or the rejection is retryable).
    RetryAfter { millis: i64 },
    /// `outcome_unknown`: automatic recovery looks again after the pause.
    Unknown { recheck_millis: i64 },
    /// `review_required`: a person decides.
    Review,
    /// `unsent`: every attempt failed before any effect and none follows on its own; a person
    /// decides. Where an earlier attempt of the step may have had an effect it is
    /// `review_required` instead (the database decides, from the step's attempts).
    Unsent,
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
        Settle::Unsent => (StepState::Unsent, 0),
        Settle::Rejected => (StepState::Rejected, 0),
    };
    let rows = sqlx::query!(
        r#"update step s set state = case when $3::step_state = 'unsent' and exists (
                                   select 1 from attempt a where a.step_id = s.id
                                   and a.outcome in ('outcome_unknown', 'succeeded'))
                                 then 'review_required'::step_state else $3::step_state end,
                           lease_holder = null, lease_id = null,
                           run_after = now() + make_interval(secs => $4::bigint / 1000.0),
                           unknown_since = case when $3::step_state in ('outcome_unknown', 'review_required', 'unsent', 'rejected')
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
    release_dependants_of(conn, &[workflow]).await
}

/// Moves the blocked steps of `workflows` whose dependencies now hold what they need to
/// `ready`; the caller has locked the workflow rows (see [`release_dependants`]).
pub async fn release_dependants_of(
    conn: &mut PgConnection,
    workflows: &[Uuid],
) -> sqlx::Result<u64> {
    Ok(sqlx::query!(
        // A step marked after a restore may have been sent by the live system since the backup:
        // it starts as outcome unknown, asked about (or reviewed) before anything is sent.
        r#"update step d set run_after = now(), updated_at = now(),
               state = case when d.restored_at is null then 'ready'::step_state
                            else 'outcome_unknown'::step_state end,
               unknown_since = case when d.restored_at is null then d.unknown_since else now() end
           where d.workflow_id = any($1) and d.state = 'blocked'
             and not exists (
                 select 1 from unnest(d.depends_on) as dep(logical)
                 where not exists (
                     select 1 from step p
                     where p.workflow_id = d.workflow_id and p.logical = dep.logical
                       and (p.state = 'succeeded' or (p.state = 'waived' and d.accepts_waiver))
                       and not exists (select 1 from integrity_incident i
                                       where i.step_id = p.id and i.resolved_at is null)))"#,
        workflows
    )
    .execute(conn)
    .await?
    .rows_affected())
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

/// The oldest external step of `workflow` that is not final and not in `skip`, if any.
pub async fn next_unsettled_external(
    pool: &sqlx::PgPool,
    workflow: Uuid,
    skip: &[Uuid],
) -> sqlx::Result<Option<Uuid>> {
    sqlx::query_scalar!(
        r#"select id from step
           where workflow_id = $1 and kind <> 'pure' and id <> all($2)
             and state not in ('succeeded', 'waived', 'rejected', 'cancelled')
           order by created_at, id
           limit 1"#,
        workflow,
        skip,
    )
    .fetch_optional(pool)
    .await
}

/// Whether workflow `id` exists.
pub async fn workflow_exists(pool: &sqlx::PgPool, id: Uuid) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"select exists (select 1 from workflow where id = $1) as "exists!""#,
        id
    )
    .fetch_one(pool)
    .await
}

/// The adapters the steps of `workflow` call, each once.
pub async fn adapters_of_workflow(
    conn: &mut PgConnection,
    workflow: Uuid,
) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar!(
        r#"select distinct adapter as "adapter!" from step
           where workflow_id = $1 and adapter is not null"#,
        workflow
    )
    .fetch_all(conn)
    .await
}
