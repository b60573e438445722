package metrics_test

import (
	"bufio"
	"context"
	"database/sql/driver"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/metrics"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/stmtname"
)

// connector stands for any driver.Connector, such as go-sql-driver/mysql's
// mysql.NewConnector(cfg); the examples use the project's fake driver so that they run
// without a server.
func connector() driver.Connector { return fakedb.New() }

func ExampleNew() {
	m, err := metrics.New(metrics.Options{})
	if err != nil {
		panic(err)
	}
	// m.Trace() in Config.Trace is the one step: events, gauges and the retry observer.
	p, err := pool.New(connector(), pool.Config{Name: "main", MaxConns: 4, Trace: m.Trace(), Logger: quiet})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	db := p.OpenDB()
	defer db.Close()
	var n int
	_ = db.QueryRowContext(context.Background(), "SELECT 1").Scan(&n)

	snap := m.Snapshot()
	fmt.Println(snap.Pools[0].Name, snap.Pools[0].MaxConns, snap.Pools[0].Acquire.Count)
	// Output: main 4 1
}

func ExampleMetrics_Register() {
	m, _ := metrics.New(metrics.Options{})
	// One Metrics serves several pools, told apart by the label pool (Config.Name).
	for _, name := range []string{"writer", "reader"} {
		p, err := pool.New(connector(), pool.Config{Name: name, MaxConns: 2, Trace: m.Trace(), Logger: quiet})
		if err != nil {
			panic(err)
		}
		defer p.Close()
	}
	for _, ps := range m.Snapshot().Pools {
		fmt.Println(ps.Name, ps.MaxConns, ps.Registered)
	}
	// Output:
	// reader 2 true
	// writer 2 true
}

func ExampleMetrics_Handler() {
	m, _ := metrics.New(metrics.Options{})
	p, err := pool.New(connector(), pool.Config{Name: "main", MaxConns: 2, MinIdleConns: 1, Trace: m.Trace(), Logger: quiet})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	mux.Handle("/admin/pool", m.AdminHandler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "hikaricp_connections_max{") || strings.HasPrefix(line, "hikaricp_connections_min{") ||
			strings.HasPrefix(line, "sqlpool_up{") {
			fmt.Println(line)
		}
	}
	// Output:
	// hikaricp_connections_max{pool="main"} 2
	// hikaricp_connections_min{pool="main"} 1
	// sqlpool_up{pool="main"} 1
}

func ExampleMetrics_StatementDone() {
	m, _ := metrics.New(metrics.Options{})
	p, err := pool.New(connector(), pool.Config{Name: "main", MaxConns: 2, Trace: m.Trace(), Logger: quiet})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	db := p.OpenDB()
	defer db.Close()

	ctx := context.Background()
	// Named by the caller ...
	_, _ = db.ExecContext(stmtname.With(ctx, "get_user"), "SELECT * FROM users WHERE id = ?", 42)
	// ... or by verb and first table, parsed from the SQL text.
	_, _ = db.ExecContext(ctx, "INSERT INTO spans (trace_id, name) VALUES (?, ?)", 1, "get")
	_, _ = db.ExecContext(ctx, "INSERT INTO spans (trace_id, name) VALUES (?, ?)", 2, "put")

	for _, s := range m.Snapshot().Statements {
		fmt.Printf("%s: %d\n", s.Name, s.Count)
	}
	// Unordered output:
	// get_user: 1
	// insert spans: 2
}
