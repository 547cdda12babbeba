-- The payments destination (PAYMENTS.md), shaped like Stripe's API. Its effects are charges and
-- refunds; a declined attempt is recorded too, but it is not an effect.
create table destination.charge (
    number          bigint generated always as identity primary key,
    destination     text not null check (length(destination) between 1 and 100),
    -- `ch_` and 24 random letters and digits, unique across every destination.
    id              text not null unique check (id ~ '^ch_[0-9A-Za-z]{24}$'),
    amount          bigint not null check (amount between 1 and 99999999),
    currency        text not null check (currency ~ '^[a-z]{3}$'),
    description     text check (length(description) <= 1000),
    customer        text check (length(customer) between 1 and 200),
    metadata        jsonb not null check (jsonb_typeof(metadata) = 'object'),
    -- The Idempotency-Key header as presented, deduplicating or not (honours_idempotency).
    idempotency_key text check (length(idempotency_key) between 1 and 255),
    created_at      timestamptz not null,
    -- Lets a refund name its charge together with the destination that owns it.
    constraint charge_destination_number_unique unique (destination, number)
);

-- The search by metadata, newest first.
create index charge_metadata_idx on destination.charge using gin (metadata jsonb_path_ops);
create index charge_destination_idx on destination.charge (destination, number);

-- A declined attempt: answered 402, no money moved.
create table destination.charge_decline (
    number          bigint generated always as identity primary key,
    destination     text not null check (length(destination) between 1 and 100),
    amount          bigint not null,
    currency        text not null,
    customer        text,
    metadata        jsonb not null check (jsonb_typeof(metadata) = 'object'),
    idempotency_key text,
    decline_code    text not null check (length(decline_code) between 1 and 100),
    declined_at     timestamptz not null
);

-- A refund (the charge's withdrawal) is itself an effect with its own id; a charge is refunded
-- at most once, whatever key later requests carry.
create table destination.refund (
    number          bigint generated always as identity primary key,
    destination     text not null check (length(destination) between 1 and 100),
    id              text not null unique check (id ~ '^re_[0-9A-Za-z]{24}$'),
    charge_number   bigint not null unique,
    amount          bigint not null check (amount > 0),
    reason          text check (reason in ('duplicate', 'fraudulent', 'requested_by_customer')),
    idempotency_key text check (length(idempotency_key) between 1 and 255),
    created_at      timestamptz not null,
    constraint refund_charge_fk foreign key (destination, charge_number)
        references destination.charge (destination, number)
);

-- The first answer given under an Idempotency-Key, replayed byte for byte to a later request
-- with the same key and the same parameters until the retention has passed. Requests with one
-- key are serialised by a transaction-scoped advisory lock, so concurrent ones make one effect.
create table destination.payment_idempotency (
    destination     text not null check (length(destination) between 1 and 100),
    idempotency_key text not null check (length(idempotency_key) between 1 and 255),
    -- sha256 of the method, the path and the sorted parameters.
    fingerprint     text not null check (fingerprint ~ '^[0-9a-f]{64}$'),
    status          smallint not null check (status between 100 and 599),
    body            text not null,
    created_at      timestamptz not null,
    primary key (destination, idempotency_key)
);
