-- A workflow a restored database holds hot again while the archive keeps a later copy of it
-- (docs/DESIGN.md §21, "After a restore"): the backup was taken before the archiver moved it, so
-- the copy may know what the database forgot, such as the receipt of a call the backup saw in
-- flight. Reconciling notes where the copy lives; the console and `z29c archive show` put it
-- beside what the database says. The note leaves with the workflow when it is archived again.
create table archived_copy (
    workflow_id   uuid primary key references workflow (id) on delete cascade,
    archived_at   timestamptz not null,
    archive_file  text not null,
    member_offset bigint not null,
    member_length bigint not null,
    noted_at      timestamptz not null default now()
);

-- The role Z29C runs as reads the notes; only reconciling, as the schema's owner, writes them.
create or replace function z29c_grant_application(app name) returns void language plpgsql as $$
begin
    execute format('grant usage on schema public, tower_sessions to %I', app);
    execute format('grant select, insert, update, delete on all tables in schema public to %I', app);
    execute format('grant select, insert, update, delete on all tables in schema tower_sessions to %I', app);
    execute format('grant usage, select on all sequences in schema public to %I', app);
    execute format('revoke update, delete, truncate on audit, observation, receipt, attempt_start,
                    outbox, definition, adapter_version from %I', app);
    execute format('revoke insert, update, delete, truncate on archived_workflow, archived_copy
                    from %I', app);
    execute format('revoke insert, update, delete, truncate on _sqlx_migrations from %I', app);
end
$$;
