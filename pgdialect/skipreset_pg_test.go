package pgdialect_test

import (
	"context"
	"database/sql/driver"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlpool/sqlpool/internal/pgtest"
	"github.com/sqlpool/sqlpool/pgdialect"
	"github.com/sqlpool/sqlpool/pool"
)

// TestSkipDriverReset: the pool leaves out pgx's ResetSession only where it is stdlib's own (no
// OptionResetSession, no OptionShouldPing) and lib/pq's; a user's reset function and a user's
// ping decision still run at every checkout through the pool, as through plain database/sql.
func TestSkipDriverReset(t *testing.T) {
	s := pgtest.Shared(t)
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	tracked := func(t *testing.T, c driver.Connector) pool.SessionCaps {
		t.Helper()
		_, st := newTracker(t, c)
		return st.Caps()
	}
	if tr := tracked(t, stdlib.GetConnector(*cfg)); !tr.SkipDriverReset {
		t.Error("pgx with stdlib's default reset: SkipDriverReset false; want true")
	}
	if tr := tracked(t, s.PqConnector(t)); !tr.SkipDriverReset {
		t.Error("lib/pq: SkipDriverReset false; want true")
	}
	drv, ok := stdlib.GetDefaultDriver().(driver.DriverContext)
	if !ok {
		t.Fatal("pgx's driver is not a DriverContext")
	}
	dsnConn, err := drv.OpenConnector(s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	if tr := tracked(t, dsnConn); !tr.SkipDriverReset {
		t.Error("pgx from its registered driver: SkipDriverReset false; want true")
	}

	var resets, pings atomic.Int64
	withReset := stdlib.GetConnector(*cfg, stdlib.OptionResetSession(func(context.Context, *pgx.Conn) error {
		resets.Add(1)
		return nil
	}))
	withPing := stdlib.GetConnector(*cfg, stdlib.OptionShouldPing(func(context.Context, stdlib.ShouldPingParams) bool {
		pings.Add(1)
		return false
	}))
	for _, c := range []struct {
		name string
		conn driver.Connector
		n    *atomic.Int64
	}{{"OptionResetSession", withReset, &resets}, {"OptionShouldPing", withPing, &pings}} {
		t.Run(c.name, func(t *testing.T) {
			if tr := tracked(t, c.conn); tr.SkipDriverReset {
				t.Fatalf("pgx with %s: SkipDriverReset true; want false", c.name)
			}
			p := newPool(t, c.conn, pool.Config{MaxConns: 1})
			db := p.OpenDB()
			defer db.Close()
			before := c.n.Load()
			const cycles = 5
			for range cycles {
				conn, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := conn.Close(); err != nil {
					t.Fatal(err)
				}
			}
			// The first checkout may be the fresh connection (no reset); every later one resets.
			if n := c.n.Load() - before; n < cycles-1 {
				t.Errorf("%s ran %d times in %d checkouts through the pool; want at least %d", c.name, n, cycles, cycles-1)
			}
		})
	}
}

// TestTrackerIsValidAfterPgxClose: for a pgx connection whose ResetSession the pool skips, the
// tracker answers the pool's IsValid at return: false once pgx closed the connection.
func TestTrackerIsValidAfterPgxClose(t *testing.T) {
	dc, st := newTracker(t, pgtest.Shared(t).PgxConnector(t))
	v, ok := st.(driver.Validator)
	if !ok {
		t.Fatal("the tracker is not a driver.Validator")
	}
	if !v.IsValid() {
		t.Fatal("IsValid false on an open connection")
	}
	if err := dc.(*stdlib.Conn).Conn().Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v.IsValid() {
		t.Error("IsValid true after pgx closed the connection")
	}
}

// newTracker dials a connection through c and returns it with PostgreSQL's tracker for it; the
// connection is closed when the test ends.
func newTracker(t *testing.T, c driver.Connector) (driver.Conn, pool.SessionTracker) {
	t.Helper()
	ctx := context.Background()
	dc, err := c.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dc.Close() })
	st, err := pgdialect.Dialect.NewSession(ctx, dc)
	if err != nil {
		t.Fatal(err)
	}
	return dc, st
}
