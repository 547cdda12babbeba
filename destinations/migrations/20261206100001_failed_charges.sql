-- A declined charge is kept as a charge whose status is `failed`, under the request's metadata,
-- as Stripe keeps it (PAYMENTS.md): a search or a list finds it beside the succeeded ones, so a
-- lookup that does not read the status counts a decline as a payment.
alter table destination.charge
    add column status       text not null default 'succeeded' check (status in ('succeeded', 'failed')),
    add column failure_code text check (length(failure_code) between 1 and 100),
    add constraint failed_charge_says_why check ((status = 'failed') = (failure_code is not null));

insert into destination.charge (destination, id, amount, currency, customer, metadata,
                                idempotency_key, created_at, status, failure_code)
select d.destination, 'ch_' || substr(md5(d.number::text || d.destination || random()::text), 1, 24),
       d.amount, d.currency, d.customer, d.metadata, d.idempotency_key, d.declined_at,
       'failed', d.decline_code
from destination.charge_decline d
order by d.number;

drop table destination.charge_decline;

-- The list of a customer's charges, in either order.
create index charge_customer_idx on destination.charge (destination, customer, number);
