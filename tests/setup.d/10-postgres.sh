# A throwaway PostgreSQL server on 127.0.0.1 for the store tests (root cannot run postgres: use
# the postgres user). Exports HARNESS_TEST_PG_URL.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) \
    || setup_fail "apt-get install postgresql"
fi
PG_BIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
# a free port unless one is given: a leftover server from an interrupted run must not block this one
PG_PORT="${HARNESS_TEST_PG_PORT:-$(python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
PG_DIR="$(mktemp -d /tmp/harness-pg.XXXXXX)"
chown postgres "$PG_DIR"
runuser -u postgres -- "$PG_BIN/initdb" -D "$PG_DIR/data" -U harness --auth=trust --no-sync >/dev/null
runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w start \
  -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_DIR -c fsync=off -c max_connections=200" >/dev/null
runuser -u postgres -- "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U harness harness
export HARNESS_TEST_PG_URL="postgresql+psycopg://harness@127.0.0.1:$PG_PORT/harness"
trap 'runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate stop >/dev/null 2>&1 || true' EXIT
echo "postgres at $HARNESS_TEST_PG_URL"
