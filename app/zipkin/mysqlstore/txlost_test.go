package mysqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
)

// rollbackConnector wraps go-sql-driver/mysql. Armed with a query prefix, it rolls the
// connection's transaction back just before the next statement that starts with it runs, and
// lets that statement run: outside any transaction, it answers as it would there, with no
// error (a SELECT of the rows the transaction wrote finds none), and so do the statements after
// it; COMMIT then answers OK with nothing to commit. That is what MariaDB Galera 10.11 does to
// a local transaction that a replicated writeset brute-force aborts while it runs a SELECT
// (TestGaleraNodeKilledDuringIngest lost whole batches so).
type rollbackConnector struct {
	driver.Connector

	mu     sync.Mutex
	prefix string // armed while not empty
	fired  int
}

func (c *rollbackConnector) arm(prefix string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prefix = prefix
}

// take reports whether query is the armed one, disarming it.
func (c *rollbackConnector) take(query string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.prefix == "" || !strings.HasPrefix(query, c.prefix) {
		return false
	}
	c.prefix = ""
	c.fired++
	return true
}

func (c *rollbackConnector) firedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fired
}

func (c *rollbackConnector) Connect(ctx context.Context) (driver.Conn, error) {
	cn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &rollbackConn{Conn: cn, c: c}, nil
}

type rollbackConn struct {
	driver.Conn
	c *rollbackConnector
}

// maybeRollBack rolls the server's transaction back, behind database/sql's back, when query is
// the armed one.
func (rc *rollbackConn) maybeRollBack(ctx context.Context, query string) error {
	if !rc.c.take(query) {
		return nil
	}
	_, err := rc.Conn.(driver.ExecerContext).ExecContext(ctx, "ROLLBACK", nil)
	return err
}

func (rc *rollbackConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return rc.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (rc *rollbackConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	if err := rc.maybeRollBack(ctx, q); err != nil {
		return nil, err
	}
	return rc.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (rc *rollbackConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	if err := rc.maybeRollBack(ctx, q); err != nil {
		return nil, err
	}
	return rc.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (rc *rollbackConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	st, err := rc.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	return &rollbackStmt{Stmt: st, rc: rc, query: q}, nil
}

func (rc *rollbackConn) CheckNamedValue(nv *driver.NamedValue) error {
	return rc.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

func (rc *rollbackConn) ResetSession(ctx context.Context) error {
	return rc.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (rc *rollbackConn) IsValid() bool { return rc.Conn.(driver.Validator).IsValid() }

// rollbackStmt is a prepared statement of a rollbackConn (database/sql prepares a
// parameterized statement that go-sql-driver/mysql does not interpolate).
type rollbackStmt struct {
	driver.Stmt
	rc    *rollbackConn
	query string
}

func (s *rollbackStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if err := s.rc.maybeRollBack(ctx, s.query); err != nil {
		return nil, err
	}
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *rollbackStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if err := s.rc.maybeRollBack(ctx, s.query); err != nil {
		return nil, err
	}
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

// A write transaction that the server rolls back underneath, the rollback showing only as a
// read that does not see the transaction's own rows, is run again: Accept returns nil only once
// every span is stored (its transaction has no read), and the dependency aggregator's drain,
// whose reads come after it deleted the queue rows it took, runs again when a read finds them
// back, so the dependency counts come out as without the fault.
func TestAcceptRetriesTransactionRolledBackUnderneath(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		spans := testSpans(11, 40)
		ctx := ctxT(t)
		// The same spans on a store without the fault: the expected dependency links.
		control, _ := newStore(t, srv)
		if err := control.Accept(ctx, spans); err != nil {
			t.Fatal(err)
		}
		end := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
		const lookback = 100 * 365 * 86_400_000
		want, err := control.GetDependencies(ctx, end, lookback)
		if err != nil || len(want) == 0 {
			t.Fatalf("control store: dependencies %v, %v; want some", want, err)
		}
		for _, tc := range []struct{ name, prefix string }{
			{"reading the trace records", "SELECT trace_id, day, links FROM zipkin_dependency_traces"},
			{"checking the queue rows it took", "SELECT COUNT(*) FROM zipkin_dependency_queue"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx := ctxT(t)
				cfg, err := mysql.ParseDSN(freshDatabase(t, srv.dsn))
				if err != nil {
					t.Fatal(err)
				}
				inner, err := mysql.NewConnector(cfg)
				if err != nil {
					t.Fatal(err)
				}
				rc := &rollbackConnector{Connector: inner}
				db := sql.OpenDB(rc)
				t.Cleanup(func() { db.Close() })
				if err := mysqlstore.CreateSchema(ctx, db); err != nil {
					t.Fatal(err)
				}
				s, err := mysqlstore.Open(ctx, db, mysqlstore.Options{Logger: quietLogger})
				if err != nil {
					t.Fatal(err)
				}
				if !s.DependencyAggregation() {
					t.Fatal("dependency aggregation is off")
				}
				rc.arm(tc.prefix)
				if err := s.Accept(ctx, spans); err != nil {
					t.Fatalf("Accept = %v, want the transaction run again", err)
				}
				if _, err := s.FoldDependencies(ctx); err != nil {
					t.Fatalf("FoldDependencies = %v, want the drain run again", err)
				}
				if n := count(t, db, "zipkin_dependency_queue"); n != 0 {
					t.Errorf("%d queue rows left after the drain, want 0", n)
				}
				if rc.firedCount() != 1 {
					t.Fatalf("the rollback fired %d times, want 1", rc.firedCount())
				}
				if n := count(t, db, "zipkin_spans"); n != len(spans) {
					t.Errorf("Accept returned nil with %d span rows stored, want %d", n, len(spans))
				}
				got, err := s.GetDependencies(ctx, end, lookback)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("dependencies %v, want %v (as stored without the fault)", got, want)
				}
			})
		}
	})
}
