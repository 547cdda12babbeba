-- A replacement step may run on corrected input; every other step reads its workflow's input.
alter table step add column input jsonb;
alter table step add column input_digest text
    check (input_digest is null or input_digest ~ '^sha256:[0-9a-f]{64}$');
alter table step add constraint corrected_input_has_digest
    check ((input is null) = (input_digest is null));

-- A compensation step names the effect it withdraws; the worker reads it from here.
create index compensation_link_original_idx on compensation_link (original_step_id);

-- The audit page filters by actor and action, newest first.
create index audit_actor_idx on audit (actor, at desc, id desc);
create index audit_action_idx on audit (action, at desc, id desc);
