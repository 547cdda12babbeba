//! The semantic invariants of docs/DESIGN.md §11 as one query over durable state, and the
//! record of each violation found.

use serde_json::Value;
use sqlx::{Executor, Postgres};

/// Every violation that holds now: (kind, subject, evidence).
pub async fn current_violations<'e, E>(executor: E) -> sqlx::Result<Vec<(String, String, Value)>>
where
    E: Executor<'e, Database = Postgres>,
{
    let rows = sqlx::query!(
        r#"
        select 'one_effect_step_with_several_references' as "kind!", s.id::text as "subject!",
               jsonb_build_object('references', array_agg(distinct refs.reference)) as "evidence!"
        from step s
        join lateral (
            select r.external_reference as reference from receipt r where r.step_id = s.id
            union
            select ir.external_reference from integrity_incident i
            join incident_reference ir on ir.incident_id = i.id
            where i.step_id = s.id and i.kind = 'duplicate_effect'
        ) refs on true
        -- Only a duplicate-effect incident can add a second reference (a step has one receipt
        -- at most): start from those, not from every step (docs/DESIGN.md §11).
        where s.kind <> 'pure'
          and s.id in (select i.step_id from integrity_incident i where i.kind = 'duplicate_effect')
        group by s.id
        having count(distinct refs.reference) > 1

        union all
        select 'succeeded_step_without_receipt', s.id::text,
               jsonb_build_object('workflow', s.workflow_id, 'logical', s.logical)
        from step s
        where s.state = 'succeeded' and s.kind <> 'pure'
          and not exists (select 1 from receipt r where r.step_id = s.id)

        union all
        select 'dependant_started_before_required_receipt', d.id::text,
               jsonb_build_object('dependency', p.id, 'attempt_started', a.first_started,
                                  'dependency_settled', coalesce(r.created_at, w.created_at))
        -- Each step's first attempt once, then its dependencies: a step has one receipt and
        -- one waiver at most, so nothing else needs grouping (docs/DESIGN.md §11).
        from (select step_id, min(started_at) as first_started from attempt_start group by step_id) a
        join step d on d.id = a.step_id
        join step p on p.workflow_id = d.workflow_id and p.logical = any(d.depends_on)
        left join receipt r on r.step_id = p.id
        left join waiver w on w.step_id = p.id and d.accepts_waiver
        where p.kind <> 'pure'
          and not exists (select 1 from step r where r.replaces_step_id = p.id)
          and (coalesce(r.created_at, w.created_at) is null
               or a.first_started < coalesce(r.created_at, w.created_at))

        union all
        select 'opaque_retry_without_authorization', later.step_id::text,
               jsonb_build_object('attempt', later.id, 'number', later.number, 'after_unknown_attempt', earlier.id)
        from attempt later
        join step s on s.id = later.step_id
        join adapter ad on ad.name = s.adapter
        join attempt earlier on earlier.step_id = later.step_id and earlier.number < later.number
             and earlier.outcome = 'outcome_unknown'
        -- What the file declares: a claim refuted later did not make earlier retries wrong.
        where later.authorization_id is null
          and ad.declared ->> 'accepts_idempotency_key' = 'false'
          and ad.declared ->> 'query_by_client_reference' = 'false'

        union all
        select 'request_key_with_two_digests', q.request_key,
               jsonb_build_object('bound', q.input_digest, 'receipt', r.input_digest)
        from external_request q join receipt r on r.request_key = q.request_key
        where r.input_digest <> q.input_digest

        union all
        select 'lease_expired_after_call_without_review', s.id::text,
               jsonb_build_object('attempt', a.id, 'invoked_at', a.invoked_at, 'lease_expired_at', l.expires_at)
        from step s join attempt a on a.step_id = s.id and a.ended_at is null and a.invoked_at is not null
        left join lease l on l.id = s.lease_id
        where s.state = 'invoking' and coalesce(l.expires_at, '-infinity') < now() - interval '1 minute'
        "#
    )
    .fetch_all(executor)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.kind, r.subject, r.evidence))
        .collect())
}

/// Takes the periodic check's turn if nobody took it within the last `every_secs` seconds, nor
/// within `spacing` times the last pass's length; whether this caller took it. Until the pass
/// ends ([`end_check_turn`]) its length counts as at least the interval or the last one's, so
/// a long pass is not started again beside itself, and a pass cut short (a crash, a restart)
/// holds the turn for `spacing` times that at most.
pub async fn take_check_turn<'e, E>(
    executor: E,
    every_secs: f64,
    spacing: f64,
) -> sqlx::Result<bool>
where
    E: Executor<'e, Database = Postgres>,
{
    Ok(sqlx::query_scalar!(
        r#"insert into invariant_turn (checked_at, pass_secs) values (now(), $1)
           on conflict (only_row) do update
               set checked_at = now(), pass_secs = greatest(invariant_turn.pass_secs, $1)
           where invariant_turn.checked_at
                 <= now() - make_interval(secs => greatest($1, invariant_turn.pass_secs * $2))
           returning true as "taken!""#,
        every_secs,
        spacing,
    )
    .fetch_optional(executor)
    .await?
    .is_some())
}

/// Records how long the pass that took the turn lasted, which spaces out the next one.
pub async fn end_check_turn<'e, E>(executor: E, pass_secs: f64) -> sqlx::Result<()>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query!("update invariant_turn set pass_secs = $1", pass_secs)
        .execute(executor)
        .await?;
    Ok(())
}

/// Records each violation once (per kind and subject), with the evidence first seen, in one
/// statement; returns those recorded now for the first time.
pub async fn record_violations<'e, E>(
    executor: E,
    violations: &[(String, String, Value)],
) -> sqlx::Result<Vec<(String, String, Value)>>
where
    E: Executor<'e, Database = Postgres>,
{
    let (kinds, subjects, evidence): (Vec<&str>, Vec<&str>, Vec<&Value>) = violations
        .iter()
        .map(|(kind, subject, evidence)| (kind.as_str(), subject.as_str(), evidence))
        .collect();
    let rows = sqlx::query!(
        r#"insert into invariant_violation (kind, subject, evidence)
           select * from unnest($1::text[], $2::text[], $3::jsonb[])
           on conflict (kind, subject) do nothing
           returning kind, subject, evidence"#,
        &kinds as &[&str],
        &subjects as &[&str],
        &evidence as &[&Value],
    )
    .fetch_all(executor)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.kind, r.subject, r.evidence))
        .collect())
}

/// Rows whose reference points at nothing, for every reference the hot tables keep without a
/// foreign key (docs/DESIGN.md §4): (the reference, how many rows, one of them). Scans whole
/// tables, so it runs on demand (`z29c check`), never in the workers' periodic check.
pub async fn orphans<'e, E>(executor: E) -> sqlx::Result<Vec<(String, i64, String)>>
where
    E: Executor<'e, Database = Postgres>,
{
    let rows = sqlx::query!(
        r#"select reference as "reference!", count(*) as "rows!", min(example) as "example!" from (
               select 'attempt_start.step_id -> step' as reference, a.id::text as example
               from attempt_start a where not exists (select 1 from step s where s.id = a.step_id)
               union all
               select 'attempt_start.authorization_id -> operator_authorization', a.id::text
               from attempt_start a where a.authorization_id is not null
                 and not exists (select 1 from operator_authorization o where o.id = a.authorization_id)
               union all
               select 'external_request.step_id -> step', q.request_key
               from external_request q where not exists (select 1 from step s where s.id = q.step_id)
               union all
               select 'external_request.adapter -> adapter', q.request_key
               from external_request q where not exists (select 1 from adapter d where d.name = q.adapter)
               union all
               select 'external_request.replaces_key -> external_request', q.request_key
               from external_request q where q.replaces_key is not null
                 and not exists (select 1 from external_request o where o.request_key = q.replaces_key)
               union all
               select 'step.lease_id -> lease', s.id::text
               from step s where s.lease_id is not null
                 and not exists (select 1 from lease l where l.id = s.lease_id)
               union all
               select 'receipt.step_id -> step', r.id::text
               from receipt r where not exists (select 1 from step s where s.id = r.step_id)
               union all
               select 'receipt.workflow_id -> workflow', r.id::text
               from receipt r where not exists (select 1 from workflow w where w.id = r.workflow_id)
               union all
               select 'receipt.request_key -> external_request', r.id::text
               from receipt r where not exists (select 1 from external_request q where q.request_key = r.request_key)
               union all
               select 'step.receipt_id -> receipt', s.id::text
               from step s where s.receipt_id is not null
                 and not exists (select 1 from receipt r where r.id = s.receipt_id)
               union all
               select 'observation.step_id -> step', o.id::text
               from observation o where not exists (select 1 from step s where s.id = o.step_id)
               union all
               select 'observation.attempt_id -> attempt_start', o.id::text
               from observation o where o.attempt_id is not null
                 and not exists (select 1 from attempt_start a where a.id = o.attempt_id)
               union all
               select 'outbox.workflow_id -> workflow', e.event_id::text
               from outbox e where e.workflow_id is not null
                 and not exists (select 1 from workflow w where w.id = e.workflow_id)
                 and not exists (select 1 from archived_workflow a where a.id = e.workflow_id)
               union all
               select 'status_projection.workflow_id -> workflow', p.workflow_id::text
               from status_projection p where not exists (select 1 from workflow w where w.id = p.workflow_id)
           ) o
           group by reference
           order by reference"#
    )
    .fetch_all(executor)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.reference, r.rows, r.example))
        .collect())
}

/// Of `subjects` (step ids, or request keys), those whose step has an integrity incident, open
/// or resolved: a violation someone has seen already.
pub async fn seen_in_incidents<'e, E>(executor: E, subjects: &[String]) -> sqlx::Result<Vec<String>>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_scalar!(
        r#"select t.subject as "subject!"
           from unnest($1::text[]) as t(subject)
           where exists (
               select 1 from integrity_incident i
               where i.step_id::text = t.subject
                  or i.step_id = (select q.step_id from external_request q where q.request_key = t.subject))"#,
        subjects
    )
    .fetch_all(executor)
    .await
}
