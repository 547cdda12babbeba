-- Z29C's own truth: steps, attempts, request identities, observations, receipts and everything a
-- person adds. Constraints make the impossible states unrepresentable; triggers keep the
-- append-only records append-only.

create type step_state as enum (
    'blocked', 'ready', 'running', 'invoking', 'outcome_unknown', 'review_required',
    'succeeded', 'waived', 'rejected', 'cancelled'
);
create type step_kind as enum ('pure', 'external', 'compensation');
create type attempt_outcome as enum ('rejected', 'failed_before_effect', 'outcome_unknown', 'succeeded');
create type receipt_method as enum ('direct_response', 'idempotent_replay', 'status_query', 'manual_evidence');
create type role as enum ('viewer', 'operator', 'approver');
create type operator_action as enum (
    'check_destination', 'retry_same_key', 'attach_evidence', 'waive',
    'authorize_another_attempt', 'cancel', 'replace', 'resolve_incident'
);
create type incident_kind as enum ('duplicate_effect', 'digest_conflict');
create type duplicate_disposition as enum ('withdrawal_requested', 'accepted_unresolved');

-- Adapters Z29C may call, with the contract their suite verified. Steps name them.
create table adapter (
    name              text primary key check (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    base_url          text not null,
    contract          jsonb not null,
    contract_version  integer not null check (contract_version > 0),
    verified_at       timestamptz,
    created_at        timestamptz not null default now()
);

create table step (
    id                 uuid primary key,
    workflow_id        uuid not null references workflow (id),
    logical            text not null,
    definition_version integer not null check (definition_version > 0),
    -- 0 for the step the definition names; n for its n-th explicit replacement.
    generation         integer not null default 0 check (generation >= 0),
    kind               step_kind not null,
    adapter            text references adapter (name),
    state              step_state not null,
    -- Logical names of the steps whose receipts this one needs, and the receipt fields it reads.
    depends_on         text[] not null default '{}',
    required_fields    text[] not null default '{}',
    accepts_waiver     boolean not null default false,
    -- Pure steps record their result here; external steps point at their receipt.
    output             jsonb,
    receipt_id         uuid,
    waiver_id          uuid,
    request_key        text,
    lease_holder       text,
    lease_expires_at   timestamptz,
    attempt_count      integer not null default 0,
    replaces_step_id   uuid references step (id),
    -- When the engine should look at the step again (retry, query, lease expiry).
    run_after          timestamptz not null default now(),
    unknown_since      timestamptz,
    created_at         timestamptz not null default now(),
    updated_at         timestamptz not null default now(),
    unique (workflow_id, logical, definition_version, generation),
    constraint external_step_names_its_adapter
        check ((kind = 'pure') = (adapter is null)),
    constraint invoking_step_has_request_key
        check (state not in ('invoking', 'outcome_unknown') or request_key is not null),
    constraint leased_step_has_lease
        check (state not in ('running', 'invoking') or (lease_holder is not null and lease_expires_at is not null)),
    constraint succeeded_step_has_receipt
        check (state <> 'succeeded' or (kind = 'pure' and output is not null) or (kind <> 'pure' and receipt_id is not null)),
    constraint waived_step_has_waiver
        check (state <> 'waived' or waiver_id is not null),
    constraint unknown_step_says_since_when
        check (state not in ('outcome_unknown', 'review_required') or unknown_since is not null)
);

create index step_claimable_idx on step (run_after) where state in ('ready', 'outcome_unknown');
create index step_lease_idx on step (lease_expires_at) where state in ('running', 'invoking');
create index step_workflow_idx on step (workflow_id);
create index step_review_idx on step (unknown_since, id) where state in ('outcome_unknown', 'review_required');
create index step_request_key_idx on step (request_key) where request_key is not null;

-- One logical external side effect, persisted with its digest before the first call.
create table external_request (
    request_key      text primary key,
    step_id          uuid not null references step (id),
    input_digest     text not null check (input_digest ~ '^sha256:[0-9a-f]{64}$'),
    -- The canonical request without secrets: what recovery regenerates and compares.
    summary          jsonb not null,
    adapter          text not null references adapter (name),
    contract_version integer not null,
    replaces_key     text references external_request (request_key),
    prepared_at      timestamptz not null default now(),
    first_sent_at    timestamptz,
    last_sent_at     timestamptz
);

create table operator_authorization (
    id                          uuid primary key,
    step_id                     uuid not null references step (id),
    author                      text not null,
    reason                      text not null check (length(trim(reason)) > 0),
    acknowledged_duplicate_risk boolean not null check (acknowledged_duplicate_risk),
    created_at                  timestamptz not null default now(),
    consumed_at                 timestamptz
);

create table attempt (
    id               uuid primary key,
    step_id          uuid not null references step (id),
    number           integer not null check (number > 0),
    worker           text not null,
    lease_expires_at timestamptz not null,
    started_at       timestamptz not null default now(),
    -- When the adapter call began (checkpoint 3 committed); null if it never did.
    invoked_at       timestamptz,
    ended_at         timestamptz,
    outcome          attempt_outcome,
    observation      jsonb,
    -- Set when an operator authorized this attempt under an opaque adapter.
    authorization_id uuid references operator_authorization (id),
    unique (step_id, number),
    constraint ended_attempt_has_outcome check ((ended_at is null) = (outcome is null))
);

create index attempt_step_idx on attempt (step_id, number);

-- Everything seen at the boundary: transport facts, lookups, compensation answers.
create table observation (
    id          bigint generated always as identity primary key,
    step_id     uuid not null references step (id),
    attempt_id  uuid references attempt (id),
    request_key text,
    kind        text not null check (kind in ('transport', 'lookup', 'compensation')),
    body        jsonb not null,
    observed_at timestamptz not null default now()
);

create index observation_step_idx on observation (step_id, id);

create table receipt (
    id                 uuid primary key,
    step_id            uuid not null unique references step (id),
    workflow_id        uuid not null references workflow (id),
    definition_version integer not null,
    input_digest       text not null,
    request_key        text not null references external_request (request_key),
    adapter            text not null,
    contract_version   integer not null,
    external_reference text not null,
    completion_state   text not null,
    method             receipt_method not null,
    observed_at        timestamptz not null,
    result_summary     jsonb not null default '{}' check (octet_length(result_summary::text) <= 4096),
    author             text,
    evidence           text,
    reason             text,
    created_at         timestamptz not null default now(),
    constraint manual_receipt_names_author_evidence_reason
        check (method <> 'manual_evidence' or (author is not null and evidence is not null and reason is not null))
);

create index receipt_external_reference_idx on receipt (external_reference);

create table waiver (
    id                   uuid primary key,
    step_id              uuid not null unique references step (id),
    author               text not null,
    reason               text not null check (length(trim(reason)) > 0),
    residual_uncertainty text not null check (length(trim(residual_uncertainty)) > 0),
    created_at           timestamptz not null default now()
);

alter table step add constraint step_receipt_fk foreign key (receipt_id) references receipt (id);
alter table step add constraint step_waiver_fk foreign key (waiver_id) references waiver (id);

create table integrity_incident (
    id                  uuid primary key,
    step_id             uuid not null references step (id),
    kind                incident_kind not null,
    opened_at           timestamptz not null default now(),
    canonical_reference text,
    disposition         duplicate_disposition,
    resolved_by         text,
    resolved_at         timestamptz,
    resolution_reason   text,
    constraint resolved_incident_is_complete
        check ((resolved_at is null) = (resolved_by is null)
           and (resolved_at is null or (canonical_reference is not null and disposition is not null and resolution_reason is not null)))
);

create unique index integrity_incident_open_idx on integrity_incident (step_id, kind) where resolved_at is null;

-- Every external reference an incident concerns.
create table incident_reference (
    incident_id        uuid not null references integrity_incident (id),
    external_reference text not null,
    request_key        text,
    evidence           jsonb not null default '{}',
    observed_at        timestamptz not null default now(),
    primary key (incident_id, external_reference)
);

create index incident_reference_external_idx on incident_reference (external_reference);

-- A compensation step counteracts one effect; the original receipt stays.
create table compensation_link (
    compensation_step_id uuid primary key references step (id),
    original_step_id     uuid not null references step (id),
    external_reference   text not null,
    incident_id          uuid references integrity_incident (id)
);

-- Authority is checked just before the boundary; the decision is recorded, never a credential.
create table authority_suspension (
    scope      text not null check (scope in ('adapter', 'subject')),
    value      text not null,
    reason     text not null,
    created_at timestamptz not null default now(),
    primary key (scope, value)
);

create table authority_decision (
    id         bigint generated always as identity primary key,
    step_id    uuid not null references step (id),
    attempt_id uuid not null references attempt (id),
    granted    boolean not null,
    scope      jsonb not null,
    reason     text not null,
    decided_at timestamptz not null default now()
);

create table outbox (
    id           bigint generated always as identity primary key,
    event_id     uuid not null unique,
    workflow_id  uuid not null references workflow (id),
    revision     bigint not null,
    kind         text not null,
    payload      jsonb not null,
    created_at   timestamptz not null default now(),
    published_at timestamptz
);

create index outbox_unpublished_idx on outbox (id) where published_at is null;

create table inbox (
    consumer     text not null,
    event_id     uuid not null,
    processed_at timestamptz not null default now(),
    primary key (consumer, event_id)
);

create table audit (
    id          bigint generated always as identity primary key,
    at          timestamptz not null default now(),
    actor       text not null,
    actor_kind  text not null check (actor_kind in ('operator', 'api', 'engine')),
    action      text not null,
    workflow_id uuid references workflow (id),
    step_id     uuid references step (id),
    reason      text,
    details     jsonb not null default '{}'
);

create index audit_at_idx on audit (at desc, id desc);
create index audit_step_idx on audit (step_id, id);

create table invariant_violation (
    id          bigint generated always as identity primary key,
    kind        text not null,
    subject     text not null,
    evidence    jsonb not null,
    detected_at timestamptz not null default now(),
    unique (kind, subject)
);

create table operator (
    id            uuid primary key,
    username      text not null unique check (username ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    password_hash text not null,
    role          role not null,
    created_at    timestamptz not null default now(),
    disabled_at   timestamptz
);

create table api_token (
    id         uuid primary key,
    name       text not null,
    token_hash text not null unique,
    created_at timestamptz not null default now(),
    revoked_at timestamptz
);

-- Append-only records: an ended attempt, an observation, a receipt, an audit entry never change.
create function refuse_change() returns trigger language plpgsql as $$
begin
    raise exception '% rows are append-only', tg_table_name using errcode = 'Z29C1';
end
$$;

create function refuse_ended_attempt_change() returns trigger language plpgsql as $$
begin
    if old.ended_at is not null then
        raise exception 'attempt % has ended and is never updated', old.id using errcode = 'Z29C1';
    end if;
    return new;
end
$$;

create trigger attempt_is_final_once_ended before update on attempt
    for each row execute function refuse_ended_attempt_change();
create trigger observation_is_append_only before update or delete on observation
    for each row execute function refuse_change();
create trigger receipt_is_append_only before update or delete on receipt
    for each row execute function refuse_change();
create trigger audit_is_append_only before update or delete on audit
    for each row execute function refuse_change();

create function refuse_digest_change() returns trigger language plpgsql as $$
begin
    if new.input_digest <> old.input_digest then
        raise exception 'request key % is bound to digest %; a new digest needs a replacement step',
            old.request_key, old.input_digest using errcode = 'Z29C2';
    end if;
    return new;
end
$$;

create trigger request_digest_is_immutable before update on external_request
    for each row execute function refuse_digest_change();
