//! The semantic invariants of DESIGN.md, as queries. Run continuously by workers' sweeps and
//! on demand by `z29c check`; each violation is recorded once, with the evidence that shows it.

use serde::Serialize;
use serde_json::Value;
use sqlx::PgPool;

/// The invariants, named as they are recorded and exported.
pub const KINDS: [&str; 6] = [
    "one_effect_step_with_several_references",
    "succeeded_step_without_receipt",
    "dependant_started_before_required_receipt",
    "opaque_retry_without_authorization",
    "request_key_with_two_digests",
    "lease_expired_after_call_without_review",
];

/// One violation found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Violation {
    pub kind: String,
    pub subject: String,
    pub evidence: Value,
}

/// Finds every current violation and records the new ones; returns all that hold now.
pub async fn check(pool: &PgPool) -> sqlx::Result<Vec<Violation>> {
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
        where s.kind <> 'pure'
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
               jsonb_build_object('dependency', p.id, 'attempt_started', min(a.started_at),
                                  'dependency_settled', coalesce(max(r.created_at), max(w.created_at)))
        from step d
        join attempt a on a.step_id = d.id
        join step p on p.workflow_id = d.workflow_id and p.logical = any(d.depends_on)
        left join receipt r on r.step_id = p.id
        left join waiver w on w.step_id = p.id and d.accepts_waiver
        where p.kind <> 'pure'
          and not exists (select 1 from step r where r.replaces_step_id = p.id)
        group by d.id, p.id
        having coalesce(max(r.created_at), max(w.created_at)) is null
            or min(a.started_at) < coalesce(max(r.created_at), max(w.created_at))

        union all
        select 'opaque_retry_without_authorization', later.step_id::text,
               jsonb_build_object('attempt', later.id, 'number', later.number, 'after_unknown_attempt', earlier.id)
        from attempt later
        join step s on s.id = later.step_id
        join adapter ad on ad.name = s.adapter
        join attempt earlier on earlier.step_id = later.step_id and earlier.number < later.number
             and earlier.outcome = 'outcome_unknown'
        where later.authorization_id is null
          and ad.contract ->> 'accepts_idempotency_key' = 'false'
          and ad.contract ->> 'query_by_client_reference' = 'false'

        union all
        select 'request_key_with_two_digests', q.request_key,
               jsonb_build_object('bound', q.input_digest, 'receipt', r.input_digest)
        from external_request q join receipt r on r.request_key = q.request_key
        where r.input_digest <> q.input_digest

        union all
        select 'lease_expired_after_call_without_review', s.id::text,
               jsonb_build_object('attempt', a.id, 'invoked_at', a.invoked_at, 'lease_expired_at', s.lease_expires_at)
        from step s join attempt a on a.step_id = s.id and a.ended_at is null and a.invoked_at is not null
        where s.state = 'invoking' and s.lease_expires_at < now() - interval '1 minute'
        "#
    )
    .fetch_all(pool)
    .await?;
    let violations: Vec<Violation> = rows
        .into_iter()
        .map(|r| Violation {
            kind: r.kind,
            subject: r.subject,
            evidence: r.evidence,
        })
        .collect();
    for v in &violations {
        sqlx::query!(
            r#"insert into invariant_violation (kind, subject, evidence) values ($1, $2, $3)
               on conflict (kind, subject) do nothing"#,
            v.kind,
            v.subject,
            v.evidence,
        )
        .execute(pool)
        .await?;
    }
    Ok(violations)
}

/// What [`prepare_resume`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resume {
    /// External steps now outcome unknown: caught mid-call, or ready to be called.
    pub to_recovery: usize,
    /// External steps waiting for their dependencies, marked to start as outcome unknown.
    pub marked: usize,
    /// Pure steps caught running, ready again.
    pub to_ready: usize,
}

/// Before workers resume after a restore. The live system went on after the backup was taken,
/// so any external step the backup saw unfinished may have been sent since — and the
/// destination keeps what it received. Such a step is never sent blind:
///
/// - caught `running` or `invoking`, or `ready` to be called: its open attempt (if any) ends
///   `outcome_unknown` ("restored") and the step goes to recovery under its request key — a
///   query or a same-key replay where the contract allows, review otherwise;
/// - `blocked` on its dependencies: it is marked (`restored_at`), and starts as outcome unknown
///   instead of ready once they are met.
///
/// Pure steps caught `running` simply run again. Run it with every worker stopped.
pub async fn prepare_resume(pool: &PgPool) -> sqlx::Result<Resume> {
    let restored = serde_json::to_value(crate::domain::TransportObservation::Restored)
        .expect("an observation serializes");
    // The harness's broken rule: only steps caught mid-call, as if the live system had stopped
    // at the backup.
    let unfinished: &[&str] = if crate::failpoint::broken("resume_blind") {
        &["running", "invoking"]
    } else {
        &["blocked", "ready", "running", "invoking"]
    };
    let unfinished: Vec<String> = unfinished.iter().map(|s| (*s).to_owned()).collect();
    let mut tx = pool.begin().await?;
    // The derived key (RequestKey::derive) where none was persisted, so recovery can ask about it.
    let keyed = sqlx::query!(
        r#"update step set request_key = coalesce(request_key,
               'w-' || replace(workflow_id::text, '-', '') || '/' || logical || '-v' || definition_version),
               restored_at = now(), updated_at = now()
           where state::text = any($1) and kind <> 'pure'
           returning id, state::text as "state!""#,
        &unfinished
    )
    .fetch_all(&mut *tx)
    .await?;
    let to_recovery = sqlx::query!(
        r#"with caught as (
               update step set state = 'outcome_unknown', lease_holder = null, lease_expires_at = null,
                      run_after = now(), unknown_since = coalesce(unknown_since, now())
               where state::text = any($2) and state <> 'blocked' and kind <> 'pure'
               returning id, workflow_id, request_key
           ), ended as (
               update attempt a set ended_at = now(), outcome = 'outcome_unknown', observation = $1
               from caught c where a.step_id = c.id and a.ended_at is null
               returning a.id, a.step_id
           ), observed as (
               insert into observation (step_id, attempt_id, request_key, kind, body)
               select c.id, e.id, c.request_key, 'transport', $1
               from caught c left join ended e on e.step_id = c.id
           )
           select id, workflow_id from caught"#,
        restored,
        &unfinished
    )
    .fetch_all(&mut *tx)
    .await?;
    sqlx::query!(
        r#"update step set lease_expires_at = now() - interval '1 second' where state = 'running'"#
    )
    .execute(&mut *tx)
    .await?;
    let to_ready = crate::store::step::reclaim_expired_before_call(&mut tx).await?;
    for row in &to_recovery {
        crate::store::workflow::refresh_state(&mut tx, row.workflow_id).await?;
    }
    tx.commit().await?;
    Ok(Resume {
        to_recovery: to_recovery.len(),
        marked: keyed.iter().filter(|k| k.state == "blocked").count(),
        to_ready: to_ready.len(),
    })
}
