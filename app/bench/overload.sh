#!/usr/bin/env bash
# The overload benchmark (docs/design/overload.md): starts a private MariaDB (scripts/mariadb-up,
# max_connections 2000) with all its threads on CPU 0 (taskset), runs the generator
# (app/bench/cmd/overload) pinned to CPU 1, and stops the server.
#
#   app/bench/overload.sh [overload flags...]     e.g. -rounds 3 -duration 5s
#
# Needs mariadbd and taskset (util-linux) and at least two CPUs.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/../.."
log() { printf '[bench/overload] %s\n' "$*" >&2; }

MARIADB_UP_DIR=
stop() {
	local status=$?
	if [[ -n $MARIADB_UP_DIR ]]; then
		((status != 0)) && [[ -s ${MARIADB_UP_ERROR_LOG:-} ]] && tail -n 20 "$MARIADB_UP_ERROR_LOG" >&2
		"$root/scripts/mariadb-up" -stop "$MARIADB_UP_DIR" || true
	fi
	exit "$status"
}
trap stop EXIT

eval "$("$root/scripts/mariadb-up" -cpus 0 -opt --max-connections=2000 overload)"
log "mariadbd pinned to CPU 0; generator on CPU 1"
(cd "$root/app" && go build -o "$MARIADB_UP_DIR/overload" ./bench/cmd/overload)
taskset -c 1 "$MARIADB_UP_DIR/overload" -dsn "$MYSQL_TEST_DSN" "$@"
