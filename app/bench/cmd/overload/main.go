// Command overload runs the overload benchmark: open-loop Poisson arrivals at twice the
// capacity measured in the same run, each request with a 1 s deadline covering borrow,
// statement and rows, on plain database/sql and on sqlpool, against a MariaDB pinned to one
// core. app/bench/overload.sh starts the server and pins it; see docs/design/overload.md.
//
//	go run ./app/bench/cmd/overload -dsn 'user:pass@tcp(127.0.0.1:3306)/test'
package main

import (
	"os"

	"github.com/sqlpool/sqlpool/app/bench"
)

func main() {
	os.Exit(bench.RunOverload(os.Args[1:], os.Stdout, os.Stderr))
}
