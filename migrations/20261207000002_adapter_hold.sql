-- An operator's hold on an adapter (docs/DESIGN.md §20): while it stands, no new request leaves
-- for the adapter from any worker; claimed steps wait `held`, and its lookups wait too unless
-- the hold lets them go. Who held it, when and why stay on the row until it is resumed; both
-- are in the audit log.
alter table adapter
    add column held_at timestamptz,
    add column held_by text,
    add column held_reason text,
    add column hold_lookups boolean not null default true,
    add constraint adapter_hold_is_complete
        check ((held_at is null) = (held_by is null) and (held_at is null) = (held_reason is null));
