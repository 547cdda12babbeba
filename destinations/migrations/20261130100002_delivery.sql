-- One row per accepted delivery: the effect itself, committed before any answer is sent.
-- Several destinations may share this table; each sees only rows carrying its own name.
create table destination.delivery (
    number             bigint generated always as identity primary key,
    -- The stable external reference handed to the client, e.g. `x-82`.
    external_reference text not null generated always as ('x-' || number) stored unique,
    destination        text not null check (length(destination) between 1 and 100),
    client_reference   text not null check (length(client_reference) between 1 and 200),
    -- Only the idempotent kind records the key; the others ignore it and store null, so
    -- the unique constraint (nulls distinct) deduplicates the idempotent kind alone.
    idempotency_key    text check (length(idempotency_key) between 1 and 200),
    digest             text not null check (digest ~ '^sha256:[0-9a-f]{64}$'),
    recipient          text not null check (length(recipient) between 1 and 200),
    summary            text not null check (length(summary) <= 2000),
    accepted_at        timestamptz not null,
    constraint delivery_idempotency_key_unique unique (destination, idempotency_key),
    -- Lets a withdrawal name its delivery together with the destination that owns it.
    constraint delivery_destination_number_unique unique (destination, number)
);

-- Status lookups by client reference (the queryable kind), earliest first.
create index delivery_client_reference_idx on destination.delivery (destination, client_reference, number);
