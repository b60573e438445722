// Package fakedb is a fault-injecting fake database/sql driver for tests and benchmarks of
// pool logic: it counts calls, fails or blocks on command, and records the statements each
// connection ran. It sends nothing anywhere.
package fakedb

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Connector opens fake connections. Its fields may be changed while connections are in use
// through the setter methods; the zero value is not usable, use New.
type Connector struct {
	mu        sync.Mutex
	dialErr   error
	dialDelay time.Duration
	dialBlock bool
	pingErr   error
	pingBlock bool
	execErr   func(query string) error
	baseline  []driver.Value
	conns     []*Conn

	// Opens counts successful Connect calls; Closes counts Conn.Close calls.
	Opens, Closes, Dials, Pings, Execs atomic.Int64
}

// New returns a Connector whose connections answer the session-baseline query
// (txstate.BaselineQuery) with database "test", autocommit on, an empty sql_mode,
// REPEATABLE-READ and read-write.
func New() *Connector {
	return &Connector{baseline: []driver.Value{[]byte("test"), int64(1), []byte(""), []byte("REPEATABLE-READ"), int64(0)}}
}

// SetDialError makes every following Connect fail with err (nil: succeed).
func (c *Connector) SetDialError(err error) { c.mu.Lock(); c.dialErr = err; c.mu.Unlock() }

// SetDialDelay makes every following Connect take d.
func (c *Connector) SetDialDelay(d time.Duration) { c.mu.Lock(); c.dialDelay = d; c.mu.Unlock() }

// SetDialBlock makes every following Connect block until its ctx ends.
func (c *Connector) SetDialBlock(b bool) { c.mu.Lock(); c.dialBlock = b; c.mu.Unlock() }

// SetPingError makes every following Ping fail with err (nil: succeed).
func (c *Connector) SetPingError(err error) { c.mu.Lock(); c.pingErr = err; c.mu.Unlock() }

// SetPingBlock makes every following Ping block until its ctx ends.
func (c *Connector) SetPingBlock(b bool) { c.mu.Lock(); c.pingBlock = b; c.mu.Unlock() }

// SetExecError makes Exec and Query return f(query) when it is not nil.
func (c *Connector) SetExecError(f func(query string) error) {
	c.mu.Lock()
	c.execErr = f
	c.mu.Unlock()
}

// Conns returns every connection opened so far.
func (c *Connector) Conns() []*Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Conn(nil), c.conns...)
}

// Open returns the number of connections open now.
func (c *Connector) Open() int64 { return c.Opens.Load() - c.Closes.Load() }

func (c *Connector) Driver() driver.Driver { return fakeDriver{} }

type fakeDriver struct{}

func (fakeDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("fakedb: use the Connector")
}

func (c *Connector) Connect(ctx context.Context) (driver.Conn, error) {
	c.Dials.Add(1)
	c.mu.Lock()
	err, delay, block := c.dialErr, c.dialDelay, c.dialBlock
	c.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	cn := &Conn{c: c}
	c.mu.Lock()
	cn.ID = len(c.conns) + 1
	c.conns = append(c.conns, cn)
	c.mu.Unlock()
	c.Opens.Add(1)
	return cn, nil
}

// Conn is a fake connection. It implements every optional interface database/sql knows.
type Conn struct {
	c      *Connector
	ID     int
	closed atomic.Bool
	broken atomic.Bool

	mu   sync.Mutex
	log  []string
	next error // returned by the next Exec/Query/Begin/Commit/Ping
}

// Break makes the connection report itself invalid (IsValid false, ResetSession ErrBadConn,
// every call driver.ErrBadConn), as a driver does after its socket died.
func (cn *Conn) Break() { cn.broken.Store(true) }

// FailNext makes the next call on the connection return err.
func (cn *Conn) FailNext(err error) { cn.mu.Lock(); cn.next = err; cn.mu.Unlock() }

// Closed reports whether Close was called.
func (cn *Conn) Closed() bool { return cn.closed.Load() }

// Log returns the statements and calls the connection received, in order ("BEGIN", "COMMIT",
// "ROLLBACK" for driver transaction calls, "PING", "PREPARE <query>", and the query text of
// every Exec/Query, direct or through a prepared statement).
func (cn *Conn) Log() []string {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return append([]string(nil), cn.log...)
}

func (cn *Conn) record(s string) error {
	if cn.closed.Load() || cn.broken.Load() {
		return driver.ErrBadConn
	}
	cn.mu.Lock()
	cn.log = append(cn.log, s)
	err := cn.next
	cn.next = nil
	cn.mu.Unlock()
	return err
}

func (cn *Conn) Prepare(query string) (driver.Stmt, error) {
	return cn.PrepareContext(context.Background(), query)
}

func (cn *Conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if err := cn.record("PREPARE " + query); err != nil {
		return nil, err
	}
	return &Stmt{cn: cn, query: query}, nil
}

func (cn *Conn) Close() error {
	if cn.closed.CompareAndSwap(false, true) {
		cn.c.Closes.Add(1)
	}
	return nil
}

func (cn *Conn) Begin() (driver.Tx, error) {
	return cn.BeginTx(context.Background(), driver.TxOptions{})
}

func (cn *Conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := cn.record("BEGIN"); err != nil {
		return nil, err
	}
	return &Tx{cn: cn}, nil
}

func (cn *Conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	cn.c.Execs.Add(1)
	if err := cn.record(query); err != nil {
		return nil, err
	}
	if err := cn.c.execError(query); err != nil {
		return nil, err
	}
	return result{}, nil
}

func (cn *Conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	cn.c.Execs.Add(1)
	if err := cn.record(query); err != nil {
		return nil, err
	}
	if err := cn.c.execError(query); err != nil {
		return nil, err
	}
	if strings.Contains(query, "@@autocommit") {
		cn.c.mu.Lock()
		b := cn.c.baseline
		cn.c.mu.Unlock()
		return &Rows{cols: []string{"db", "ac", "mode", "iso", "ro"}, rows: [][]driver.Value{b}}, nil
	}
	var vals []driver.Value
	for _, a := range args {
		vals = append(vals, a.Value)
	}
	if len(vals) == 0 {
		vals = []driver.Value{int64(1)}
	}
	return &Rows{cols: make([]string, len(vals)), rows: [][]driver.Value{vals}}, nil
}

func (c *Connector) execError(query string) error {
	c.mu.Lock()
	f := c.execErr
	c.mu.Unlock()
	if f != nil {
		return f(query)
	}
	return nil
}

func (cn *Conn) Ping(ctx context.Context) error {
	cn.c.Pings.Add(1)
	cn.c.mu.Lock()
	err, block := cn.c.pingErr, cn.c.pingBlock
	cn.c.mu.Unlock()
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	if e := cn.record("PING"); e != nil {
		return e
	}
	return err
}

func (cn *Conn) CheckNamedValue(nv *driver.NamedValue) error { return driver.ErrSkip }

func (cn *Conn) ResetSession(ctx context.Context) error {
	if cn.closed.Load() || cn.broken.Load() {
		return driver.ErrBadConn
	}
	return nil
}

func (cn *Conn) IsValid() bool { return !cn.closed.Load() && !cn.broken.Load() }

// Tx is a fake transaction.
type Tx struct{ cn *Conn }

func (t *Tx) Commit() error   { return t.cn.record("COMMIT") }
func (t *Tx) Rollback() error { return t.cn.record("ROLLBACK") }

// Stmt is a fake prepared statement.
type Stmt struct {
	cn     *Conn
	query  string
	closed bool
}

func (s *Stmt) Close() error  { s.closed = true; return nil }
func (s *Stmt) NumInput() int { return -1 }
func (s *Stmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.cn.ExecContext(context.Background(), s.query, nil)
}
func (s *Stmt) Query(args []driver.Value) (driver.Rows, error) {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	return s.cn.QueryContext(context.Background(), s.query, nv)
}

// Rows is a fake result set.
type Rows struct {
	cols []string
	rows [][]driver.Value
	i    int
}

func (r *Rows) Columns() []string { return r.cols }
func (r *Rows) Close() error      { return nil }
func (r *Rows) Next(dest []driver.Value) error {
	if r.i >= len(r.rows) {
		return io.EOF
	}
	copy(dest, r.rows[r.i])
	r.i++
	return nil
}

// Minimal wraps a Conn so that only driver.Conn's own methods (Prepare, Close, Begin) are
// visible: for tests that a wrapper adds no behaviour a driver lacks.
type Minimal struct{ C *Conn }

func (m Minimal) Prepare(q string) (driver.Stmt, error) { return m.C.Prepare(q) }
func (m Minimal) Close() error                          { return m.C.Close() }
func (m Minimal) Begin() (driver.Tx, error)             { return m.C.Begin() } //nolint:staticcheck

// MinimalConnector opens connections of a Connector wrapped in Minimal.
type MinimalConnector struct{ *Connector }

func (mc MinimalConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := mc.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return Minimal{c.(*Conn)}, nil
}

// result is every Exec's result: one row affected, no generated id (as for a table without
// AUTO_INCREMENT), so the pool's tracker sees no LAST_INSERT_ID() change.
type result struct{}

func (result) LastInsertId() (int64, error) { return 0, nil }
func (result) RowsAffected() (int64, error) { return 1, nil }
