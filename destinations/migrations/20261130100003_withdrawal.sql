-- A withdrawal (compensation) is itself a recorded side effect with its own reference.
create table destination.withdrawal (
    number               bigint generated always as identity primary key,
    withdrawal_reference text not null generated always as ('w-' || number) stored unique,
    destination          text not null check (length(destination) between 1 and 100),
    -- A delivery is withdrawn at most once, whatever key later requests carry.
    delivery_number      bigint not null unique,
    idempotency_key      text not null check (length(idempotency_key) between 1 and 200),
    withdrawn_at         timestamptz not null,
    constraint withdrawal_idempotency_key_unique unique (destination, idempotency_key),
    constraint withdrawal_delivery_fk foreign key (destination, delivery_number)
        references destination.delivery (destination, number)
);
