//! The console bench's data: a long-running system's history, loaded set-based.

use sqlx::PgPool;

/// One adapter of each kind, `bench-<kind>`, as the loaded workflows name them.
pub(super) async fn register_adapters(pool: &PgPool) -> anyhow::Result<()> {
    for kind in engine::domain::ContractKind::ALL {
        let contract = engine::adapter::contracts::declared(kind, 1_000, 1_500, false);
        let kind = kind.as_str();
        engine::adapter::apply::register_trusted(
            pool,
            &format!("bench-{kind}"),
            "http://127.0.0.1:9",
            &contract,
        )
        .await?;
    }
    Ok(())
}

/// Loads workflows `from..to` with the mix of a long-running system: most succeeded with one
/// to two attempts, about 1 % outcome unknown or waiting for review across the three adapter
/// kinds (one to five attempts), 0.1 % with a duplicate-effect incident. Set-based SQL, with
/// the triggers off for the load (`session_replication_role = replica`, superuser only) and the
/// kept counts those triggers would have appended written by the load itself.
pub(super) async fn load(pool: &PgPool, from: usize, to: usize) -> anyhow::Result<()> {
    load_aged(pool, from, to, None).await
}

/// [`load`], the workflows settled `age_days` ago, spread over that day, instead of over the
/// last fortnight (the retention bench's simulated days).
pub(super) async fn load_aged(
    pool: &PgPool,
    from: usize,
    to: usize,
    age_days: Option<u32>,
) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    if let Some(days) = age_days {
        sqlx::query("select set_config('z29c.bench_age_days', $1, true)")
            .bind(days.to_string())
            .execute(&mut *tx)
            .await?;
    }
    sqlx::query("set local session_replication_role = replica")
        .execute(&mut *tx)
        .await?;
    sqlx::query("set local synchronous_commit = off")
        .execute(&mut *tx)
        .await?;
    let (from, to) = (i64::try_from(from)?, i64::try_from(to)?);
    for statement in STATEMENTS {
        sqlx::query(statement)
            .bind(from)
            .bind(to)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    // What autovacuum does to a system's mostly settled history: statistics, and pages marked
    // all-visible (index-only scans).
    sqlx::query("vacuum analyze").execute(pool).await?;
    Ok(())
}

/// The load, statement by statement; each binds the range `from..to` as `$1` and `$2`.
const STATEMENTS: [&str; 11] = [
    // Workflows: needs_review for the 1 % unknown and the 0.1 % duplicates.
    r#"insert into workflow (id, creation_key, definition_name, definition_version, input, input_digest, state, revision, created_at, updated_at, settled_at)
           select md5('w' || n)::uuid, 'bench-c-' || n, 'document_delivery', 2,
                  jsonb_build_object('adapter', 'bench-' || (array['idempotent','queryable','opaque'])[n % 3 + 1],
                                     'notify_adapter', 'bench-' || (array['idempotent','queryable','opaque'])[n % 3 + 1],
                                     'recipient', 'customer-' || (n % 5000),
                                     'document', jsonb_build_object('title', 'Document ' || n, 'body', 'benchmark')),
                  'sha256:' || encode(sha256(('w' || n)::bytea), 'hex'),
                  case when n % 100 = 7 or n % 1000 = 3 then 'needs_review' else 'completed' end::workflow_state,
                  6, at.t, at.t, case when not (n % 100 = 7 or n % 1000 = 3) then at.t end
           from generate_series($1::bigint, $2::bigint - 1) n,
                lateral (select coalesce(
                    now() - make_interval(days => nullif(current_setting('z29c.bench_age_days', true), '')::int,
                                          mins => (n % 1440)::int),
                    now() - make_interval(mins => (n % 20000)::int)) as t) at"#,
    // Steps: render (pure), deliver, notify.
    r#"insert into step (id, workflow_id, logical, definition_version, kind, adapter, state, depends_on, required_fields,
                             output, receipt_id, request_key, attempt_count, unknown_since, run_after, created_at, updated_at)
           select md5('s' || n || l.logical)::uuid, md5('w' || n)::uuid, l.logical, 2, l.kind::step_kind,
                  case when l.logical = 'render' then null else 'bench-' || (array['idempotent','queryable','opaque'])[n % 3 + 1] end,
                  (case when l.logical = 'render' then 'succeeded'
                        when n % 100 = 7 and l.logical = 'deliver' then (array['outcome_unknown','review_required'])[n % 2 + 1]
                        when n % 100 = 7 then 'blocked'
                        else 'succeeded' end)::step_state,
                  l.depends_on, '{}',
                  case when l.logical = 'render' then jsonb_build_object('document_digest', 'sha256:' || encode(sha256(('d' || n)::bytea), 'hex')) end,
                  case when l.logical <> 'render' and not (n % 100 = 7) then md5('r' || n || l.logical)::uuid end,
                  case when l.logical = 'render' or (n % 100 = 7 and l.logical = 'notify') then null
                       else 'w-' || replace(md5('w' || n)::uuid::text, '-', '') || '/' || l.logical || '-v2' end,
                  case when n % 100 = 7 and l.logical = 'deliver' then (n % 5 + 1)
                       when n % 100 = 7 and l.logical = 'notify' then 0
                       when n % 10 = 1 and l.logical = 'deliver' then 2 else 1 end,
                  case when n % 100 = 7 and l.logical = 'deliver' then now() - make_interval(mins => (n % 2880)::int) end,
                  now(), now() - make_interval(mins => (n % 20000)::int), now()
           from generate_series($1::bigint, $2::bigint - 1) n,
                (values ('render', 'pure', '{}'::text[]), ('deliver', 'external', '{render}'), ('notify', 'external', '{deliver}'))
                    as l(logical, kind, depends_on)"#,
    // Request identities of every external step that was sent.
    r#"insert into external_request (request_key, step_id, input_digest, summary, adapter, contract_version, prepared_at, first_sent_at, last_sent_at)
           select s.request_key, s.id, 'sha256:' || encode(sha256(s.request_key::bytea), 'hex'),
                  jsonb_build_object('client_reference', s.request_key, 'digest', 'sha256:' || encode(sha256(('d' || s.request_key)::bytea), 'hex')),
                  s.adapter, 1, s.created_at, s.created_at, s.created_at
           from step s where s.request_key is not null and s.kind = 'external'
             and s.workflow_id in (select md5('w' || n)::uuid from generate_series($1::bigint, $2::bigint - 1) n)"#,
    // Attempts: one per attempt counted; all but the last of a retried step ended unknown.
    r#"insert into attempt_start (id, step_id, number, worker, started_at, invoked_at, request_key)
           select md5('a' || s.id || k)::uuid, s.id, k, 'bench-worker', s.created_at, s.created_at, s.request_key
           from step s, generate_series(1, s.attempt_count) k
           where s.kind = 'external'
             and s.workflow_id in (select md5('w' || n)::uuid from generate_series($1::bigint, $2::bigint - 1) n)"#,
    // How each attempt ended, as the observation that ended it (the succeeded ones end with
    // their step's receipt, below).
    r#"insert into observation (step_id, attempt_id, request_key, kind, body, outcome, observed_at)
           select s.id, md5('a' || s.id || k)::uuid, s.request_key, 'transport',
                  '{"observed": "deadline_exceeded", "deadline_ms": 1000}'::jsonb, 'outcome_unknown', s.created_at
           from step s, generate_series(1, s.attempt_count) k
           where s.kind = 'external'
             and (k < s.attempt_count or s.state in ('outcome_unknown', 'review_required'))
             and s.workflow_id in (select md5('w' || n)::uuid from generate_series($1::bigint, $2::bigint - 1) n)"#,
    // Receipts of every succeeded external step.
    r#"insert into receipt (id, step_id, workflow_id, definition_version, input_digest, request_key, adapter, contract_version,
                                external_reference, completion_state, method, observed_at, result_summary,
                                attempt_id, observation)
           select s.receipt_id, s.id, s.workflow_id, 2, q.input_digest, s.request_key, s.adapter, 1,
                  'x-' || substr(md5(s.id::text), 1, 12), 'accepted',
                  (case when s.attempt_count > 1 then 'idempotent_replay' else 'direct_response' end)::receipt_method,
                  s.created_at, '{}', md5('a' || s.id || s.attempt_count)::uuid,
                  '{"observed": "accepted", "status": 201, "replayed": false, "external_reference": "x"}'::jsonb
           from step s join external_request q on q.request_key = s.request_key
           where s.receipt_id is not null
             and s.workflow_id in (select md5('w' || n)::uuid from generate_series($1::bigint, $2::bigint - 1) n)"#,
    // Duplicate-effect incidents, each holding the receipt's reference and another.
    r#"insert into integrity_incident (id, step_id, kind, opened_at)
           select md5('i' || n)::uuid, md5('s' || n || 'deliver')::uuid, 'duplicate_effect', now() - make_interval(mins => (n % 600)::int)
           from generate_series($1::bigint, $2::bigint - 1) n where n % 1000 = 3"#,
    r#"insert into incident_reference (incident_id, external_reference, request_key)
           select md5('i' || n)::uuid, r.ref, 'w-' || replace(md5('w' || n)::uuid::text, '-', '') || '/deliver-v2'
           from generate_series($1::bigint, $2::bigint - 1) n,
                lateral (values ('x-' || substr(md5(md5('s' || n || 'deliver')::uuid::text), 1, 12)), ('x-dup-' || n)) r(ref)
           where n % 1000 = 3"#,
    // The kept counts, as the triggers that are off for the load would have appended them.
    r#"insert into workflow_state_delta (state, n)
           select state, count(*) from workflow
           where id in (select md5('w' || n)::uuid from generate_series($1::bigint, $2::bigint - 1) n)
           group by state"#,
    r#"insert into step_state_delta (logical, state, n)
           select logical, state, count(*) from step
           where workflow_id in (select md5('w' || n)::uuid from generate_series($1::bigint, $2::bigint - 1) n)
           group by logical, state"#,
    r#"insert into step_waiting_delta (state, adapter, n)
           select waiting, coalesce(adapter, ''), count(*) from step
           where waiting is not null
             and workflow_id in (select md5('w' || n)::uuid from generate_series($1::bigint, $2::bigint - 1) n)
           group by 1, 2"#,
];
