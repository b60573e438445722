#!/usr/bin/env bash
# Runs the benchmarks against a private PostgreSQL started for the run (initdb into a temporary
# directory, trust authentication, 127.0.0.1 only, a free port, fsync off: the settings of
# internal/pgtest) and stops it afterwards.
#
#   bench/postgres.sh [jmh flags...]        jmh -pg URL [jmh flags...], once per driver
#                                           (-pg-driver pgx, then -pg-driver pq)
#   PG_BENCH_DRIVERS=pgx bench/postgres.sh  one driver only
#   bench/postgres.sh -- CMD [ARGS...]      CMD with PG_TEST_DSN=URL in its environment
#
# Run from app/ or anywhere. Needs PostgreSQL's initdb and postgres (apt-get install
# postgresql-15; /usr/lib/postgresql/N/bin is searched, newest first, then PATH). As root the
# server runs as the postgres user (PGTEST_USER overrides it), since PostgreSQL refuses root.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
log() { printf '[bench/postgres] %s\n' "$*" >&2; }

bin=
for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4,4nr); do
	[[ -x $d/initdb && -x $d/postgres ]] && { bin=$d; break; }
done
if [[ -z $bin ]] && command -v initdb >/dev/null; then bin=$(dirname "$(command -v initdb)"); fi
[[ -n $bin ]] || { log "no initdb/postgres found: apt-get install postgresql-15"; exit 1; }

dir=$(mktemp -d /tmp/sqlpool-pgbench.XXXXXX)
as=()
if [[ $(id -u) -eq 0 ]]; then
	user=${PGTEST_USER:-postgres}
	chown "$user" "$dir"
	as=(setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups --) # execs: $! is postgres
fi
pid=
stop() {
	local status=$?
	if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
		kill -INT "$pid" 2>/dev/null || true # fast shutdown
		for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	((status != 0)) && [[ -s $dir/server.log ]] && tail -n 20 "$dir/server.log" >&2
	rm -rf "$dir"
	exit "$status"
}
trap stop EXIT

"${as[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 \
	--no-sync --no-instructions >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${as[@]}" "$bin/postgres" -D "$dir/data" -c listen_addresses=127.0.0.1 -p "$port" -k "$dir" \
	-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 \
	-c shared_buffers=32MB >"$dir/server.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
	"$bin/pg_isready" -q -h 127.0.0.1 -p "$port" && break
	kill -0 "$pid" 2>/dev/null || { log "postgres exited"; exit 1; }
	sleep 0.1
done
"$bin/pg_isready" -q -h 127.0.0.1 -p "$port" || { log "postgres not ready within 60s"; exit 1; }
URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
log "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') at $URL (data in $dir)"

if [[ ${1:-} == -- ]]; then
	shift
	PG_TEST_DSN=$URL "$@"
else
	go build -o "$dir/jmh" ./bench/cmd/jmh
	for drv in ${PG_BENCH_DRIVERS:-pgx pq}; do
		log "driver $drv"
		"$dir/jmh" -pg "$URL" -pg-driver "$drv" "$@"
	done
fi
