-- The periodic invariant check reads every step, attempt and receipt: tens of seconds at 1M
-- workflows, longer than the default interval. The turn row keeps how long the last pass took,
-- and the next turn waits ten times that, so the check takes at most a tenth of one backend
-- however large the database grows (docs/DESIGN.md §11).
alter table invariant_turn add column pass_secs double precision not null default 0;
