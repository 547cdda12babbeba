-- The claim queue kept a row for every step that left `ready` or `outcome_unknown` by a path
-- other than a claim (an operator's action, a cancel, a replacement): each claim walked past all
-- of them, oldest first, with a probe of their step each (docs/DESIGN.md §4). A step that stops
-- being claimable now leaves the queue in the statement that changes it, whatever the path; the
-- claim's take no longer dequeues on its own.
create or replace function step_changed() returns trigger language plpgsql as $$
begin
    if tg_op = 'INSERT' then
        insert into step_state_delta (logical, state, n)
        select logical, state, count(*) from new_steps group by logical, state;
    elsif tg_op = 'DELETE' then
        insert into step_state_delta (logical, state, n)
        select logical, state, -count(*) from old_steps group by logical, state;
        delete from step_ready where step_id = any(array(select id from old_steps));
    else
        insert into step_state_delta (logical, state, n)
        select logical, state, sum(n) from (
            select logical, state, 1 as n from new_steps
            union all select logical, state, -1 from old_steps) d
        group by logical, state having sum(n) <> 0;
        -- By key: the queue is probed for each step that stopped being claimable, never scanned.
        delete from step_ready
        where step_id = any(array(select id from new_steps
                                  where state not in ('ready', 'outcome_unknown')
                                     or lease_holder is not null));
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

-- The rows left behind so far.
delete from step_ready q
where not exists (select 1 from step s where s.id = q.step_id
                  and s.state in ('ready', 'outcome_unknown') and s.lease_holder is null);
