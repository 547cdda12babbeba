-- Retention and the archive (docs/DESIGN.md §21). A settled workflow older than its
-- definition's retention (or the deployment's) leaves the hot tables: its whole evidence is
-- written to the archive, durably, and then its rows are deleted in one transaction that
-- leaves a tombstone behind. The tombstone keeps what must never be forgotten or reused: the
-- creation key (still taken), the request keys and external references (still searchable),
-- and where the record lives.

-- A definition's own retention for settled workflows; null: the deployment's default.
alter table definition add column retain_settled interval check (retain_settled >= interval '0');

create table archived_workflow (
    id                  uuid primary key,
    creation_key        text not null unique,
    definition_name     text not null,
    definition_version  integer not null,
    state               workflow_state not null check (state in ('completed', 'cancelled')),
    input_digest        text not null,
    created_at          timestamptz not null,
    settled_at          timestamptz not null,
    archived_at         timestamptz not null default now(),
    request_keys        text[] not null,
    external_references text[] not null,
    -- Where the record lives: a day file of the archive, and the gzip member holding it.
    archive_file        text not null,
    member_offset       bigint not null check (member_offset >= 0),
    member_length       bigint not null check (member_length > 0)
);
create index archived_workflow_request_keys_idx on archived_workflow using gin (request_keys);
create index archived_workflow_external_references_idx on archived_workflow using gin (external_references);
create index archived_workflow_archived_at_idx on archived_workflow (archived_at);

-- When each workflow settled (completed or cancelled), for the archiver to walk oldest first.
-- Kept beside the workflow, not as an index on its `updated_at`: that column changes with every
-- update, and an index on it would make every update of a workflow a non-HOT one.
create table settled_workflow (
    workflow_id uuid primary key,
    settled_at  timestamptz not null
);
create index settled_workflow_at_idx on settled_workflow (settled_at, workflow_id);
insert into settled_workflow
select id, updated_at from workflow where state in ('completed', 'cancelled');

create or replace function count_workflows() returns trigger language plpgsql as $$
begin
    if tg_op = 'INSERT' then
        insert into workflow_state_delta (state, n)
        select state, count(*) from new_workflows group by state;
        insert into settled_workflow (workflow_id, settled_at)
        select id, updated_at from new_workflows where state in ('completed', 'cancelled');
    elsif tg_op = 'DELETE' then
        insert into workflow_state_delta (state, n)
        select state, -count(*) from old_workflows group by state;
    else
        insert into workflow_state_delta (state, n)
        select state, sum(n) from (
            select state, 1 as n from new_workflows
            union all select state, -1 from old_workflows) d
        group by state having sum(n) <> 0;
        insert into settled_workflow (workflow_id, settled_at)
        select n.id, n.updated_at from new_workflows n join old_workflows o on o.id = n.id
        where n.state in ('completed', 'cancelled') and o.state not in ('completed', 'cancelled')
        on conflict (workflow_id) do update set settled_at = excluded.settled_at;
    end if;
    return null;
end
$$;
-- Audit entries naming a workflow leave with it; the rest follow the audit retention.
create index audit_workflow_idx on audit (workflow_id) where workflow_id is not null;
create index audit_unattached_at_idx on audit (at, id) where workflow_id is null and step_id is null;
-- A step's requests (a retry under a new key adds one) leave with the step.
create index external_request_step_idx on external_request (step_id);
-- Removing a step checks every row that references it, and removing a waiver every step: each
-- check reads an index, not the table. These tables grow only by people's actions (a waiver
-- is rare), so the engine's writes do not pay for them.
create index step_waiver_idx on step (waiver_id) where waiver_id is not null;
create index integrity_incident_step_idx on integrity_incident (step_id);
create index operator_authorization_step_idx on operator_authorization (step_id);
create index proposal_step_idx on proposal (step_id);
create index bulk_item_step_idx on bulk_item (step_id);

-- What the archiver has done, across processes: one row.
create table archive_progress (
    only_row        boolean primary key default true check (only_row),
    workflows       bigint not null default 0,
    audit_entries   bigint not null default 0,
    events          bigint not null default 0,
    bytes           bigint not null default 0,
    last_turn_at    timestamptz,
    last_turn_secs  double precision not null default 0
);
insert into archive_progress default values;

-- Append-only, except for the archiver: its functions below set `z29c.archiving` for their
-- own statements, and nothing else may (the application role holds no DELETE on these).
create or replace function refuse_change() returns trigger language plpgsql as $$
begin
    if tg_op = 'DELETE' and current_setting('z29c.archiving', true) = 'on'
       and tg_table_name in ('audit', 'observation', 'receipt', 'attempt_start', 'outbox') then
        return old;
    end if;
    raise exception '% rows are append-only', tg_table_name using errcode = 'Z29C1';
end
$$;

-- Archives settled workflows whose records are durable in the archive at `file` (the member
-- at `member_offset`, `member_length` bytes): writes their tombstones, then deletes every row
-- of theirs. Each must be settled and hold no lease nor wait for a person. Runs as the
-- schema's owner: the role Z29C runs as holds no DELETE on the append-only tables and cannot
-- write a tombstone itself, so this is its only way to remove evidence, and it always leaves
-- a tombstone naming where the record is. Returns how many workflows it removed.
create function z29c_archive_workflows(ids uuid[], file text, member_offset bigint, member_length bigint)
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
           w.input_digest, w.created_at, w.updated_at,
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
    delete from settled_workflow where workflow_id = any(ids);
    delete from workflow where id = any(ids);
    get diagnostics removed = row_count;
    perform set_config('z29c.archiving', 'off', true);
    return removed;
end
$$;

-- Deletes audit entries naming no workflow or step, once archived.
create function z29c_remove_archived_audit(ids bigint[]) returns bigint
language plpgsql security definer set search_path = public, pg_temp as $$
declare
    removed bigint;
begin
    perform set_config('z29c.archiving', 'on', true);
    delete from audit where id = any(ids) and workflow_id is null and step_id is null;
    get diagnostics removed = row_count;
    perform set_config('z29c.archiving', 'off', true);
    return removed;
end
$$;

-- Deletes up to `most` events the publisher has handed to every consumer, created before
-- `before`. Events are payloads the consumers already hold: nothing is archived.
create function z29c_prune_outbox(before timestamptz, most integer) returns bigint
language plpgsql security definer set search_path = public, pg_temp as $$
declare
    removed bigint;
begin
    perform set_config('z29c.archiving', 'on', true);
    with published as (select txid, id from outbox_cursor where reader = 'publisher'),
         passed as (select o.txid, o.id from outbox o, published p
                    where (o.txid, o.id) <= (p.txid, p.id) and o.created_at < before
                    order by o.txid, o.id limit most)
    delete from outbox o using passed
    where (o.txid, o.id) = (passed.txid, passed.id);
    get diagnostics removed = row_count;
    perform set_config('z29c.archiving', 'off', true);
    return removed;
end
$$;

-- The role Z29C runs as reads tombstones; only the archiver's function above writes them.
create or replace function z29c_grant_application(app name) returns void language plpgsql as $$
begin
    execute format('grant usage on schema public, tower_sessions to %I', app);
    execute format('grant select, insert, update, delete on all tables in schema public to %I', app);
    execute format('grant select, insert, update, delete on all tables in schema tower_sessions to %I', app);
    execute format('grant usage, select on all sequences in schema public to %I', app);
    execute format('revoke update, delete, truncate on audit, observation, receipt, attempt_start,
                    outbox, definition, adapter_version from %I', app);
    execute format('revoke insert, update, delete, truncate on archived_workflow from %I', app);
    execute format('revoke insert, update, delete, truncate on _sqlx_migrations from %I', app);
end
$$;
