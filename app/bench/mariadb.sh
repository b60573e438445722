#!/usr/bin/env bash
# Runs the benchmarks against a private MariaDB started for the run by scripts/mariadb-up
# (127.0.0.1 only, random port, temporary directory) and stops it afterwards.
#
#   bench/mariadb.sh [jmh flags...]        go run ./app/bench/cmd/jmh -dsn DSN [jmh flags...]
#   bench/mariadb.sh -- CMD [ARGS...]      CMD with SQLPOOL_BENCH_DSN=DSN in its environment,
#                                          e.g. bench/mariadb.sh -- go test -run x -bench . ./bench/
#
# Run from app/. Needs mariadbd (apt-get install mariadb-server mariadb-client). Server settings
# are Debian's defaults plus what scripts/mariadb-up passes (no binlog, no performance schema).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
up=../scripts/mariadb-up
log() { printf '[bench/mariadb] %s\n' "$*" >&2; }

MARIADB_UP_DIR=
stop() {
	local status=$?
	if [[ -n $MARIADB_UP_DIR ]]; then
		((status != 0)) && [[ -s ${MARIADB_UP_ERROR_LOG:-} ]] && tail -n 20 "$MARIADB_UP_ERROR_LOG" >&2
		"$up" -stop "$MARIADB_UP_DIR" || true
	fi
	exit "$status"
}
trap stop EXIT

eval "$("$up" bench)"
DSN=$MYSQL_TEST_DSN
unset MYSQL_TEST_DSN MYSQL_TEST_DSN_UNPRIVILEGED

if [[ ${1:-} == -- ]]; then
	shift
	SQLPOOL_BENCH_DSN=$DSN "$@"
else
	go build -o "$MARIADB_UP_DIR/jmh" ./bench/cmd/jmh
	"$MARIADB_UP_DIR/jmh" -dsn "$DSN" "$@"
fi
