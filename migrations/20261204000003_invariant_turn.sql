-- The workers' periodic invariant check reads every step. One pass per interval across every
-- worker process is enough (a violation is recorded once, whoever finds it): the worker that
-- moves this single row's time forward takes the turn, the others skip (docs/DESIGN.md §11).
create table invariant_turn (
    only_row   boolean primary key default true check (only_row),
    checked_at timestamptz not null
);
