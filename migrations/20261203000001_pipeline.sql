-- The set-based pipeline (docs/DESIGN.md §4): a schema whose happy path writes few row versions
-- and few index entries.
--
-- * No index of `step` covers a column the happy path changes, so a step's state changes are
--   HOT updates: the claim queue and the leases live in tables of their own, the review
--   queue's indexes read a generated column that is null until a step waits for a person, and
--   the request key is set when the step is created.
-- * Attempts are append-only: an attempt ends with its receipt (which carries the accepted
--   observation) or with an observation that names its outcome; the view `attempt` joins them.
-- * Foreign keys and row triggers are off the hot tables: orphans are found by `z29c check`,
--   append-only tables refuse changes with statement triggers, and the kept counts and the
--   claim queue are maintained by statement triggers over transition tables.

-- Leases: one row per claimed batch, renewed as one row.
create table lease (
    id         uuid primary key,
    holder     text not null,
    expires_at timestamptz not null,
    -- The steps claimed under it: where the sweeper looks once it expires.
    steps      uuid[] not null
) with (fillfactor = 80);

create index lease_expiry_idx on lease (expires_at);

alter table step add column lease_id uuid;

with held as (
    select id as step_id, gen_random_uuid() as lease_id, lease_holder, lease_expires_at
    from step where lease_holder is not null
), leased as (
    insert into lease (id, holder, expires_at, steps)
    select lease_id, lease_holder, coalesce(lease_expires_at, now()), array[step_id] from held
)
update step s set lease_id = held.lease_id from held where s.id = held.step_id;

alter table step drop constraint leased_step_has_lease;
drop index step_lease_idx;
alter table step drop column lease_expires_at;
alter table step add constraint leased_step_has_lease
    check (state not in ('running', 'invoking') or (lease_holder is not null and lease_id is not null));

-- The claim queue: a narrow table of steps a worker may claim, and when. A row is a hint; the
-- step's own state decides, so a claim skips any row whose step is no longer claimable.
create table step_ready (
    step_id   uuid primary key,
    run_after timestamptz not null
);

create index step_ready_due_idx on step_ready (run_after);

insert into step_ready (step_id, run_after)
select id, run_after from step where state in ('ready', 'outcome_unknown');

drop index step_claimable_idx;

-- The review queue reads a column that stays null on the happy path.
alter table step add column waiting step_state generated always as (
    case when state in ('outcome_unknown', 'review_required', 'rejected') then state end
) stored;

drop index step_review_idx;
drop index step_waiting_counts_idx;
create index step_review_idx on step (unknown_since, id) where waiting is not null;
create index step_waiting_counts_idx on step (waiting, adapter, unknown_since, id)
    where waiting is not null;

-- Redundant with the unique constraints that lead with the same columns.
drop index step_workflow_idx;
drop index attempt_step_idx;

-- Attempts: append-only, with the request identity and the authority decision they were made
-- under. How an attempt ended is its receipt or its ending observation.
alter table attempt rename to attempt_start;
alter table attempt_start rename constraint attempt_pkey to attempt_start_pkey;
alter table attempt_start
    add column request_key    text,
    add column request_digest text,
    add column authority      jsonb;

update attempt_start a set authority = jsonb_build_object(
        'granted', d.granted, 'reason', d.reason, 'scope', d.scope)
from authority_decision d where d.attempt_id = a.id;
drop table authority_decision;

alter table observation add column outcome attempt_outcome;
alter table observation drop constraint observation_kind_check;
alter table observation add constraint observation_kind_check
    check (kind in ('transport', 'lookup', 'compensation', 'pure'));
alter table receipt
    add column attempt_id  uuid,
    add column observation jsonb;

drop trigger observation_is_append_only on observation;
drop trigger attempt_is_final_once_ended on attempt_start;
drop function refuse_ended_attempt_change();

-- Each ended attempt's end, from the observation that recorded it (the first with the same
-- body); attempts that ended without one (pure steps) get one.
with ending as (
    select distinct on (a.id) o.id
    from attempt_start a join observation o
      on o.attempt_id = a.id and o.kind = 'transport' and o.body = a.observation
    where a.ended_at is not null
    order by a.id, o.id
)
update observation o set outcome = a.outcome
from ending e, attempt_start a
where o.id = e.id and a.id = o.attempt_id;

insert into observation (step_id, attempt_id, kind, body, observed_at, outcome)
select a.step_id, a.id, case when s.kind = 'pure' then 'pure' else 'transport' end,
       coalesce(a.observation, '{}'), a.ended_at, a.outcome
from attempt_start a join step s on s.id = a.step_id
where a.ended_at is not null
  and not exists (select 1 from observation o where o.attempt_id = a.id and o.outcome is not null);

drop index attempt_lost_during_call_idx;
alter table attempt_start drop constraint ended_attempt_has_outcome;
alter table attempt_start
    drop column ended_at,
    drop column outcome,
    drop column observation,
    drop column lease_expires_at;

create unique index observation_attempt_end_idx on observation (attempt_id) where outcome is not null;
create unique index receipt_attempt_idx on receipt (attempt_id) where attempt_id is not null;
-- Attempts whose worker was lost after the request began: few, counted from the index alone.
create index observation_lost_during_call_idx on observation (id)
    where outcome is not null and body ->> 'observed' = 'worker_lost' and body ->> 'during_call' = 'true';

create view attempt as
select a.id, a.step_id, a.number, a.worker, a.started_at, a.invoked_at, a.authorization_id,
       a.request_key, a.request_digest, a.authority,
       e.ended_at, e.outcome, e.observation
from attempt_start a
left join lateral (
    select r.created_at as ended_at, 'succeeded'::attempt_outcome as outcome, r.observation
    from receipt r where r.attempt_id = a.id
    union all
    select o.observed_at, o.outcome, o.body
    from observation o where o.attempt_id = a.id and o.outcome is not null
    limit 1
) e on true;

-- New steps are created with their request key (it is derived, never random), so binding the
-- request never changes an indexed column.

-- Foreign keys off the hot tables; `z29c check` finds orphans instead.
alter table step drop constraint step_receipt_fk;
alter table attempt_start drop constraint attempt_step_id_fkey;
alter table attempt_start drop constraint attempt_authorization_id_fkey;
alter table external_request drop constraint external_request_step_id_fkey;
alter table external_request drop constraint external_request_adapter_fkey;
alter table external_request drop constraint external_request_replaces_key_fkey;
alter table receipt drop constraint receipt_step_id_fkey;
alter table receipt drop constraint receipt_workflow_id_fkey;
alter table receipt drop constraint receipt_request_key_fkey;
alter table observation drop constraint observation_step_id_fkey;
alter table observation drop constraint observation_attempt_id_fkey;
alter table outbox drop constraint outbox_workflow_id_fkey;
alter table status_projection drop constraint status_projection_workflow_id_fkey;
alter table consumer_revision drop constraint consumer_revision_workflow_id_fkey;

-- Append-only tables refuse any change with one statement trigger each.
drop trigger receipt_is_append_only on receipt;
drop trigger audit_is_append_only on audit;
create trigger attempt_is_append_only before update or delete on attempt_start
    for each statement execute function refuse_change();
create trigger observation_is_append_only before update or delete on observation
    for each statement execute function refuse_change();
create trigger receipt_is_append_only before update or delete on receipt
    for each statement execute function refuse_change();
create trigger audit_is_append_only before update or delete on audit
    for each statement execute function refuse_change();

drop trigger request_digest_is_immutable on external_request;
drop function refuse_digest_change();
create function refuse_digest_change() returns trigger language plpgsql as $$
declare
    changed record;
begin
    select o.request_key, o.input_digest into changed
    from old_requests o join new_requests n on n.request_key = o.request_key
    where n.input_digest <> o.input_digest limit 1;
    if found then
        raise exception 'request key % is bound to digest %; a new digest needs a replacement step',
            changed.request_key, changed.input_digest using errcode = 'Z29C2';
    end if;
    return null;
end
$$;
create trigger request_digest_is_immutable after update on external_request
    referencing old table as old_requests new table as new_requests
    for each statement execute function refuse_digest_change();

-- Kept counts and the claim queue, folded once per statement.
drop trigger workflow_state_counted on workflow;
drop trigger workflow_state_changed on workflow;
drop trigger step_state_counted on step;
drop trigger step_state_changed on step;
drop function count_workflow_state();
drop function count_step_state();

create function count_workflows() returns trigger language plpgsql as $$
begin
    if tg_op = 'INSERT' then
        insert into workflow_state_delta (state, n)
        select state, count(*) from new_workflows group by state;
    elsif tg_op = 'DELETE' then
        insert into workflow_state_delta (state, n)
        select state, -count(*) from old_workflows group by state;
    else
        insert into workflow_state_delta (state, n)
        select state, sum(n) from (
            select state, 1 as n from new_workflows
            union all select state, -1 from old_workflows) d
        group by state having sum(n) <> 0;
    end if;
    return null;
end
$$;

create trigger workflow_counted_on_insert after insert on workflow
    referencing new table as new_workflows for each statement execute function count_workflows();
create trigger workflow_counted_on_update after update on workflow
    referencing old table as old_workflows new table as new_workflows
    for each statement execute function count_workflows();
create trigger workflow_counted_on_delete after delete on workflow
    referencing old table as old_workflows for each statement execute function count_workflows();

-- A step that becomes claimable (ready, or outcome unknown and due) with no lease is queued,
-- at its `run_after`: whatever code path made it so, it cannot be forgotten.
create function step_changed() returns trigger language plpgsql as $$
begin
    if tg_op = 'INSERT' then
        insert into step_state_delta (logical, state, n)
        select logical, state, count(*) from new_steps group by logical, state;
    elsif tg_op = 'DELETE' then
        insert into step_state_delta (logical, state, n)
        select logical, state, -count(*) from old_steps group by logical, state;
    else
        insert into step_state_delta (logical, state, n)
        select logical, state, sum(n) from (
            select logical, state, 1 as n from new_steps
            union all select logical, state, -1 from old_steps) d
        group by logical, state having sum(n) <> 0;
    end if;
    if tg_op <> 'DELETE' then
        insert into step_ready (step_id, run_after)
        select id, run_after from new_steps
        where state in ('ready', 'outcome_unknown') and lease_holder is null
        on conflict (step_id) do update set run_after = excluded.run_after;
    end if;
    return null;
end
$$;

create trigger step_changed_on_insert after insert on step
    referencing new table as new_steps for each statement execute function step_changed();
create trigger step_changed_on_update after update on step
    referencing old table as old_steps new table as new_steps
    for each statement execute function step_changed();
create trigger step_changed_on_delete after delete on step
    referencing old table as old_steps for each statement execute function step_changed();

-- Room on each page for the next versions of a row, so updates stay on the page (HOT).
alter table step set (fillfactor = 70);
alter table workflow set (fillfactor = 80);
alter table status_projection set (fillfactor = 70);
alter table consumer_revision set (fillfactor = 70);
alter table metric_counter set (fillfactor = 50);
