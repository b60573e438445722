package pool_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/txstate"
)

// A server that rejects a column of the full baseline query (a MySQL without
// max_execution_time, a MariaDB without max_statement_time, a proxy that lacks
// interactive_timeout) still gets a baseline from the older five-column query, so a USE,
// autocommit or isolation change is reset rather than costing a reconnect on every release.
// Fails when an unknown variable leaves the whole baseline unknown.
func TestBaselineFallsBackToCoreQuery(t *testing.T) {
	fc := fakedb.New() // answers any query naming @@autocommit with the five core columns
	fc.SetExecError(func(q string) error {
		if strings.Contains(q, "@@time_zone") {
			return &mysql.MySQLError{Number: 1193, Message: "Unknown system variable 'max_execution_time'"}
		}
		return nil
	})
	p, err := pool.New(fc, pool.Config{MaxConns: 1, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	db := p.OpenDB()
	defer db.Close()
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"USE other", "SET autocommit = 0"} {
			if _, err := c.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := fc.Opens.Load(); n != 1 {
		t.Errorf("3 borrows that ran USE and SET autocommit opened %d connections; want 1 (the baseline is known)", n)
	}
	log := fc.Conns()[0].Log()
	if !slices.Contains(log, txstate.BaselineQuery) || !slices.Contains(log, txstate.BaselineCoreQuery) {
		t.Errorf("the connection received %q; want the full baseline query, then the core one", log)
	}
	if !slices.Contains(log, "USE `test`") {
		t.Errorf("the connection received %q; want the release plan's USE `test`", log)
	}
}
