-- A sketch of a leaner schema for the same protocol (README Performance, "What would take it
-- further"), for pgbench only: the request identity, the current attempt's start and the
-- receipt live on the step's row; the claim queue is a partial index on it; an attempt is one
-- append-only row written when it ends. Nothing else the engine keeps is here (definitions,
-- adapters, audit, counts, projections), just as the pipeline's prototype leaves its consumers out.
create table workflow (
    id         uuid primary key,
    state      text not null,
    revision   bigint not null,
    updated_at timestamptz not null default now()
) with (fillfactor = 80);

create table step (
    id             uuid primary key,
    workflow_id    uuid not null,
    logical        text not null,
    state          text not null,
    depends_on     text[] not null default '{}',
    -- The request identity, bound before the send (checkpoint 3 commits it with the claim).
    request_key    text,
    request_digest text,
    attempt_count  int not null default 0,
    authority      jsonb,
    invoked_at     timestamptz,
    lease_id       uuid,
    lease_holder   text,
    run_after      timestamptz not null default now(),
    output         jsonb,
    -- The receipt, with the observation that accepted it.
    receipt        jsonb,
    unique (workflow_id, logical)
) with (fillfactor = 70);

-- The claim queue: only ready steps have an entry.
create index step_due_idx on step (run_after) where state = 'ready';

create table attempt (
    step_id        uuid not null,
    number         int not null,
    request_key    text not null,
    request_digest text not null,
    authority      jsonb not null,
    started_at     timestamptz not null,
    ended_at       timestamptz not null,
    outcome        text not null,
    observation    jsonb not null,
    primary key (step_id, number)
);

create table lease (
    id         uuid primary key,
    holder     text not null,
    expires_at timestamptz not null
);

create table outbox (
    txid        bigint not null default (pg_current_xact_id()::text::bigint),
    id          bigint generated always as identity,
    workflow_id uuid not null,
    revision    bigint not null,
    kind        text not null,
    payload     jsonb not null,
    primary key (txid, id)
);
