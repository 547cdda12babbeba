-- Operator sessions (tower-sessions' PostgreSQL store). Created here, with the rest of the
-- schema, rather than by the store at run time; the layout is the store's own.
create schema if not exists tower_sessions;

create table if not exists tower_sessions.session (
    id          text primary key not null,
    data        bytea not null,
    expiry_date timestamptz not null
);
