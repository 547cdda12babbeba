-- Operators pause a workflow (docs/DESIGN.md §20): until it is resumed no step of it starts;
-- its claimed steps wait held, as under an adapter's hold.
alter table workflow
    add column paused_at timestamptz,
    add column paused_by text,
    add column paused_reason text;

-- A paused workflow's pure steps wait held too, and they name no adapter.
alter table step_held alter column adapter drop not null;

-- The paused workflows, for /metrics and the overview: a handful among millions.
create index workflow_paused_idx on workflow (paused_at) where paused_at is not null;
