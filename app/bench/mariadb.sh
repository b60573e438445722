#!/usr/bin/env bash
# Runs the benchmarks against a private MariaDB started for the run (127.0.0.1 only, random
# port, temporary data dir), the same way .ci/run starts one, and stops it afterwards.
#
#   bench/mariadb.sh [jmh flags...]        go run ./app/bench/cmd/jmh -dsn DSN [jmh flags...]
#   bench/mariadb.sh -- CMD [ARGS...]      CMD with SQLPOOL_BENCH_DSN=DSN in its environment,
#                                          e.g. bench/mariadb.sh -- go test -run x -bench . ./bench/
#
# Needs mariadbd (apt-get install mariadb-server mariadb-client). Server settings are Debian's
# defaults plus what .ci/run passes (no binlog, no performance schema).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
log() { printf '[bench/mariadb] %s\n' "$*" >&2; }

command -v mariadbd >/dev/null || { log "mariadbd not installed (apt-get install mariadb-server mariadb-client)"; exit 1; }

DIR=$(mktemp -d /tmp/sqlpool-bench-mariadb.XXXXXX)
PID=
stop() {
	local status=$?
	if [[ -n $PID ]] && kill -0 "$PID" 2>/dev/null; then
		log "stopping mariadbd (pid $PID)"
		kill -TERM "$PID" 2>/dev/null || true
		for ((i = 0; i < 300; i++)); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$PID" 2>/dev/null && kill -KILL "$PID" 2>/dev/null || true
	fi
	((status != 0)) && [[ -s $DIR/error.log ]] && tail -n 20 "$DIR/error.log" >&2
	rm -rf "$DIR"
	exit "$status"
}
trap stop EXIT

mariadb-install-db --no-defaults --user=root --datadir="$DIR/data" \
	--auth-root-authentication-method=socket --skip-test-db >"$DIR/install.log" 2>&1 ||
	{ cat "$DIR/install.log" >&2; exit 1; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
ready=
for attempt in 1 2 3; do
	PORT=$((20000 + RANDOM % 40000))
	port_free "$PORT" || continue
	: >"$DIR/error.log"
	setsid mariadbd --no-defaults --user=root --datadir="$DIR/data" --socket="$DIR/sock" \
		--pid-file="$DIR/mariadbd.pid" --log-error="$DIR/error.log" --port="$PORT" \
		--bind-address=127.0.0.1 --skip-networking=0 --skip-name-resolve --skip-log-bin \
		--performance-schema=OFF </dev/null >>"$DIR/stdout.log" 2>&1 &
	PID=$!
	for ((i = 0; i < 600; i++)); do
		if mariadb-admin --no-defaults --protocol=socket -S "$DIR/sock" -uroot ping >/dev/null 2>&1; then
			ready=1
			break
		fi
		kill -0 "$PID" 2>/dev/null || break
		sleep 0.1
	done
	[[ -n $ready ]] && break
	grep -q "Address already in use" "$DIR/error.log" && { PID=; continue; }
	log "mariadbd did not start"
	exit 1
done
[[ -n $ready ]] || { log "could not start mariadbd on a free port"; exit 1; }

mariadb --no-defaults --protocol=socket -S "$DIR/sock" -uroot <<'SQL'
CREATE DATABASE IF NOT EXISTS test;
CREATE USER 'sqlpool'@'127.0.0.1' IDENTIFIED BY 'sqlpool';
GRANT ALL PRIVILEGES ON *.* TO 'sqlpool'@'127.0.0.1';
SQL
DSN="sqlpool:sqlpool@tcp(127.0.0.1:$PORT)/test"
log "$(mariadbd --version) ready on 127.0.0.1:$PORT (pid $PID)"

if [[ ${1:-} == -- ]]; then
	shift
	SQLPOOL_BENCH_DSN=$DSN "$@"
else
	go build -o "$DIR/jmh" ./bench/cmd/jmh
	"$DIR/jmh" -dsn "$DSN" "$@"
fi
