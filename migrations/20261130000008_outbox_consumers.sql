-- Events that concern no single workflow (alerts) carry no workflow and no revision.
alter table outbox alter column workflow_id drop not null;
alter table outbox alter column revision drop not null;
alter table outbox add constraint workflow_event_has_revision
    check ((workflow_id is null) = (revision is null));

-- Publishers wake on this instead of polling (polling stays as the fallback).
create function notify_outbox() returns trigger language plpgsql as $$
begin
    perform pg_notify('z29c_outbox', '');
    return null;
end
$$;
create trigger outbox_wakes_publishers after insert on outbox
    for each statement execute function notify_outbox();

-- The status projection: what `/status/{id}` and the API read, rebuilt from durable state.
create table status_projection (
    workflow_id uuid primary key references workflow (id),
    revision    bigint not null,
    state       workflow_state not null,
    sentence    text not null,
    updated_at  timestamptz not null default now()
);

-- The metrics projection: monotonic counters by name and label set.
create table metric_counter (
    name   text not null,
    labels text not null default '',
    value  bigint not null default 0,
    primary key (name, labels)
);

-- Each consumer's last applied revision per workflow; a gap means repair, not advancement.
create table consumer_revision (
    consumer    text not null,
    workflow_id uuid not null references workflow (id),
    revision    bigint not null,
    primary key (consumer, workflow_id)
);

-- Notification candidates: a customer could be told; re-projected before anything is sent.
create table notification_candidate (
    id          bigint generated always as identity primary key,
    workflow_id uuid not null references workflow (id),
    revision    bigint not null,
    state       workflow_state not null,
    sentence    text not null,
    created_at  timestamptz not null default now(),
    sent_at     timestamptz,
    -- Why it was not sent: the workflow moved on before it could be.
    superseded_at timestamptz,
    unique (workflow_id, revision)
);

create index notification_candidate_due_idx on notification_candidate (id)
    where sent_at is null and superseded_at is null;

-- Alerts the engine raised; one open alert per rule and subject.
create table alert (
    id          uuid primary key,
    rule        text not null,
    subject     text not null,
    details     jsonb not null default '{}',
    opened_at   timestamptz not null default now(),
    resolved_at timestamptz
);

create unique index alert_open_idx on alert (rule, subject) where resolved_at is null;

-- The alert webhook's own queue, filled by its outbox consumer: delivered with the event id
-- as the idempotency key, marked once the receiver accepted it.
create table webhook_delivery (
    event_id     uuid primary key,
    payload      jsonb not null,
    attempts     integer not null default 0,
    last_error   text,
    created_at   timestamptz not null default now(),
    delivered_at timestamptz
);

create index webhook_delivery_due_idx on webhook_delivery (created_at) where delivered_at is null;
