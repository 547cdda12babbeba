-- The review queue's counts, kept as steps change (docs/DESIGN.md §11), as the workflow and
-- step-state counts are: counting the queue from its index at each request cost a read that
-- grows with the queue (several thousand steps at 100 days of traffic). A step is in the queue
-- while `waiting` is set and no step replaces it, which is what `read::queue::queue` lists.
create table step_waiting_count (
    state   step_state not null,
    adapter text not null,
    n       bigint not null,
    primary key (state, adapter)
);

create table step_waiting_delta (
    state   step_state not null,
    adapter text not null,
    n       integer not null
);

-- The statement trigger that keeps the step counts and the claim queue, now also the queue's
-- counts. On the happy path no step waits, so the queue's part reads the transition tables and
-- writes nothing; the replacement lookups run only for waiting steps.
create or replace function step_changed() returns trigger language plpgsql as $$
begin
    if tg_op = 'INSERT' then
        insert into step_state_delta (logical, state, n)
        select logical, state, count(*) from new_steps group by logical, state;
        -- A replacement takes the step it replaces out of the queue.
        insert into step_waiting_delta (state, adapter, n)
        select state, adapter, sum(n) from (
            select waiting as state, coalesce(adapter, '') as adapter, 1 as n from new_steps
            where waiting is not null
            union all
            select o.waiting, coalesce(o.adapter, ''), -1 from new_steps r
            join step o on o.id = r.replaces_step_id
            where r.replaces_step_id is not null and o.waiting is not null) d
        group by state, adapter having sum(n) <> 0;
    elsif tg_op = 'DELETE' then
        insert into step_state_delta (logical, state, n)
        select logical, state, -count(*) from old_steps group by logical, state;
        -- A replaced step left the queue when its replacement arrived (which may go in this
        -- same statement, as the archiver deletes a workflow's steps together).
        insert into step_waiting_delta (state, adapter, n)
        select o.waiting, coalesce(o.adapter, ''), -count(*) from old_steps o
        where o.waiting is not null
          and not exists (select 1 from step r where r.replaces_step_id = o.id)
          and not exists (select 1 from old_steps r where r.replaces_step_id = o.id)
        group by 1, 2;
        delete from step_ready where step_id = any(array(select id from old_steps));
        delete from step_held where step_id = any(array(select id from old_steps));
    else
        insert into step_state_delta (logical, state, n)
        select logical, state, sum(n) from (
            select logical, state, 1 as n from new_steps
            union all select logical, state, -1 from old_steps) d
        group by logical, state having sum(n) <> 0;
        insert into step_waiting_delta (state, adapter, n)
        select state, adapter, sum(n) from (
            select id, waiting as state, coalesce(adapter, '') as adapter, 1 as n from new_steps
            where waiting is not null
            union all
            select id, waiting, coalesce(adapter, ''), -1 from old_steps where waiting is not null) d
        where not exists (select 1 from step r where r.replaces_step_id = d.id)
        group by state, adapter having sum(n) <> 0;
        -- By key: the queue is probed for each step that stopped being claimable, never scanned.
        delete from step_ready
        where step_id = any(array(select id from new_steps
                                  where state not in ('ready', 'outcome_unknown')
                                     or lease_holder is not null));
        delete from step_held
        where step_id = any(array(select n.id from new_steps n join old_steps o on o.id = n.id
                                  where o.state = 'held' and n.state <> 'held'));
    end if;
    if tg_op <> 'DELETE' then
        insert into step_ready (step_id, run_after)
        select id, run_after from new_steps
        where state in ('ready', 'outcome_unknown') and lease_holder is null
        on conflict (step_id) do update set run_after = excluded.run_after;
        insert into step_held (step_id, adapter)
        select id, adapter from new_steps where state = 'held'
        on conflict (step_id) do nothing;
    end if;
    return null;
end
$$;

-- Writers wait until this migration commits, so the count below sees every row and the
-- trigger every change after it.
lock table step in share mode;
insert into step_waiting_count (state, adapter, n)
select waiting, coalesce(adapter, ''), count(*) from step s
where waiting is not null and not exists (select 1 from step r where r.replaces_step_id = s.id)
group by 1, 2;
