#!/usr/bin/env bash
# Runs the browser tests against the real server: `z29c serve` with no DATABASE_URL, so it
# starts its own private PostgreSQL cluster in a throwaway directory, exactly as `make run` does.
# Afterwards it stops the server with SIGTERM and checks the cluster was shut down with it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${Z29C_BIN:?set Z29C_BIN to the z29c binary built by cargo leptos}
site_root=${LEPTOS_SITE_ROOT:?set LEPTOS_SITE_ROOT to the site cargo leptos built}
addr=${Z29C_E2E_ADDR:-127.0.0.1:3100}

work=$(mktemp -d /tmp/z29c-e2e.XXXXXX)
chmod 755 "$work"   # the cluster may run as the postgres user
# The logs carry the demo's password: readable by this user only, in a directory others may enter.
(umask 077; : >"$work/server.log"; : >"$work/user.log")
server_pid=
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then kill -TERM "$server_pid"; wait "$server_pid" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# With the demo: three destination processes (ports from 3201, away from `make run`'s) and
# workflows that end in every kind of uncertainty, for the review-queue tests.
env -u DATABASE_URL Z29C_PG_DATA="$work/pg" Z29C_ADDR="$addr" LEPTOS_SITE_ROOT="$site_root" \
  Z29C_DEMO_DATA="$work/destinations" Z29C_DEMO_PORT="${Z29C_E2E_DEMO_PORT:-3201}" Z29C_OBSERVE_EVERY_SECS=1 \
  Z29C_ARCHIVE_DIR="$work/archive" "$bin" serve --demo >"$work/server.log" 2>&1 &
server_pid=$!

# An approver and a viewer for the browser tests; `user add` joins the server's running cluster.
for _ in $(seq 1 120); do curl -sf "http://$addr/readyz" >/dev/null && break; sleep 0.5; done
if ! password=$(env -u DATABASE_URL Z29C_PG_DATA="$work/pg" "$bin" user add e2e-approver --role approver 2>"$work/user.log"); then
  echo "could not create the e2e operator:"; cat "$work/user.log"; exit 1
fi

if ! viewer_password=$(env -u DATABASE_URL Z29C_PG_DATA="$work/pg" "$bin" user add e2e-viewer --role viewer 2>"$work/user.log"); then
  echo "could not create the e2e viewer:"; cat "$work/user.log"; exit 1
fi

status=0
(cd "$here" && Z29C_BASE_URL="http://$addr" E2E_USER=e2e-approver E2E_PASSWORD="$password" \
  E2E_VIEWER=e2e-viewer E2E_VIEWER_PASSWORD="$viewer_password" Z29C_BIN="$bin" Z29C_PG_DATA="$work/pg" \
  Z29C_DEMO_DATA="$work/destinations" Z29C_E2E_DEMO_PORT="${Z29C_E2E_DEMO_PORT:-3201}" \
  Z29C_ARCHIVE_DIR="$work/archive" npx playwright test "$@") || status=$?

kill -TERM "$server_pid"
wait "$server_pid" || { echo "z29c serve did not exit cleanly:"; cat "$work/server.log"; exit 1; }
server_pid=
if pg_ctl_out=$(ls "$work"/pg/postmaster.pid "$work"/destinations/*/postmaster.pid 2>/dev/null); then
  echo "the private cluster was still running after the server stopped ($pg_ctl_out)"; cat "$work/server.log"; exit 1
fi
if [ "$status" -ne 0 ]; then echo "--- server log"; tail -n 50 "$work/server.log"; fi
exit "$status"
