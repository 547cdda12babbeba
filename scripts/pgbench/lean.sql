-- 64 external steps through the same protocol on the leaner schema (lean-schema.sql): the same
-- transactions and statements as batch.sql where the schema allows, fewer rows and tables. The
-- reads, the release and the announce are batch.sql's, repeated on purpose (pgbench scripts
-- include nothing), so the two designs differ only where their schemas do.

-- Checkpoints 1–3: lock and read the due steps; then, with the requests rendered, lease the
-- batch and bind each request identity and attempt start on the step's own row.
BEGIN;
with due as (
    select s.id, s.workflow_id, s.request_key,
           (select coalesce(jsonb_object_agg(p.logical, p.output), '{}') from step p
            where p.workflow_id = s.workflow_id and p.state = 'succeeded') as facts
    from step s
    where s.state = 'ready' and s.run_after <= now()
    order by s.run_after limit 64 for update skip locked
)
select array_agg(id)::text as steps, array_agg(request_key)::text as keys,
       array_agg(workflow_id)::text as workflows, gen_random_uuid() as lease
from due
\gset
with i as (
    select t.step, t.key, 'sha256:' || encode(sha256(convert_to(t.key, 'UTF8')), 'hex') as digest,
           '{"granted": true, "reason": "no suspension applies"}'::jsonb as authority
    from unnest(:steps::uuid[], :keys::text[]) as t(step, key)
), leased as (
    insert into lease (id, holder, expires_at) values (:lease::uuid, 'proto', now() + interval '30 s')
)
update step s set state = 'invoking', lease_id = :lease::uuid, lease_holder = 'proto',
       attempt_count = s.attempt_count + 1, request_digest = coalesce(s.request_digest, i.digest),
       authority = i.authority, invoked_at = clock_timestamp()
from i where s.id = i.step and s.state = 'ready'
  and (s.request_digest is null or s.request_digest = i.digest);
COMMIT;

-- Checkpoints 5 and 6: each step settled with its receipt and its attempt's row, dependants
-- released, events with each workflow's state.
BEGIN;
select id from workflow where id = any(:workflows::uuid[]) order by id for update;
with settled as (
    update step s set state = 'succeeded', lease_id = null, lease_holder = null,
           receipt = jsonb_build_object('external_reference', 'x-' || s.request_key,
               'method', 'direct_response', 'observed_at', now(),
               'summary', '{"status": 201, "replayed": false, "fields": {}}'::jsonb,
               'observation', '{"observed": "accepted", "status": 201}'::jsonb)
    where s.id = any(:steps::uuid[]) and s.lease_holder = 'proto' and s.state = 'invoking'
    returning s.id, s.attempt_count, s.request_key, s.request_digest, s.authority, s.invoked_at
)
insert into attempt (step_id, number, request_key, request_digest, authority, started_at,
                     ended_at, outcome, observation)
select id, attempt_count, request_key, request_digest, authority, invoked_at, now(), 'succeeded',
       '{"observed": "accepted", "status": 201}'
from settled;
update step d set run_after = now(), state = 'ready'
where d.workflow_id = any(:workflows::uuid[]) and d.state = 'blocked'
  and not exists (select 1 from unnest(d.depends_on) as dep(logical)
                  where not exists (select 1 from step p where p.workflow_id = d.workflow_id
                                    and p.logical = dep.logical and p.state = 'succeeded'));
with ev as (
    select w as workflow_id, 'step.attempt_ended' as kind,
           '{"outcome": "succeeded"}'::jsonb as payload, 1::bigint as ord
    from unnest(:workflows::uuid[]) as w
), steps as (
    select s.workflow_id,
           coalesce(bool_or(s.state in ('review_required', 'rejected')), false) as needs_review,
           coalesce(bool_and(s.state in ('succeeded', 'waived')), false) as all_done,
           coalesce(bool_or(s.state = 'cancelled'), false) as cancelled,
           coalesce(bool_or(s.state not in ('ready', 'blocked')), false) as started
    from step s where s.workflow_id = any(:workflows::uuid[])
    group by s.workflow_id
), derived as (
    select w.id, w.state as current,
           case when st.cancelled then 'cancelled' when st.needs_review then 'needs_review'
                when st.all_done then 'completed' when st.started then 'running'
                else 'pending' end as next
    from workflow w left join steps st on st.workflow_id = w.id
    where w.id = any(:workflows::uuid[])
), numbered as (
    select a.*, row_number() over (partition by a.workflow_id order by a.ord) as k,
           count(*) over (partition by a.workflow_id) as n
    from (select * from ev
          union all
          select d.id, 'workflow.state_changed', jsonb_build_object('from', d.current, 'to', d.next),
                 9223372036854775807
          from derived d where d.next <> d.current) a
), bumped as (
    update workflow w set revision = w.revision + c.n, state = d.next, updated_at = now()
    from (select workflow_id, max(n) as n from numbered group by workflow_id) c
         join derived d on d.id = c.workflow_id
    where w.id = c.workflow_id
    returning w.id, w.revision
)
insert into outbox (workflow_id, revision, kind, payload)
select n.workflow_id, b.revision - n.n + n.k, n.kind, n.payload
from numbered n join bumped b on b.id = n.workflow_id;
delete from lease where id = :lease::uuid;
COMMIT;
