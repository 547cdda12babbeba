-- Consumers follow the outbox by position instead of recording every event they take
-- (docs/DESIGN.md §10). An event's position is (txid, id): the transaction that wrote it, then
-- its row. Every event of a transaction older than the oldest one still running is final (it
-- committed or never will), so the events below that horizon can be read in position order
-- exactly once, and one cursor per reader replaces an inbox row per event and consumer and the
-- `published_at` update per event.

-- The events written before this migration come before every later one (real transaction ids
-- start at 3): the published ones at 0, the unpublished ones after them at 1, each in id order.
alter table outbox add column txid bigint;
update outbox set txid = case when published_at is null then 1 else 0 end;
alter table outbox
    alter column txid set not null,
    alter column txid set default (pg_current_xact_id()::text::bigint);
create index outbox_position_idx on outbox (txid, id);

-- Where each reader stands: the publisher ('publisher': every consumer took everything up to
-- here) and each consumer (what it applied, in the transaction that applied it).
create table outbox_cursor (
    reader text primary key,
    txid   bigint not null,
    id     bigint not null
) with (fillfactor = 50);

-- The publisher stands past every published event. A consumer stands past the published ones
-- and, among the unpublished, up to its first one not in its inbox (or past them all). An
-- unpublished event it took beyond that point (an event with a lower id committed late inside a
-- batch that was never marked) is taken again: the status and notification consumers ignore it
-- by its revision, the counters would count it twice.
insert into outbox_cursor (reader, txid, id)
select 'publisher', 0, coalesce((select max(id) from outbox where published_at is not null), 0);
insert into outbox_cursor (reader, txid, id)
select consumers.consumer,
       case when exists (select 1 from outbox where published_at is null) then 1 else 0 end,
       coalesce((select min(o.id) - 1 from outbox o
                 where o.published_at is null
                   and not exists (select 1 from inbox i
                                   where i.consumer = consumers.consumer and i.event_id = o.event_id)),
                (select max(id) from outbox where published_at is null),
                (select max(id) from outbox), 0)
from (select distinct consumer from inbox) consumers;

alter table outbox drop column published_at;
drop table inbox;

-- An event, once written, is what every cursor past it was built on: never changed or removed.
create trigger outbox_is_append_only before update or delete on outbox
    for each statement execute function refuse_change();
