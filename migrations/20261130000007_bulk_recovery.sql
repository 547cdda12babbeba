-- Bulk recovery: one action over the exact rows an operator previewed, at a set rate. Each
-- item carries the step version that was shown; a step that changed since is refused, and a
-- step that arrived later is not an item at all.
create table bulk_run (
    id            uuid primary key,
    author        text not null,
    author_role   role not null,
    action        operator_action not null,
    reason        text not null check (length(trim(reason)) > 0),
    -- What waivers in this run name as the residual uncertainty.
    residual_uncertainty text,
    rate_per_sec  integer not null check (rate_per_sec between 1 and 100),
    created_at    timestamptz not null default now(),
    finished_at   timestamptz
);

create table bulk_item (
    run_id       uuid not null references bulk_run (id),
    step_id      uuid not null references step (id),
    seen_version bigint not null,
    -- done | refused | failed; null while pending.
    outcome      text check (outcome in ('done', 'refused', 'failed')),
    message      text,
    done_at      timestamptz,
    primary key (run_id, step_id)
);

create index bulk_item_pending_idx on bulk_item (run_id) where outcome is null;
create index bulk_run_unfinished_idx on bulk_run (created_at) where finished_at is null;
