// Command jmh runs sqlpool's JMH-style benchmarks: cycleConnection, cycleStatement,
// cycleParamStatement, contended and saturated, on sqlpool (p.OpenDB()), plain database/sql
// and a naive safe database/sql (Ping on borrow, ROLLBACK on return), side by side, on the stub
// driver, the embedded server, a MySQL/MariaDB DSN, or a PostgreSQL URL (-pg, through
// -pg-driver pgx or pq; there pgx's own pool behind stdlib.OpenDBFromPool is measured too).
// See docs/benchmarks.md and `jmh -h`.
//
//	go run ./app/bench/cmd/jmh -stub
//	go run ./app/bench/cmd/jmh -dsn 'user:pass@tcp(127.0.0.1:3306)/test' -format json
//	go run ./app/bench/cmd/jmh -pg 'postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable'
package main

import (
	"os"

	"github.com/sqlpool/sqlpool/app/bench"
)

func main() {
	os.Exit(bench.Run(os.Args[1:], os.Stdout, os.Stderr))
}
