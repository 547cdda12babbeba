-- The single-row commit ceiling: one UPDATE per transaction, each client on its own row.
\set id :client_id + 1
update bench_ceiling set n = n + 1 where id = :id;
