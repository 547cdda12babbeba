-- Workflows of document_delivery's shape, ready for their external `deliver` step: `render`
-- (pure) has succeeded, `deliver` is ready, `notify` waits for it. :workflows of them, in the
-- schema the database has (the one before the pipeline, or the one after it).
-- Today's schema keeps what the adapter file declared beside its trusted contract.
select exists (select 1 from information_schema.columns
               where table_name = 'adapter' and column_name = 'declared') as declared \gset
\if :declared
insert into adapter (name, base_url, contract, contract_version, declared)
values ('proto', 'http://127.0.0.1:9', '{}', 1, '{}') on conflict do nothing;
\else
insert into adapter (name, base_url, contract, contract_version)
values ('proto', 'http://127.0.0.1:9', '{}', 1) on conflict do nothing;
\endif

insert into workflow (id, creation_key, definition_name, definition_version, input, input_digest, state, revision)
select md5('w' || n)::uuid, 'proto-' || n, 'document_delivery', 1,
       jsonb_build_object('recipient', 'r-' || n), 'sha256:' || encode(sha256(('w' || n)::bytea), 'hex'),
       'running', 3
from generate_series(1, :workflows) n;

insert into step (id, workflow_id, logical, definition_version, kind, adapter, state, depends_on, output, attempt_count)
select md5('s' || n || l.logical)::uuid, md5('w' || n)::uuid, l.logical, 1, l.kind::step_kind, l.adapter,
       l.state::step_state, l.depends_on,
       case when l.logical = 'render' then jsonb_build_object('document_digest', 'sha256:' || encode(sha256(('d' || n)::bytea), 'hex')) end,
       case when l.logical = 'render' then 1 else 0 end
from generate_series(1, :workflows) n,
     (values ('render', 'pure', null, 'succeeded', '{}'::text[]),
             ('deliver', 'external', 'proto', 'ready', '{render}'),
             ('notify', 'external', 'proto', 'blocked', '{deliver}')) as l(logical, kind, adapter, state, depends_on);

-- The request key the pipeline's schema sets when a step is made (the other sets it when bound).
update step set request_key = 'w-' || replace(workflow_id::text, '-', '') || '/' || logical || '-v1'
where kind = 'external' and :pipeline;

create table if not exists bench_ceiling (id int primary key, n bigint not null);
insert into bench_ceiling select g, 0 from generate_series(1, 64) g on conflict do nothing;
vacuum analyze;
