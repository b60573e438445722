package bench

import (
	"context"
	"database/sql/driver"
	"io"

	"github.com/sqlpool/sqlpool/txstate"
)

// StubConnector is a minimal driver.Connector for measuring pool overhead, like
// HikariCP-benchmark's StubDriver: every call returns at once, nothing is shared between
// connections (no counters, no locks, no statement log), and it mimics the shape of
// go-sql-driver/mysql without interpolateParams where that decides what database/sql does:
//
//   - ExecContext and QueryContext with arguments return driver.ErrSkip, so database/sql
//     prepares, executes and closes a statement for a parameterized query (three round trips
//     on a real server), and a pool's statement cache can prepare once per connection;
//   - without arguments they answer directly (the text protocol);
//   - Ping, ResetSession and IsValid exist and succeed.
//
// It answers txstate.BaselineQuery with database "test", autocommit on, an empty sql_mode,
// REPEATABLE-READ and read-write; any other query returns one row, one column: the first
// argument, or int64(1).
type StubConnector struct{}

// Connect implements driver.Connector.
func (StubConnector) Connect(context.Context) (driver.Conn, error) { return &stubConn{}, nil }

// Driver implements driver.Connector.
func (StubConnector) Driver() driver.Driver { return stubDriver{} }

type stubDriver struct{}

func (stubDriver) Open(string) (driver.Conn, error) { return &stubConn{}, nil }

type stubConn struct{ closed bool }

var (
	_ driver.ConnPrepareContext = (*stubConn)(nil)
	_ driver.ConnBeginTx        = (*stubConn)(nil)
	_ driver.ExecerContext      = (*stubConn)(nil)
	_ driver.QueryerContext     = (*stubConn)(nil)
	_ driver.Pinger             = (*stubConn)(nil)
	_ driver.SessionResetter    = (*stubConn)(nil)
	_ driver.Validator          = (*stubConn)(nil)
)

func (c *stubConn) Prepare(q string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), q)
}

func (c *stubConn) PrepareContext(_ context.Context, q string) (driver.Stmt, error) {
	if c.closed {
		return nil, driver.ErrBadConn
	}
	return &stubStmt{q: q}, nil
}

func (c *stubConn) Close() error { c.closed = true; return nil }

func (c *stubConn) Begin() (driver.Tx, error) { return stubTx{}, nil }

func (c *stubConn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) {
	return stubTx{}, nil
}

func (c *stubConn) ExecContext(_ context.Context, _ string, args []driver.NamedValue) (driver.Result, error) {
	if len(args) > 0 {
		return nil, driver.ErrSkip
	}
	return stubResult{}, nil
}

// stubResult is an Exec's result: no row changed, no AUTO_INCREMENT id generated.
type stubResult struct{}

func (stubResult) LastInsertId() (int64, error) { return 0, nil }
func (stubResult) RowsAffected() (int64, error) { return 0, nil }

func (c *stubConn) QueryContext(_ context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	if len(args) > 0 {
		return nil, driver.ErrSkip
	}
	if q == txstate.BaselineQuery {
		return &baselineRows{}, nil
	}
	return &stubRows{v: int64(1)}, nil
}

func (c *stubConn) Ping(context.Context) error {
	if c.closed {
		return driver.ErrBadConn
	}
	return nil
}

func (c *stubConn) ResetSession(context.Context) error {
	if c.closed {
		return driver.ErrBadConn
	}
	return nil
}

func (c *stubConn) IsValid() bool { return !c.closed }

type stubTx struct{}

func (stubTx) Commit() error   { return nil }
func (stubTx) Rollback() error { return nil }

type stubStmt struct{ q string }

var (
	_ driver.StmtExecContext  = (*stubStmt)(nil)
	_ driver.StmtQueryContext = (*stubStmt)(nil)
)

func (s *stubStmt) Close() error  { return nil }
func (s *stubStmt) NumInput() int { return -1 }

func (s *stubStmt) Exec([]driver.Value) (driver.Result, error) { return driver.RowsAffected(0), nil }

func (s *stubStmt) ExecContext(context.Context, []driver.NamedValue) (driver.Result, error) {
	return driver.RowsAffected(0), nil
}

func (s *stubStmt) Query(args []driver.Value) (driver.Rows, error) {
	if s.q == txstate.BaselineQuery {
		return &baselineRows{}, nil
	}
	if len(args) > 0 {
		return &stubRows{v: args[0]}, nil
	}
	return &stubRows{v: int64(1)}, nil
}

func (s *stubStmt) QueryContext(_ context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if s.q == txstate.BaselineQuery {
		return &baselineRows{}, nil
	}
	if len(args) > 0 {
		return &stubRows{v: args[0].Value}, nil
	}
	return &stubRows{v: int64(1)}, nil
}

var stubColumns = []string{"1"}

// stubRows is one row with one column.
type stubRows struct {
	v    driver.Value
	done bool
}

func (r *stubRows) Columns() []string { return stubColumns }
func (r *stubRows) Close() error      { return nil }
func (r *stubRows) Next(dest []driver.Value) error {
	if r.done {
		return io.EOF
	}
	r.done = true
	dest[0] = r.v
	return nil
}

var baselineColumns = []string{"DATABASE()", "@@autocommit", "@@sql_mode", "@@tx_isolation", "@@tx_read_only"}

type baselineRows struct{ done bool }

func (r *baselineRows) Columns() []string { return baselineColumns }
func (r *baselineRows) Close() error      { return nil }
func (r *baselineRows) Next(dest []driver.Value) error {
	if r.done {
		return io.EOF
	}
	r.done = true
	dest[0], dest[1], dest[2], dest[3], dest[4] = []byte("test"), int64(1), []byte(""), []byte("REPEATABLE-READ"), int64(0)
	return nil
}
