-- Z29C's own truth starts with the durable user intent: one row per workflow.
create type workflow_state as enum ('pending', 'running', 'needs_review', 'completed', 'cancelled');

create table workflow (
    id                 uuid primary key,
    -- Creation is idempotent on this client-supplied key.
    creation_key       text not null unique check (length(creation_key) between 1 and 200),
    definition_name    text not null,
    definition_version integer not null check (definition_version > 0),
    -- The normalized canonical input and the sha256 of it, both immutable once recorded.
    input              jsonb not null,
    input_digest       text not null check (input_digest ~ '^sha256:[0-9a-f]{64}$'),
    state              workflow_state not null default 'pending',
    -- Bumped by every transition; events carry it so consumers can detect gaps.
    revision           bigint not null default 1,
    created_at         timestamptz not null default now(),
    updated_at         timestamptz not null default now()
);

create index workflow_state_idx on workflow (state);
