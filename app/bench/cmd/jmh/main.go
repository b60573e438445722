// Command jmh runs sqlpool's JMH-style benchmarks: cycleConnection, cycleStatement,
// cycleParamStatement, contended and saturated, on sqlpool (p.OpenDB()), plain database/sql
// and a naive safe database/sql (Ping on borrow, ROLLBACK on return), side by side, on the stub driver, the embedded server
// or a MySQL/MariaDB DSN. See docs/benchmarks.md and `jmh -h`.
//
//	go run ./app/bench/cmd/jmh -stub
//	go run ./app/bench/cmd/jmh -dsn 'user:pass@tcp(127.0.0.1:3306)/test' -format json
package main

import (
	"os"

	"github.com/sqlpool/sqlpool/app/bench"
)

func main() {
	os.Exit(bench.Run(os.Args[1:], os.Stdout, os.Stderr))
}
