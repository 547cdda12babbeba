//! Checkpoints 1–3 for a whole batch (docs/DESIGN.md §4): the set-based statements a worker's
//! claim transaction runs. [`claim_due`] locks due steps and reads what rendering their
//! requests needs; the worker renders them; [`take`] then leases the batch, binds each request
//! identity and records the attempts of the steps that go to the call at once; [`invoke`] is
//! checkpoint 3 for the steps that wait for the moment before their send.

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::step::Claimed;
use crate::domain::StepKind;
use crate::domain::StepState;

/// A due step, locked for this transaction, with its dependencies' facts.
pub struct Due {
    pub step: Claimed,
    /// What its request may read of its dependencies (`store::step::dependency_facts`).
    pub facts: Value,
    /// What its adapter allows now; `None` for a pure step.
    pub adapter: Option<Gate>,
    /// An operator paused its workflow: it does not start.
    pub paused: bool,
}

/// What a step's adapter allows when the step is claimed (docs/DESIGN.md §5, §20).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gate {
    /// The adapter's current version.
    pub version: i32,
    /// It may send a new request: its current version passed verification and no operator
    /// holds it.
    pub may_send: bool,
    /// An operator's hold keeps its lookups too.
    pub lookups_held: bool,
    /// An approver's override of the limits its file declares.
    pub limits: crate::domain::Limits,
}

/// Locks up to `limit` due steps (ready, or outcome unknown and due for recovery) whose lease
/// is free, oldest due first, skipping steps another transaction holds; reads each with its
/// workflow's input and its dependencies' facts. Nothing is written: [`take`] does that once
/// the requests are rendered.
pub async fn claim_due(conn: &mut PgConnection, limit: i64) -> sqlx::Result<Vec<Due>> {
    let rows = sqlx::query!(
        r#"select s.id, s.workflow_id, s.logical, w.definition_name, s.definition_version,
                  s.kind as "kind: StepKind", s.adapter,
                  s.state as "state: StepState", s.request_key, s.attempt_count,
                  s.unknown_since as "unknown_since: chrono::DateTime<chrono::Utc>",
                  coalesce(s.input, w.input) as "workflow_input!",
                  (select c.external_reference from compensation_link c
                    where c.compensation_step_id = s.id) as withdraws,
                  w.state = 'pending' as "workflow_pending!",
                  w.paused_at is not null as "paused!",
                  (select coalesce(jsonb_object_agg(p.logical,
                              coalesce(p.output, coalesce(r.result_summary -> 'fields', '{}') || jsonb_build_object(
                                  'external_reference', r.external_reference,
                                  'input_digest', r.input_digest,
                                  'request_key', r.request_key))), '{}')
                   from step p left join receipt r on r.id = p.receipt_id
                   where p.workflow_id = s.workflow_id and p.state = 'succeeded'
                     and s.state = 'ready') as "facts!",
                  a.contract_version as "adapter_version?",
                  coalesce(a.verified_version = a.contract_version and a.held_at is null, false) as "may_send!",
                  coalesce(a.held_at is not null and a.hold_lookups, false) as "lookups_held!",
                  a.limit_requests_per_second as "limit_rps?", a.limit_in_flight as "limit_in_flight?"
           from step_ready q
           -- One primary-key probe per queue row, in queue order, until the batch is full: the
           -- fence (`offset 0`) keeps the planner from hash-joining the queue against every
           -- step row, a plan its statistics favour while the queue churns (docs/DESIGN.md §4).
           cross join lateral (
               select s.* from step s
               where s.id = q.step_id and s.state in ('ready', 'outcome_unknown')
                 and not exists (select 1 from lease l where l.id = s.lease_id and l.expires_at > now())
               offset 0
           ) s
           join workflow w on w.id = s.workflow_id
           left join adapter a on a.name = s.adapter
           where q.run_after <= now()
           order by q.run_after
           limit $1
           for update of s skip locked"#,
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Due {
            step: Claimed {
                id: r.id,
                workflow_id: r.workflow_id,
                logical: r.logical,
                definition_name: r.definition_name,
                definition_version: r.definition_version,
                kind: r.kind,
                adapter: r.adapter,
                state: r.state,
                request_key: r.request_key,
                attempt_count: r.attempt_count,
                unknown_since: r.unknown_since,
                workflow_input: r.workflow_input,
                withdraws: r.withdraws,
                workflow_pending: r.workflow_pending,
                attempt: None,
            },
            facts: r.facts,
            adapter: r.adapter_version.map(|version| Gate {
                version,
                may_send: r.may_send,
                lookups_held: r.lookups_held,
                limits: crate::domain::Limits {
                    requests_per_second: r.limit_rps,
                    in_flight: r.limit_in_flight.map(|n| n as u32),
                },
            }),
            paused: r.paused,
        })
        .collect())
}

/// Puts claimed steps off without taking them, each for its number of seconds: a step this
/// worker cannot send now (its adapter's file does not build here) waits in the queue for a
/// worker that can; a step its adapter's limits keep back waits for its turn.
pub async fn postpone(conn: &mut PgConnection, steps: &[Uuid], secs: &[f64]) -> sqlx::Result<()> {
    sqlx::query!(
        r#"update step s set run_after = now() + make_interval(secs => p.secs), updated_at = now()
           from unnest($1::uuid[], $2::float8[]) as p(id, secs)
           where s.id = p.id and s.lease_holder is null"#,
        steps,
        secs,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// How one locked step is taken into the batch.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Taking {
    pub step: Uuid,
    /// The attempt this claim makes, for a step about to be sent (none for a pure step or a
    /// recovery).
    pub attempt: Option<Uuid>,
    /// The request identity to bind: key, request digest, canonical summary, adapter and the
    /// contract version it is prepared under.
    pub key: Option<String>,
    pub digest: Option<String>,
    pub summary: Option<Value>,
    pub adapter: Option<String>,
    pub contract_version: Option<i32>,
    /// The call may go at once after this commit (checkpoint 3 now); else it waits for
    /// [`invoke`], just before the send.
    pub invoke_now: bool,
    /// The authority decision (`{granted, reason, scope}`).
    pub authority: Option<Value>,
}

/// What became of one step taken into the batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Taken {
    pub step: Uuid,
    /// `invoking` (the call may go), `running` (pure, waiting for [`invoke`], or to be
    /// concluded without a call), or `outcome_unknown` (a recovery).
    pub state: StepState,
    pub attempt_count: i32,
    /// The request regenerated now is the one bound to its key (always, for a first binding).
    pub same_request: bool,
    pub granted: bool,
    /// The digest bound to the key before this claim, if one was.
    pub bound_digest: Option<String>,
}

/// Leases the locked steps `taking` to `holder` under lease `lease` (one row for the batch;
/// leased, they leave the claim queue by its trigger), binds each request identity that is not
/// bound yet, and records the attempts that begin now: those whose call goes at once
/// (checkpoint 3), and those concluded without a call (authority denied, a regenerated request
/// that differs from the bound one). Every write is driven by the guarded update's rows.
pub async fn take(
    conn: &mut PgConnection,
    lease: Uuid,
    holder: &str,
    lease_secs: f64,
    taking: &[Taking],
) -> sqlx::Result<Vec<Taken>> {
    sqlx::query_as!(
        Taken,
        r#"with i as (
               select * from jsonb_to_recordset($3) as t(step uuid, attempt uuid, key text, digest text,
                   summary jsonb, adapter text, contract_version int, invoke_now bool, authority jsonb)
           ), leased as (
               insert into lease (id, holder, expires_at, steps)
               select $1, $2, now() + make_interval(secs => $4), array_agg(step) from i
           ), judged as (
               select i.*, e.input_digest as bound, e.request_key is not null as existed,
                      coalesce((i.authority ->> 'granted')::bool, true) as granted,
                      (e.input_digest is null or e.input_digest = i.digest) as same
               from i left join external_request e on e.request_key = i.key
           ), starting as (
               -- The attempts that begin now: sent at once, or concluded without a call.
               select j.*, (j.invoke_now and j.same and j.granted) as invoked from judged j
               where j.attempt is not null and (j.invoke_now or not j.same or not j.granted)
           ), bound as (
               insert into external_request (request_key, step_id, input_digest, summary, adapter,
                                             contract_version, replaces_key, first_sent_at, last_sent_at)
               select j.key, j.step, j.digest, j.summary, j.adapter, j.contract_version,
                      (select o.request_key from step s join step o on o.id = s.replaces_step_id where s.id = j.step),
                      case when j.invoke_now then now() end, case when j.invoke_now then now() end
               from judged j where j.digest is not null and not j.existed and j.granted
               on conflict (request_key) do nothing
           ), resent as (
               update external_request e set first_sent_at = coalesce(e.first_sent_at, now()), last_sent_at = now()
               from starting s where e.request_key = s.key and s.existed and s.invoked
           ), taken as (
               update step s set lease_holder = $2, lease_id = $1, updated_at = now(),
                      state = case when s.state = 'outcome_unknown' then s.state
                                   when x.invoked then 'invoking'::step_state else 'running'::step_state end,
                      request_key = coalesce(j.key, s.request_key),
                      -- A pure step runs once in the claim's worker and records no attempt.
                      attempt_count = s.attempt_count + case when s.kind = 'pure' or x.step is not null then 1 else 0 end
               from judged j left join starting x on x.step = j.step where s.id = j.step
               returning s.id, s.state, s.attempt_count
           ), consumed as (
               update operator_authorization a set consumed_at = now()
               from starting x where a.step_id = x.step and a.consumed_at is null
               returning a.step_id, a.id
           ), recorded as (
               insert into attempt_start (id, step_id, number, worker, started_at, invoked_at,
                                          authorization_id, request_key, request_digest, authority)
               select x.attempt, x.step, t.attempt_count, $2, clock_timestamp(),
                      case when x.invoked then clock_timestamp() end,
                      (select (array_agg(c.id order by c.id))[1] from consumed c where c.step_id = x.step),
                      x.key, x.digest, x.authority
               from starting x join taken t on t.id = x.step
           )
           select t.id as "step!", t.state as "state!: StepState", t.attempt_count as "attempt_count!",
                  j.same as "same_request!", j.granted as "granted!", j.bound as "bound_digest?"
           from taken t join judged j on j.step = t.id"#,
        lease,
        holder,
        serde_json::to_value(taking).expect("a batch serializes"),
        lease_secs,
    )
    .fetch_all(conn)
    .await
}

/// Checkpoint 3 for steps of a batch that waited for the moment before their send (their
/// contract makes a claim that was never sent unsafe to treat as sent): each held `running`
/// step becomes `invoking`, its request is marked sent and its attempt recorded, carrying any
/// operator authorization it consumes. Returns the steps that may be sent now.
pub async fn invoke(
    conn: &mut PgConnection,
    holder: &str,
    steps: &[Uuid],
    attempts: &[Uuid],
    authority: &[Value],
) -> sqlx::Result<Vec<(Uuid, i32)>> {
    let rows = sqlx::query!(
        r#"with i as (
               select * from unnest($2::uuid[], $3::uuid[], $4::jsonb[]) as t(step, attempt, authority)
           ), counted as (
               update step s set state = 'invoking', attempt_count = s.attempt_count + 1, updated_at = now()
               from i where s.id = i.step and s.lease_holder = $1 and s.state = 'running'
                 -- Held or paused since the claim: not sent (docs/DESIGN.md §20).
                 and not exists (select 1 from adapter a where a.name = s.adapter and a.held_at is not null)
                 and not exists (select 1 from workflow w where w.id = s.workflow_id and w.paused_at is not null)
               returning s.id, s.attempt_count, s.request_key
           ), sent as (
               update external_request e set first_sent_at = coalesce(e.first_sent_at, now()), last_sent_at = now()
               from counted c where e.request_key = c.request_key
               returning e.request_key, e.input_digest
           ), consumed as (
               update operator_authorization a set consumed_at = now()
               from counted c where a.step_id = c.id and a.consumed_at is null
               returning a.step_id, a.id
           ), recorded as (
               insert into attempt_start (id, step_id, number, worker, started_at, invoked_at,
                                          authorization_id, request_key, request_digest, authority)
               select i.attempt, c.id, c.attempt_count, $1, clock_timestamp(), clock_timestamp(),
                      (select (array_agg(x.id order by x.id))[1] from consumed x where x.step_id = c.id),
                      c.request_key, (select s.input_digest from sent s where s.request_key = c.request_key),
                      i.authority
               from counted c join i on i.step = c.id
           )
           select id as "id!", attempt_count as "attempt_count!" from counted"#,
        holder,
        steps,
        attempts,
        authority,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.attempt_count)).collect())
}

/// Drops the leases of batches whose every step has been concluded. A lease one of whose steps
/// still holds it stays (a step whose pass stopped, a conclusion that did not commit): it is no
/// longer renewed, so it expires and the sweeper, which finds steps only through their lease,
/// takes that step over.
pub async fn drop_leases(
    conn: &mut PgConnection,
    holder: &str,
    leases: &[Uuid],
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"delete from lease l where l.id = any($1) and l.holder = $2
           and not exists (select 1 from step s where s.id = any(l.steps) and s.lease_id = l.id)"#,
        leases,
        holder
    )
    .execute(conn)
    .await?;
    Ok(())
}
