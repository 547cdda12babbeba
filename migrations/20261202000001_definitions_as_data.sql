-- Workflow definitions and adapters as data (docs/DESIGN.md §16): the files as applied, each
-- name and version immutable once stored.

create table definition (
    name       text not null check (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    version    integer not null check (version > 0),
    -- The file exactly as applied; the engine compiles it again when it first needs it.
    source     text not null check (octet_length(source) <= 1048576),
    digest     text not null check (digest ~ '^sha256:[0-9a-f]{64}$'),
    applied_by text not null,
    applied_at timestamptz not null default now(),
    primary key (name, version)
);

create trigger definition_is_immutable before update or delete on definition
    for each row execute function refuse_change();

-- Every version of every adapter file; `adapter` names the current one.
create table adapter_version (
    name       text not null references adapter (name),
    version    integer not null check (version > 0),
    source     text not null check (octet_length(source) <= 1048576),
    contract   jsonb not null,
    applied_by text not null,
    applied_at timestamptz not null default now(),
    primary key (name, version)
);

create trigger adapter_version_is_immutable before update or delete on adapter_version
    for each row execute function refuse_change();

-- The current version's file, and what its contract suite proved: a declared capability is
-- used by automatic recovery only once verified for this very version; a contradiction seen
-- in production demotes the adapter to review until it is verified again.
alter table adapter
    add column source           text,
    add column verified_version integer,
    add column verified_against text,
    add column demoted_at       timestamptz,
    add column demoted_reason   text;

-- Adapters registered before this version were verified by the suite `adapter add` runs.
update adapter set verified_version = contract_version where verified_at is not null;
