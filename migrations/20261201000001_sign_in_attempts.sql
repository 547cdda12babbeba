-- Sign-in throttling (engine::operators::sign_in): every attempt, kept in the database so that
-- several server processes agree on how many failures a name or an address has had.
create table sign_in_attempt (
    id        bigint generated always as identity primary key,
    -- As typed (trimmed, at most 64 characters): unknown names are throttled like known ones.
    username  text not null check (char_length(username) <= 64),
    -- The client's IP address, or 'unknown' when the server was not told it.
    address   text not null check (char_length(address) <= 64),
    at        timestamptz not null default now(),
    -- Recorded as a failure when the attempt arrives; set once its password has matched.
    succeeded boolean not null default false
);

-- "Recent failures for this name" and "for this address".
create index sign_in_attempt_username_idx on sign_in_attempt (username, at) where not succeeded;
create index sign_in_attempt_address_idx on sign_in_attempt (address, at) where not succeeded;

-- The key that signs the sign-in form's token for visitors who have no session yet (one row,
-- made by the first server process that needs it, shared by every other).
create table sign_in_key (
    id         boolean primary key default true check (id),
    key        bytea not null check (octet_length(key) = 32),
    created_at timestamptz not null default now()
);
