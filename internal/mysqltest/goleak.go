package mysqltest

import "go.uber.org/goleak"

// GoleakOptions returns goleak options that ignore the goroutines this
// package legitimately leaves running, so that a package can use
//
//	goleak.VerifyTestMain(m, mysqltest.GoleakOptions()...)
//
// It ignores only the accept loop of the shared embedded server (see
// EmbeddedDSN), which lives as long as the process. It deliberately does not
// ignore the server's per-connection goroutines: they end as soon as the
// client closes its connection, so one still running at the end of the
// tests is a connection leaked by the code under test. go-sql-driver/mysql
// starts one goroutine per connection (its context watcher), which ends when
// the connection is closed, so nothing of it is ignored either.
func GoleakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/sqlpool/sqlpool/internal/mysqltest.runSharedEmbeddedServer"),
	}
}
