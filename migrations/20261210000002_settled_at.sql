-- The archiver's queue read from the workflow's row (docs/DESIGN.md §21, "Eligibility"): when
-- a workflow settled is its own column, set by the statements that change its state, and a
-- partial index walks the settled workflows oldest first. The table `settled_workflow` that the
-- state trigger kept cost a row and two index entries a workflow; the column costs one index
-- entry, written by the update that changes `state`, which is indexed, so that update was not
-- HOT before either. Every other update of a workflow leaves `settled_at` as it is.

-- The state trigger no longer notes settled workflows (as before `settled_workflow`).
create or replace function count_workflows() returns trigger language plpgsql as $$
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

alter table workflow add column settled_at timestamptz;
-- The `settled_at` of a workflow whose state becomes `next`, `since` its value before: kept
-- while it stays settled, now when it settles, none while it is not. Every statement that sets
-- a workflow's state sets `settled_at` through it (PostgreSQL inlines it).
create function workflow_settled_at(next workflow_state, since timestamptz) returns timestamptz
language sql stable as $$
    select case when next in ('completed', 'cancelled') then coalesce(since, now()) end
$$;
update workflow w set settled_at = coalesce(
        (select s.settled_at from settled_workflow s where s.workflow_id = w.id), w.updated_at)
where w.state in ('completed', 'cancelled');
-- Set exactly while a workflow is settled: the archiver's walk misses none.
alter table workflow add constraint workflow_settled_at_check
    check ((settled_at is not null) = (state in ('completed', 'cancelled')));
create index workflow_settled_idx on workflow (settled_at, id) where settled_at is not null;
drop table settled_workflow;

-- Archives settled workflows (as in `20261208000001_retention.sql`), without the table above;
-- a tombstone's settle time is the workflow's own.
create or replace function z29c_archive_workflows(ids uuid[], file text, member_offset bigint, member_length bigint)
returns bigint
language plpgsql security definer set search_path = public, pg_temp as $$
declare
    removed bigint;
    steps uuid[];
begin
    if exists (select 1 from workflow w where w.id = any(ids) and w.state not in ('completed', 'cancelled'))
       or exists (select 1 from step s where s.workflow_id = any(ids)
                  and (s.lease_id is not null or s.waiting is not null)) then
        raise exception 'an unsettled workflow is never archived' using errcode = 'Z29C1';
    end if;
    insert into archived_workflow (id, creation_key, definition_name, definition_version, state,
                                   input_digest, created_at, settled_at, request_keys,
                                   external_references, archive_file, member_offset, member_length)
    select w.id, w.creation_key, w.definition_name, w.definition_version, w.state,
           w.input_digest, w.created_at, w.settled_at,
           array(select q.request_key from external_request q join step s on s.id = q.step_id
                 where s.workflow_id = w.id order by q.prepared_at),
           array(select distinct x from (
                     -- Through the steps: nothing indexes a receipt by its workflow.
                     select r.external_reference from receipt r
                     join step s on s.id = r.step_id where s.workflow_id = w.id
                     union all
                     select f.external_reference from incident_reference f
                     join integrity_incident i on i.id = f.incident_id
                     join step s on s.id = i.step_id where s.workflow_id = w.id
                     union all
                     select c.external_reference from compensation_link c
                     join step s on s.id = c.original_step_id where s.workflow_id = w.id
                 ) refs(x) where x is not null order by x),
           file, member_offset, member_length
    from workflow w where w.id = any(ids);
    select coalesce(array_agg(id), '{}') into steps from step where workflow_id = any(ids);
    perform set_config('z29c.archiving', 'on', true);
    delete from bulk_item where step_id = any(steps);
    delete from compensation_link where compensation_step_id = any(steps) or original_step_id = any(steps);
    delete from incident_reference where incident_id in (select id from integrity_incident where step_id = any(steps));
    delete from operator_authorization where step_id = any(steps);
    delete from audit where workflow_id = any(ids) or step_id = any(steps);
    delete from notification_candidate where workflow_id = any(ids);
    delete from integrity_incident where step_id = any(steps);
    delete from observation where step_id = any(steps);
    delete from receipt where step_id = any(steps);
    delete from attempt_start where step_id = any(steps);
    delete from external_request where step_id = any(steps);
    delete from step_ready where step_id = any(steps);
    delete from step_held where step_id = any(steps);
    delete from adapter_flight where step_id = any(steps);
    -- A step and its waiver name each other, and a waiver its proposal: one statement.
    with gone_steps as (delete from step where id = any(steps) returning id),
         gone_waivers as (delete from waiver where step_id = any(steps) returning id)
    delete from proposal where step_id = any(steps);
    delete from status_projection where workflow_id = any(ids);
    delete from workflow where id = any(ids);
    get diagnostics removed = row_count;
    perform set_config('z29c.archiving', 'off', true);
    return removed;
end
$$;

