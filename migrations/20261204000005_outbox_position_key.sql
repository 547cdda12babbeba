-- An outbox event is indexed once, by its position (docs/DESIGN.md §10). Readers reach events
-- by (txid, id) and by nothing else; `id` (an identity) and `event_id` (a version 7 UUID minted
-- for the event) are unique by how they are made. The position becomes the primary key and the
-- two other indexes of this append-only, ever-growing table go: one index entry per event
-- written instead of three.
alter table outbox drop constraint outbox_event_id_key;
alter table outbox drop constraint outbox_pkey;
create unique index outbox_position_key on outbox (txid, id);
alter table outbox add constraint outbox_pkey primary key using index outbox_position_key;
drop index outbox_position_idx;
