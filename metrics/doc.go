// Package metrics exports the metrics of sqlpool pools to Prometheus under the names HikariCP
// users already chart through Micrometer (hikaricp_connections, hikaricp_connections_active,
// hikaricp_connections_acquire_seconds, ...), plus this project's own (sqlpool_...): closes by
// reason, validations run and bypassed, release rollbacks and resets, leaked statements,
// statement timers and errors by bounded statement name, and retries. docs/metrics.md lists
// every metric; docs/grafana-dashboard.json charts them.
//
// One *Metrics serves any number of pools, told apart by the label pool (pool.Config.Name):
//
//	m, _ := metrics.New(metrics.Options{RuntimeCollectors: true})
//	p, _ := pool.New(connector, pool.Config{Name: "main", Trace: m.Trace()}) // the one step
//	http.Handle("/metrics", m.Handler())     // or register m in a registry of your own
//	http.Handle("/admin/pool", m.AdminHandler())
//
// m.Trace() in Config.Trace is all a pool needs: pool.New hands the pool to m, whose gauges
// (read from p.Stats() at every scrape) include sqlpool_up and the connect
// errors by phase, and retry.Tx on the pool's DB counts its retries under the pool's name.
//
// # Cost on the hot path
//
// The pool calls m's pool.Trace functions from every borrower's goroutine. Following the lesson
// of Brave 4.12 (recording under a lock shared with the threads being measured multiplied
// latency tenfold under load), recording takes no lock, allocates nothing and reads no clock:
// a pool's metric handles are looked up once, on its first event, and kept in a copy-on-write
// map read with one atomic load; histograms are arrays of atomic counters with an integer
// nanosecond sum (two atomic adds per observation), exposed as constant metrics at scrape; the
// _max gauges are a compare-and-swap maximum over a rotating window that only readers rotate.
// Statement names are found through a fixed lock-free cache keyed by a hash of the SQL text;
// see Metrics.StatementDone.
//
// # Statement names
//
// sqlpool_statement_seconds and sqlpool_statement_errors_total are labelled by a statement
// name, never by SQL text or argument values: the caller's name from stmtname.With, else
// the verb and first table parsed from the SQL ("select users", "insert spans", "commit").
// At most Options.MaxStatementNames names (500 by default) are kept per pool; later ones are
// counted as "other".
package metrics
