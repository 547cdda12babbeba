-- 64 external steps through the pipeline's protocol (the schema after it): checkpoints 1–3 for
-- the batch in one transaction, then 5 and 6 for the batch in another, each a few set-based
-- statements. The requests' rendering and the calls, which happen in the worker between the
-- two, are not part of this: what is measured is the database's share.

-- Checkpoints 1–3: lock and read the due steps, then lease, bind and record them.
BEGIN;
with due as (
    select s.id, s.workflow_id, s.request_key,
           (select coalesce(jsonb_object_agg(p.logical, p.output), '{}') from step p
            where p.workflow_id = s.workflow_id and p.state = 'succeeded') as facts
    from step_ready q join step s on s.id = q.step_id join workflow w on w.id = s.workflow_id
    where q.run_after <= now() and s.state in ('ready', 'outcome_unknown')
      and not exists (select 1 from lease l where l.id = s.lease_id and l.expires_at > now())
    order by q.run_after limit 64 for update of s skip locked
)
select array_agg(id)::text as steps, array_agg(request_key)::text as keys,
       array_agg(workflow_id)::text as workflows, gen_random_uuid() as lease
from due
\gset
with i as (
    select t.step, gen_random_uuid() as attempt, t.key,
           'sha256:' || encode(sha256(convert_to(t.key, 'UTF8')), 'hex') as digest,
           jsonb_build_object('client_reference', t.key) as summary,
           '{"granted": true, "reason": "no suspension applies"}'::jsonb as authority
    from unnest(:steps::uuid[], :keys::text[]) as t(step, key)
), leased as (
    insert into lease (id, holder, expires_at, steps)
    select :lease::uuid, 'proto', now() + interval '30 s', array_agg(step) from i
), judged as (
    select i.*, e.input_digest as bound, e.request_key is not null as existed,
           (e.input_digest is null or e.input_digest = i.digest) as same
    from i left join external_request e on e.request_key = i.key
), bound as (
    insert into external_request (request_key, step_id, input_digest, summary, adapter,
                                  contract_version, first_sent_at, last_sent_at)
    select j.key, j.step, j.digest, j.summary, 'proto', 1, now(), now()
    from judged j where not j.existed
    on conflict (request_key) do nothing
), taken as (
    update step s set lease_holder = 'proto', lease_id = :lease::uuid, updated_at = now(),
           state = 'invoking', attempt_count = s.attempt_count + 1
    from judged j where s.id = j.step and j.same
    returning s.id, s.attempt_count
)
insert into attempt_start (id, step_id, number, worker, started_at, invoked_at, request_key,
                           request_digest, authority)
select j.attempt, j.step, t.attempt_count, 'proto', clock_timestamp(), clock_timestamp(), j.key,
       j.digest, j.authority
from judged j join taken t on t.id = j.step;
COMMIT;

-- Checkpoints 5 and 6: receipts with their observations, steps settled, dependants released,
-- events with each workflow's state.
BEGIN;
select id from workflow where id = any(:workflows::uuid[]) order by id for update;
with r as (
    select a.step_id as step, a.id as attempt, a.request_key as key, gen_random_uuid() as receipt
    -- Probes by key, as the engine's statements do: asked for the batch's steps with `any`,
    -- the planner had read every attempt and every step of the seeded database.
    from unnest(:steps::uuid[]) as t(step)
    cross join lateral (select * from attempt_start a where a.step_id = t.step offset 0) a
), held as (
    select s.id, s.workflow_id, s.definition_version from step s
    where s.id = any(:steps::uuid[])
      and s.lease_holder = 'proto' and s.state = 'invoking' and s.receipt_id is null
    for update of s
), receipted as (
    insert into receipt (id, step_id, workflow_id, definition_version, input_digest, request_key,
                         adapter, contract_version, external_reference, completion_state, method,
                         observed_at, result_summary, attempt_id, observation)
    select r.receipt, h.id, h.workflow_id, h.definition_version, q.input_digest, q.request_key,
           q.adapter, q.contract_version, 'x-' || r.key, 'accepted', 'direct_response', now(),
           '{"status": 201, "replayed": false, "fields": {}}',
           r.attempt, '{"observed": "accepted", "status": 201}'
    from r join held h on h.id = r.step join external_request q on q.request_key = r.key
    returning step_id, id
)
update step s set state = 'succeeded', receipt_id = x.id, lease_holder = null, lease_id = null,
       run_after = now(), unknown_since = null, updated_at = now()
from receipted x where s.id = x.step_id;
update step d set run_after = now(), updated_at = now(), state = 'ready'
where d.workflow_id = any(:workflows::uuid[]) and d.state = 'blocked'
  and not exists (select 1 from unnest(d.depends_on) as dep(logical)
                  where not exists (select 1 from step p where p.workflow_id = d.workflow_id
                                    and p.logical = dep.logical and p.state = 'succeeded'
                                    and not exists (select 1 from integrity_incident i
                                                    where i.step_id = p.id and i.resolved_at is null)));
with ev as (
    select gen_random_uuid() as event_id, w as workflow_id, 'step.attempt_ended' as kind,
           '{"outcome": "succeeded"}'::jsonb as payload, 1::bigint as ord
    from unnest(:workflows::uuid[]) as w
), derived as (
    select w.id, w.state as current, d.state as next
    from workflow w cross join lateral workflow_state_of(w.id) d
    where w.id = any(:workflows::uuid[])
), numbered as (
    select a.*, row_number() over (partition by a.workflow_id order by a.ord) as k,
           count(*) over (partition by a.workflow_id) as n
    from (select * from ev
          union all
          select gen_random_uuid(), d.id, 'workflow.state_changed',
                 jsonb_build_object('from', d.current, 'to', d.next), 9223372036854775807
          from derived d where d.next <> d.current) a
), bumped as (
    update workflow w set revision = w.revision + c.n, state = d.next, updated_at = now()
    from (select workflow_id, max(n) as n from numbered group by workflow_id) c
         join derived d on d.id = c.workflow_id
    where w.id = c.workflow_id
    returning w.id, w.revision
)
insert into outbox (event_id, workflow_id, revision, kind, payload)
select n.event_id, n.workflow_id, b.revision - n.n + n.k, n.kind, n.payload
from numbered n join bumped b on b.id = n.workflow_id;
delete from lease where id = :lease::uuid;
COMMIT;
