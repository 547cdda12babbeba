//! Checkpoints 5 and 6 for many steps in one transaction (docs/DESIGN.md §4): the set-based
//! statements a worker's flush runs. [`lock_workflows`] takes the workflow rows in one global
//! order; [`settle`] writes each result (a receipt carrying the accepted observation, or the
//! observation that ends the attempt) and moves its step, only where the lease still holds;
//! [`release_dependants`] and [`announce`] then follow from what was settled.

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::domain::{AttemptOutcome, ReceiptMethod, StepState};

/// Locks the rows of `workflows` in id order, the one order every batch takes them in, so two
/// flushes never wait for each other in a circle. A statement of its own: the ones after it
/// start their snapshots once the locks are granted, and see whatever settled before.
/// Returns each workflow's revision as it stands before the caller's changes.
pub async fn lock_workflows(
    conn: &mut PgConnection,
    workflows: &[Uuid],
) -> sqlx::Result<Vec<(Uuid, i64)>> {
    let rows = sqlx::query!(
        r#"select id, revision from workflow where id = any($1) order by id for update"#,
        workflows
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.revision)).collect())
}

/// One result to settle.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Settling {
    pub step: Uuid,
    /// The lease it was claimed under: a step claimed again since is not this result's. None
    /// settles it under any lease this worker holds (a step recovered one at a time).
    pub lease: Option<Uuid>,
    /// The state the step must still be in under this worker's lease; none for any.
    pub expected: Option<StepState>,
    /// The attempt it ends (none for a pure step).
    pub attempt: Option<Uuid>,
    pub request_key: Option<String>,
    pub outcome: Option<AttemptOutcome>,
    pub observation: Option<Value>,
    /// An accepted reference: the receipt's, with its id, method, completion and summary.
    #[serde(flatten)]
    pub receipt: Option<NewBatchReceipt>,
    /// Where the step goes, and after how long it may be claimed again.
    pub next: StepState,
    pub delay_ms: i64,
    /// A pure step's output.
    pub output: Option<Value>,
}

/// The receipt of an accepted answer.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NewBatchReceipt {
    #[serde(rename = "receipt_id")]
    pub id: Uuid,
    pub external_reference: String,
    pub method: ReceiptMethod,
    pub completion_state: &'static str,
    pub summary: Value,
}

/// The one statement attempts settle by, many at a time or one (docs/DESIGN.md §4, C): every
/// result whose step this worker still holds under the same lease in its expected state gets a
/// receipt for an accepted reference (the step must have none yet), else the observation that
/// ends the attempt; then the step's new state, with its lease ended. Returns
/// the steps settled, with their workflow; a step not returned was left untouched (its lease
/// was lost, or it already holds a receipt: a duplicate for the one-at-a-time remainder).
pub async fn settle(
    conn: &mut PgConnection,
    holder: &str,
    results: &[Settling],
) -> sqlx::Result<Vec<(Uuid, Uuid)>> {
    let rows = sqlx::query!(
        r#"with r as (
               select * from jsonb_to_recordset($2) as t(step uuid, lease uuid, expected step_state,
                   attempt uuid, request_key text, outcome attempt_outcome, observation jsonb,
                   receipt_id uuid, external_reference text, method receipt_method,
                   completion_state text, summary jsonb, next step_state, delay_ms bigint, output jsonb)
           ), held as (
               select s.id, s.workflow_id, s.definition_version from step s join r on r.step = s.id
               where s.lease_holder = $1 and (r.lease is null or s.lease_id = r.lease)
                 and (r.expected is null or s.state = r.expected)
                 and (r.receipt_id is null or s.receipt_id is null)
               for update of s
           ), receipted as (
               insert into receipt (id, step_id, workflow_id, definition_version, input_digest,
                                    request_key, adapter, contract_version, external_reference,
                                    completion_state, method, observed_at, result_summary,
                                    attempt_id, observation)
               select r.receipt_id, h.id, h.workflow_id, h.definition_version, q.input_digest,
                      q.request_key, q.adapter, q.contract_version, r.external_reference,
                      r.completion_state, r.method, now(), r.summary, r.attempt, r.observation
               from r join held h on h.id = r.step join external_request q on q.request_key = r.request_key
               where r.receipt_id is not null
               returning id
           ), ended as (
               insert into observation (step_id, attempt_id, request_key, kind, body, outcome)
               select r.step, r.attempt, r.request_key, 'transport', r.observation, r.outcome
               from r join held h on h.id = r.step
               where r.attempt is not null and r.receipt_id is null
               on conflict (attempt_id) where outcome is not null do nothing
               returning attempt_id
           ), settled as (
               update step s set state = case when r.next = 'unsent' and exists (
                                             select 1 from attempt a where a.step_id = s.id
                                             and a.outcome in ('outcome_unknown', 'succeeded'))
                                           then 'review_required'::step_state else r.next end,
                      receipt_id = coalesce(r.receipt_id, s.receipt_id),
                      output = coalesce(r.output, s.output), lease_holder = null, lease_id = null,
                      run_after = now() + make_interval(secs => r.delay_ms / 1000.0),
                      unknown_since = case when r.next in ('outcome_unknown', 'review_required', 'unsent', 'rejected')
                                           then coalesce(s.unknown_since, now()) end,
                      updated_at = now()
               from r join held h on h.id = r.step
               where s.id = r.step
                 -- A set membership (hashed once), not a join: estimated at one row, the join
                 -- was planned as a nested loop over every receipt for every step.
                 and (r.receipt_id is null or r.receipt_id in (select x.id from receipted x))
                 and (r.attempt is null or r.receipt_id is not null
                      or exists (select 1 from ended e where e.attempt_id = r.attempt))
               returning s.id, s.workflow_id
           )
           select id as "step!", workflow_id as "workflow!" from settled"#,
        holder,
        serde_json::to_value(results).expect("results serialize"),
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.step, r.workflow)).collect())
}

/// [`super::step::release_dependants`] for many workflows whose rows the caller has locked.
pub async fn release_dependants(conn: &mut PgConnection, workflows: &[Uuid]) -> sqlx::Result<u64> {
    super::step::release_dependants_of(conn, workflows).await
}

/// One event a flush announces.
#[derive(Debug, Clone)]
pub struct Announcing {
    pub event_id: Uuid,
    pub workflow: Uuid,
    pub kind: &'static str,
    pub payload: Value,
}

/// Announces `events` and refreshes the state of every workflow they concern, in one statement:
/// each workflow whose derived state changed also gets a `workflow.state_changed` event (its id
/// from `spare_ids`, one per workflow), after its other events. The workflow's revision moves
/// by the number of its events, which carry the revisions in between in order, so revisions
/// stay gapless when a transaction announces several events of one workflow.
pub async fn announce(
    conn: &mut PgConnection,
    events: &[Announcing],
    workflows: &[Uuid],
    spare_ids: &[Uuid],
) -> sqlx::Result<()> {
    let ids: Vec<Uuid> = events.iter().map(|e| e.event_id).collect();
    let owners: Vec<Uuid> = events.iter().map(|e| e.workflow).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind).collect();
    let payloads: Vec<Value> = events.iter().map(|e| e.payload.clone()).collect();
    sqlx::query!(
        r#"with ev as (
               select * from unnest($1::uuid[], $2::uuid[], $3::text[], $4::jsonb[])
                   with ordinality as e(event_id, workflow_id, kind, payload, ord)
           ), derived as (
               select w.id, w.state as current, d.state as next
               from workflow w cross join lateral workflow_state_of(w.id) d
               where w.id = any($5)
           ), changes as (
               select x.event_id, d.id as workflow_id, 'workflow.state_changed' as kind,
                      jsonb_build_object('from', d.current, 'to', d.next) as payload,
                      9223372036854775807 as ord
               from derived d join unnest($5::uuid[], $6::uuid[]) as x(workflow_id, event_id)
                    on x.workflow_id = d.id
               where d.next <> d.current
           ), numbered as (
               select a.*, row_number() over (partition by a.workflow_id order by a.ord) as k,
                      count(*) over (partition by a.workflow_id) as n
               from (select event_id, workflow_id, kind, payload, ord from ev
                     union all select event_id, workflow_id, kind, payload, ord from changes) a
           ), bumped as (
               update workflow w set revision = w.revision + c.n, state = d.next, updated_at = now(),
                      settled_at = workflow_settled_at(d.next, w.settled_at)
               from (select workflow_id, max(n) as n from numbered group by workflow_id) c
                    join derived d on d.id = c.workflow_id
               where w.id = c.workflow_id
               returning w.id, w.revision
           )
           insert into outbox (event_id, workflow_id, revision, kind, payload)
           select n.event_id, n.workflow_id, b.revision - n.n + n.k, n.kind, n.payload
           from numbered n join bumped b on b.id = n.workflow_id"#,
        &ids,
        &owners,
        &kinds as &[&str],
        &payloads,
        workflows,
        spare_ids,
    )
    .execute(conn)
    .await?;
    Ok(())
}
