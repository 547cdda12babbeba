-- What the role Z29C runs as may do (docs/DESIGN.md §15), granted by the role that owns the
-- schema after every migration: read and write what the console, the API and the workers
-- write, append to the records that are never changed, and nothing more. It cannot TRUNCATE
-- any table, nor UPDATE or DELETE an audit entry, an observation, a receipt, an attempt, an
-- event, an applied definition or adapter version; it changes no schema. The private cluster
-- grants it to `z29c_app` by itself; a DATABASE_URL deployment names its migrator with
-- Z29C_MIGRATE_DATABASE_URL, or runs `select z29c_grant_application('ROLE')` as the owner.
create function z29c_grant_application(app name) returns void language plpgsql as $$
begin
    execute format('grant usage on schema public, tower_sessions to %I', app);
    execute format('grant select, insert, update, delete on all tables in schema public to %I', app);
    execute format('grant select, insert, update, delete on all tables in schema tower_sessions to %I', app);
    execute format('grant usage, select on all sequences in schema public to %I', app);
    execute format('revoke update, delete, truncate on audit, observation, receipt, attempt_start,
                    outbox, definition, adapter_version from %I', app);
    execute format('revoke insert, update, delete, truncate on _sqlx_migrations from %I', app);
end
$$;
