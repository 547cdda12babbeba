-- Configuration is a privilege of its own (docs/DESIGN.md §15): a token changes definitions
-- and adapters only with the `configure` scope, which is never narrowed to one tenant's
-- creation keys; and a token may be limited to the adapters its workflows may call.
alter table api_token
    add column may_configure boolean not null default false,
    add column adapters      text[],
    add constraint api_token_configure_is_whole check (not may_configure or creation_key_prefix is null),
    add constraint api_token_adapters_listed check (adapters is null or cardinality(adapters) > 0);

-- A bulk run acts with its author's authority as it stands before each item (docs/DESIGN.md
-- §7): the token that started it, if a token did, and why and by whom a run was stopped.
alter table bulk_run
    add column author_token uuid references api_token (id),
    add column stopped_at   timestamptz,
    add column stopped_by   text,
    add column stop_reason  text,
    add constraint bulk_run_stop_is_whole check ((stopped_at is null) = (stopped_by is null)
                                                 and (stopped_at is null) = (stop_reason is null));

-- Failed sign-ins, counted per name and 15-minute window rather than one permanent audit row
-- each (docs/DESIGN.md §15): a flood leaves a count, and the counts are forgotten after 90 days.
create table sign_in_failure (
    username     text not null,
    window_start timestamptz not null,
    failures     integer not null check (failures > 0),
    throttled    integer not null check (throttled >= 0),
    last_address text not null,
    first_at     timestamptz not null default now(),
    last_at      timestamptz not null default now(),
    primary key (username, window_start)
);

create index sign_in_failure_last_idx on sign_in_failure (last_at);
