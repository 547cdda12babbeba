#!/usr/bin/env bash
# The engine's transactions alone, driven by pgbench, beside the single-row commit ceiling on the
# same server: the protocol as the engine ran it before the pipeline (three transactions per
# step, on the schema before it) and the pipeline's (two transactions per 64 steps, on today's
# schema, with its workflow-state rule). What the database can do for each design, before any
# engine code runs. (The sketch of a leaner schema once measured beside them carried its own copy
# of that rule; docs/CHANGELOG.md says why it went.)
#
#   z29c db exec -- scripts/pgbench/run.sh        (a private cluster), or DATABASE_URL=… scripts/pgbench/run.sh
#
# CLIENTS (8), STEPS (20000 per design), CEILING_SECS (10) tune it.
set -euo pipefail
# pgbench and psql come with the PostgreSQL server packages the private clusters use.
for bin in /usr/lib/postgresql/*/bin; do [ -d "$bin" ] && PATH="$PATH:$bin"; done
command -v pgbench >/dev/null || { echo "pgbench is missing: install PostgreSQL (Debian: postgresql)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
migrations="$here/../../migrations"
admin=${DATABASE_URL:?set DATABASE_URL (or run through z29c db exec)}
clients=${CLIENTS:-8}
steps=${STEPS:-20000}
ceiling_secs=${CEILING_SECS:-10}
# The last migration before the pipeline's schema.
before_cutoff=20261202000003

# A database of the server `admin` names, by name.
url_of() { python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$admin" "$1"; }

# A fresh database `$1` with the migrations up to `$2` (or all) and `$3` workflows seeded.
prepare() {
  local name=$1 cutoff=$2 workflows=$3 pipeline=$4
  psql "$admin" -qX -v ON_ERROR_STOP=1 -c "drop database if exists $name" -c "create database $name" >/dev/null
  local url; url=$(url_of "$name")
  for f in "$migrations"/*.sql; do
    local version; version=$(basename "$f" | cut -d_ -f1)
    if [ -n "$cutoff" ] && [ "$version" -gt "$cutoff" ]; then break; fi
    psql "$url" -qX -v ON_ERROR_STOP=1 -f "$f" >/dev/null
  done
  psql "$url" -qX -v ON_ERROR_STOP=1 -v workflows="$workflows" -v pipeline="$pipeline" -f "$here/seed.sql" >/dev/null
  echo "$url"
}

# Transactions per second pgbench reports for `$@`.
tps() { pgbench -n -M extended -j 2 "$@" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -n 1; }

# Two external steps per workflow; a margin so no client runs out.
workflows=$(( steps * 6 / 10 + clients * 64 ))
echo "seeding $workflows workflows per design…" >&2
before=$(prepare z29c_proto_before "$before_cutoff" "$workflows" false)
after=$(prepare z29c_proto_after "" "$workflows" true)

ceiling=$(tps -c "$clients" -T "$ceiling_secs" -f "$here/ceiling.sql" "$after")
per_tx=$(( steps / clients ))
per_step=$(tps -c "$clients" -t "$per_tx" -f "$here/per-step.sql" "$before")
per_batch=$(( steps / clients / 64 ))
batch=$(tps -c "$clients" -t "$per_batch" -f "$here/batch.sql" "$after")

python3 - "$ceiling" "$per_step" "$batch" "$clients" <<'EOF'
import sys
ceiling, per_step, clients = float(sys.argv[1]), float(sys.argv[2]), sys.argv[4]
batch = float(sys.argv[3]) * 64
print(f"pgbench, {clients} clients: external steps per second, the database's share only")
print(f"{'design':<48} {'steps/s':>9} {'ratio':>7}")
print(f"{'single-row UPDATE commits (the ceiling)':<48} {ceiling:>9.0f} {1:>6.2f}×")
print(f"{'per step, three transactions (before)':<48} {per_step:>9.0f} {per_step / ceiling:>6.2f}×")
print(f"{'batches of 64, two transactions (the pipeline)':<48} {batch:>9.0f} {batch / ceiling:>6.2f}×")
EOF
psql "$admin" -qX -c "drop database z29c_proto_before" -c "drop database z29c_proto_after" >/dev/null
