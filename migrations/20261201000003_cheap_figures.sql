-- Figures that cost the same at 10k and 1M workflows (docs/DESIGN.md §11): what `/metrics` and
-- the overview read is kept as it changes, or served by a small partial index, never grouped
-- from every row at read time.

-- Attempts whose worker was lost after the request began: few, so counted from the index alone.
create index attempt_lost_during_call_idx on attempt (id)
    where observation ->> 'observed' = 'worker_lost' and observation ->> 'during_call' = 'true';

-- How many workflows are in each state, and how many steps of each logical name are in each
-- state. Writers only append a change to a *_delta table (a trigger, so no code path can forget
-- it, and an insert, so concurrent writers never wait on one another's counter row); a reader
-- folds the deltas into the *_count table (read::stats::fold_counts) and reads the sum of both.
create table workflow_state_count (
    state workflow_state primary key,
    n     bigint not null
);

create table workflow_state_delta (
    state workflow_state not null,
    n     integer not null
);

create table step_state_count (
    logical text not null,
    state   step_state not null,
    n       bigint not null,
    primary key (logical, state)
);

create table step_state_delta (
    logical text not null,
    state   step_state not null,
    n       integer not null
);

create function count_workflow_state() returns trigger language plpgsql as $$
begin
    if tg_op = 'INSERT' then
        insert into workflow_state_delta (state, n) values (new.state, 1);
    elsif tg_op = 'UPDATE' then
        insert into workflow_state_delta (state, n) values (old.state, -1), (new.state, 1);
    else
        insert into workflow_state_delta (state, n) values (old.state, -1);
    end if;
    return null;
end
$$;

create function count_step_state() returns trigger language plpgsql as $$
begin
    if tg_op = 'INSERT' then
        insert into step_state_delta (logical, state, n) values (new.logical, new.state, 1);
    elsif tg_op = 'UPDATE' then
        insert into step_state_delta (logical, state, n)
        values (old.logical, old.state, -1), (new.logical, new.state, 1);
    else
        insert into step_state_delta (logical, state, n) values (old.logical, old.state, -1);
    end if;
    return null;
end
$$;

-- The triggers first: their lock keeps writers out until this migration commits, so the counts
-- below see every row and no change is missed between the two.
create trigger workflow_state_counted after insert or delete on workflow
    for each row execute function count_workflow_state();
create trigger workflow_state_changed after update of state on workflow
    for each row when (old.state is distinct from new.state)
    execute function count_workflow_state();
create trigger step_state_counted after insert or delete on step
    for each row execute function count_step_state();
create trigger step_state_changed after update of state, logical on step
    for each row when (old.state is distinct from new.state or old.logical is distinct from new.logical)
    execute function count_step_state();

insert into workflow_state_count (state, n) select state, count(*) from workflow group by state;
insert into step_state_count (logical, state, n)
    select logical, state, count(*) from step group by logical, state;
