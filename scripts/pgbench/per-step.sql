-- One external step through the protocol as the engine ran it before the pipeline: three
-- transactions per step, each statement one round trip (the schema before the pipeline).

-- Checkpoint 1: lease the step, record its attempt.
BEGIN;
with due as (
    select id from step
    where state in ('ready', 'outcome_unknown') and run_after <= now()
      and (lease_expires_at is null or lease_expires_at < now())
    order by run_after limit 1 for update skip locked
)
update step s set lease_holder = 'proto', lease_expires_at = now() + interval '30 s',
       run_after = now() + interval '30 s', state = 'running', attempt_count = s.attempt_count + 1,
       updated_at = now()
from due, workflow w where s.id = due.id and w.id = s.workflow_id
returning s.id as step, s.workflow_id as wf,
          'w-' || replace(s.workflow_id::text, '-', '') || '/' || s.logical || '-v1' as key, gen_random_uuid() as attempt
\gset
insert into attempt (id, step_id, number, worker, lease_expires_at)
values (:attempt::uuid, :step::uuid, 1, 'proto', now() + interval '30 s');
COMMIT;

-- Checkpoints 2 and 3: authority, the request identity, the step invoking.
BEGIN;
select id from step where workflow_id = :wf::uuid and state = 'succeeded';
select reason from authority_suspension where (scope = 'adapter' and value = 'proto') limit 1;
insert into authority_decision (step_id, attempt_id, granted, scope, reason)
values (:step::uuid, :attempt::uuid, true, '{"action": "deliver"}', 'no suspension applies');
insert into external_request (request_key, step_id, input_digest, summary, adapter, contract_version)
values (:key::text, :step::uuid, 'sha256:' || encode(sha256(convert_to(:key::text, 'UTF8')), 'hex'),
        jsonb_build_object('client_reference', :key::text), 'proto', 1)
on conflict (request_key) do nothing returning input_digest;
with invoking as (
    update step set state = 'invoking', request_key = :key::text, updated_at = now()
    where id = :step::uuid and lease_holder = 'proto' and state in ('running', 'outcome_unknown')
    returning id
), began as (
    update attempt set invoked_at = now() where id = :attempt::uuid and ended_at is null
      and exists (select 1 from invoking)
), sent as (
    update external_request set first_sent_at = coalesce(first_sent_at, now()), last_sent_at = now()
    where request_key = :key::text and exists (select 1 from invoking)
)
select count(*) from invoking;
COMMIT;

-- Checkpoints 5 and 6: the observation, the receipt, dependants, the event, the state.
BEGIN;
select id from step where id = :step::uuid and lease_holder = 'proto' for update;
with ended as (
    update attempt set ended_at = now(), outcome = 'succeeded', observation = '{"observed": "accepted"}'
    where id = :attempt::uuid and ended_at is null returning id
)
insert into observation (step_id, attempt_id, request_key, kind, body)
select :step::uuid, id, :key::text, 'transport', '{"observed": "accepted"}' from ended;
select r.external_reference from step s join receipt r on r.id = s.receipt_id where s.id = :step::uuid;
with locked as (
    select w.id from workflow w join step s on s.workflow_id = w.id where s.id = :step::uuid for update of w
), receipted as (
    insert into receipt (id, step_id, workflow_id, definition_version, input_digest, request_key, adapter,
                         contract_version, external_reference, completion_state, method, observed_at, result_summary)
    select gen_random_uuid(), s.id, s.workflow_id, s.definition_version, q.input_digest, q.request_key,
           q.adapter, q.contract_version, 'x-' || :key::text, 'accepted', 'direct_response', now(), '{}'
    from step s join external_request q on q.request_key = :key::text join locked on locked.id = s.workflow_id
    where s.id = :step::uuid returning id
), succeeded as (
    update step set state = 'succeeded', receipt_id = (select id from receipted), lease_holder = null,
                    lease_expires_at = null, unknown_since = null, updated_at = now()
    where id = :step::uuid and lease_holder = 'proto' and exists (select 1 from receipted)
    returning id
)
select count(*) from succeeded;
select id from workflow where id = :wf::uuid for update;
update step d set run_after = now(), updated_at = now(), state = 'ready'
where d.workflow_id = :wf::uuid and d.state = 'blocked'
  and not exists (select 1 from unnest(d.depends_on) as dep(logical)
                  where not exists (select 1 from step p where p.workflow_id = d.workflow_id
                                    and p.logical = dep.logical and p.state = 'succeeded'));
with bumped as (
    update workflow set revision = revision + 1, updated_at = now() where id = :wf::uuid returning revision
)
insert into outbox (event_id, workflow_id, revision, kind, payload)
select gen_random_uuid(), :wf::uuid, revision, 'step.attempt_ended', '{"outcome": "succeeded"}' from bumped;
select w.state, bool_or(s.state in ('review_required', 'rejected')), bool_and(s.state in ('succeeded', 'waived'))
from workflow w left join step s on s.workflow_id = w.id where w.id = :wf::uuid group by w.id;
COMMIT;
