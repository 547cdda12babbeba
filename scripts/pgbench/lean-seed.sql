-- Workflows of document_delivery's shape in the leaner schema, as seed.sql makes them in the
-- engine's: `render` succeeded, `deliver` ready, `notify` waiting for it.
insert into workflow (id, state, revision)
select md5('w' || n)::uuid, 'running', 3 from generate_series(1, :workflows) n;

insert into step (id, workflow_id, logical, state, depends_on, request_key, output, attempt_count)
select md5('s' || n || l.logical)::uuid, md5('w' || n)::uuid, l.logical, l.state, l.depends_on,
       case when l.logical <> 'render' then 'w-' || md5('w' || n) || '/' || l.logical || '-v1' end,
       case when l.logical = 'render' then jsonb_build_object('document_digest', 'sha256:' || encode(sha256(('d' || n)::bytea), 'hex')) end,
       case when l.logical = 'render' then 1 else 0 end
from generate_series(1, :workflows) n,
     (values ('render', 'succeeded', '{}'::text[]),
             ('deliver', 'ready', '{render}'),
             ('notify', 'blocked', '{deliver}')) as l(logical, state, depends_on);

create table if not exists bench_ceiling (id int primary key, n bigint not null);
insert into bench_ceiling select g, 0 from generate_series(1, 64) g on conflict do nothing;
vacuum analyze;
