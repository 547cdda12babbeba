-- The webhook receiver (PAYMENTS.md): every POST with a valid signature is a new event, the
-- receiver deduplicates nothing.
create table destination.webhook_event (
    number      bigint generated always as identity primary key,
    destination text not null check (length(destination) between 1 and 100),
    -- `evt_` and 24 random letters and digits.
    id          text not null unique check (id ~ '^evt_[0-9A-Za-z]{24}$'),
    channel     text not null check (length(channel) between 1 and 100),
    -- The body's `subject` field, when it is a string: what fault scripts match.
    subject     text,
    -- `json`, not `jsonb`: the body exactly as it was signed.
    body        json not null,
    received_at timestamptz not null
);

create index webhook_event_destination_idx on destination.webhook_event (destination, number);
