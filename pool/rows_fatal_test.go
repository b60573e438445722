package pool_test

// Issue 10, defect 4: a fatal error from Rows.Next, NextResultSet or Close is observed like one
// from any other call: the connection is closed when it comes back, and a server-gone error
// makes the pool probe its other idle connections.

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
)

// failRowsConnector opens fake connections whose result for a query containing "FAIL" has one
// row (42) and then fails where the query says: "FAIL next", "FAIL nextresultset" or
// "FAIL close", with err.
type failRowsConnector struct {
	*fakedb.Connector
	err error
}

func (c failRowsConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return failRowsConn{Conn: dc.(*fakedb.Conn), err: c.err}, nil
}

type failRowsConn struct {
	*fakedb.Conn
	err error
}

func (c failRowsConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.Conn.QueryContext(ctx, q, args)
	if err != nil || !strings.Contains(q, "FAIL") {
		return r, err
	}
	_ = r.Close()
	where := q[strings.Index(q, "FAIL")+len("FAIL "):]
	return &failRows{where: where, err: c.err}, nil
}

type failRows struct {
	where string
	err   error
	n     int
}

func (r *failRows) Columns() []string { return []string{"v"} }
func (r *failRows) Close() error {
	if r.where == "close" {
		return r.err
	}
	return nil
}
func (r *failRows) Next(dest []driver.Value) error {
	r.n++
	switch {
	case r.n == 1:
		dest[0] = int64(42)
		return nil
	case r.where == "next":
		return r.err
	}
	return io.EOF
}
func (r *failRows) HasNextResultSet() bool { return r.where == "nextresultset" }
func (r *failRows) NextResultSet() error {
	if r.where == "nextresultset" {
		return r.err
	}
	return io.EOF
}

// closeRecorder records the reasons connections are closed for.
type closeRecorder struct {
	mu      sync.Mutex
	reasons []pool.CloseReason
}

func (r *closeRecorder) Closed(_ string, why pool.CloseReason) {
	r.mu.Lock()
	r.reasons = append(r.reasons, why)
	r.mu.Unlock()
}

func (r *closeRecorder) trace() *pool.Trace { return &pool.Trace{Closed: r.Closed} }

func (r *closeRecorder) count(why pool.CloseReason) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, w := range r.reasons {
		if w == why {
			n++
		}
	}
	return n
}

// readFail reads the FAIL query on c the way where needs and returns the error database/sql
// reports, and the value of the first row.
func readFail(ctx context.Context, c *sql.Conn, where string) (int, error) {
	rows, err := c.QueryContext(ctx, "SELECT FAIL "+where)
	if err != nil {
		return 0, fmt.Errorf("query: %w", err)
	}
	var v int
	if !rows.Next() {
		return 0, fmt.Errorf("no first row: %v", rows.Err())
	}
	if err := rows.Scan(&v); err != nil {
		return 0, err
	}
	switch where {
	case "next":
		rows.Next()
		err = rows.Err()
		_ = rows.Close()
	case "nextresultset":
		rows.Next()
		rows.NextResultSet()
		err = rows.Err()
		_ = rows.Close()
	case "close":
		err = rows.Close() // before the end: database/sql drops Close's error after io.EOF
	}
	return v, err
}

func TestRowsFatalErrorObserved(t *testing.T) {
	shutdown := &mysql.MySQLError{Number: 1053, Message: "Server shutdown in progress"}
	interrupted := &mysql.MySQLError{Number: 1317, Message: "Query execution was interrupted"}
	for _, tc := range []struct {
		where string
		err   *mysql.MySQLError
		fatal bool
	}{
		{"next", shutdown, true},
		{"nextresultset", shutdown, true},
		{"close", shutdown, true},
		{"next", interrupted, false},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.where, tc.err.Number), func(t *testing.T) {
			fc := fakedb.New()
			rec := &closeRecorder{}
			// A bypass window of an hour: only the server-gone report can make the pool probe.
			// MinIdleConns -1: no replacement is dialled for the closed connection, so the next
			// acquire takes the other, older one.
			p, err := pool.New(failRowsConnector{Connector: fc, err: tc.err},
				pool.Config{MaxConns: 2, MinIdleConns: -1, AliveBypassWindow: time.Hour, Trace: rec.trace(), Logger: quietLog})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			db := p.OpenDB()
			defer db.Close()
			fillIdle(t, db, 2)
			ctx := context.Background()

			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			v, err := readFail(ctx, c, tc.where)
			if v != 42 || !errors.Is(err, tc.err) {
				t.Fatalf("read %d, error %v; want 42 and %v", v, err, tc.err)
			}
			_ = c.Close()
			var used *fakedb.Conn
			for _, cn := range fc.Conns() {
				if strings.Contains(strings.Join(cn.Log(), "\n"), "FAIL") {
					used = cn
				}
			}
			if used == nil {
				t.Fatal("no connection ran the query")
			}
			if got := rec.count(pool.CloseFatalError); used.Closed() != tc.fatal || got != b2i(tc.fatal) {
				t.Fatalf("error %d from rows (%s): connection closed %v, %d closed for a fatal error; want %v",
					tc.err.Number, tc.where, used.Closed(), got, tc.fatal)
			}
			// The other idle connection: probed after a server-gone report, not otherwise.
			before := p.Stats().Validations
			c, err = db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_ = c.Close()
			if probed := p.Stats().Validations > before; probed != tc.fatal {
				t.Fatalf("after error %d from rows: next acquire probed %v; want %v", tc.err.Number, probed, tc.fatal)
			}
		})
	}
}

// fillIdle makes the pool hold n idle connections by borrowing n at once through db and
// returning them: for pools with MinIdleConns -1, whose creator then dials only for waiters, so
// that no replacement connection appears behind the test's back.
func fillIdle(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	ctx, cancel := deadCtx()
	defer cancel()
	conns := make([]*sql.Conn, n)
	for i := range conns {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	for _, c := range conns {
		_ = c.Close()
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Two result sets open at once on one borrow: each keeps its own rows (the second gets its own
// wrapper), and the second one's fatal error is observed.
func TestRowsTwoOpenAtOnce(t *testing.T) {
	fc := fakedb.New()
	rec := &closeRecorder{}
	p, err := pool.New(failRowsConnector{Connector: fc, err: &mysql.MySQLError{Number: 1053}},
		pool.Config{MaxConns: 1, Trace: rec.trace(), Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	db := p.OpenDB()
	defer db.Close()
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := c.QueryContext(ctx, "SELECT 1")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.QueryContext(ctx, "SELECT FAIL next")
	if err != nil {
		t.Fatal(err)
	}
	var v1, v2 int
	if !r1.Next() || r1.Scan(&v1) != nil || v1 != 1 {
		t.Fatalf("first result set: %d, %v; want 1", v1, r1.Err())
	}
	if !r2.Next() || r2.Scan(&v2) != nil || v2 != 42 {
		t.Fatalf("second result set: %d, %v; want 42", v2, r2.Err())
	}
	if r2.Next() || r2.Err() == nil {
		t.Fatal("second result set: no error")
	}
	if r1.Next() || r1.Err() != nil {
		t.Fatalf("first result set after the second failed: %v", r1.Err())
	}
	_ = r1.Close()
	_ = r2.Close()
	_ = c.Close()
	if rec.count(pool.CloseFatalError) != 1 {
		t.Fatalf("closed for a fatal error: %d; want 1", rec.count(pool.CloseFatalError))
	}
}

// errPacketProxy forwards TCP connections to a MySQL-protocol server and replaces the first
// server packet that contains marker with an error packet (1053, server shutdown), then swallows
// everything else the server sends on that connection while keeping it open: what a client sees
// when a server sends an error packet in the middle of a result set and the socket stays up.
// MariaDB 10.11 shuts a connection's socket down before it could send such an error on KILL or
// shutdown, so a real server cannot be made to do it on demand.
type errPacketProxy struct {
	ln     net.Listener
	target string
	marker []byte
	wg     sync.WaitGroup
}

func newErrPacketProxy(t *testing.T, target, marker string) *errPacketProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &errPacketProxy{ln: ln, target: target, marker: []byte(marker)}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.serve(c) }()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); p.wg.Wait() })
	return p
}

func (p *errPacketProxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_, _ = io.Copy(server, client)
		_ = server.Close()
		_ = client.Close()
	}()
	poisoned := false
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(server, hdr[:]); err != nil {
			return
		}
		payload := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
		if _, err := io.ReadFull(server, payload); err != nil {
			return
		}
		switch {
		case poisoned:
			continue
		case bytes.Contains(payload, p.marker):
			poisoned = true
			msg := "#08S01Server shutdown in progress"
			ep := append([]byte{0xff, 1053 & 0xff, 1053 >> 8}, msg...)
			pkt := append([]byte{byte(len(ep)), byte(len(ep) >> 8), byte(len(ep) >> 16), hdr[3]}, ep...)
			if _, err := client.Write(pkt); err != nil {
				return
			}
			continue
		}
		if _, err := client.Write(append(hdr[:], payload...)); err != nil {
			return
		}
	}
}

// An error packet (1053, server shutdown) in the middle of a result set, through
// go-sql-driver/mysql on a real server (the embedded one, or MariaDB with MYSQL_TEST_DSN):
// the driver returns it from Rows.Next and keeps its connection open (IsValid true). The pool
// must close that connection as fatal when it comes back, and treat 1053 as server-gone: the
// other idle connection is probed at the next acquire although it was returned inside the bypass
// window.
func TestRowsErrorPacketMidResult(t *testing.T) {
	dsn := mysqltest.DSN(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	const marker = "sqlpool-inject-1053"
	proxy := newErrPacketProxy(t, cfg.Addr, marker)
	cfg.Addr = proxy.ln.Addr().String()
	rec := &closeRecorder{}
	p := newMySQLPool(t, cfg.FormatDSN(), pool.Config{MaxConns: 2, MinIdleConns: -1, AliveBypassWindow: time.Hour, Trace: rec.trace()})
	db := p.OpenDB()
	defer db.Close()
	fillIdle(t, db, 2) // and no replacement later: the next acquire takes the older idle one
	ctx, cancel := deadCtx()
	defer cancel()

	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := c.QueryContext(ctx, "SELECT 'first' AS v UNION ALL SELECT '"+marker+"'")
	if err != nil {
		t.Fatal(err)
	}
	var first string
	if !rows.Next() || rows.Scan(&first) != nil || first != "first" {
		t.Fatalf("first row %q: %v", first, rows.Err())
	}
	if rows.Next() {
		t.Fatal("the second row arrived: the proxy did not inject the error")
	}
	rowsErr := rows.Err()
	_ = rows.Close()
	_ = c.Close()
	var me *mysql.MySQLError
	if !errors.As(rowsErr, &me) || me.Number != 1053 {
		t.Fatalf("rows error: %v; want error 1053", rowsErr)
	}
	if got := rec.count(pool.CloseFatalError); got != 1 {
		t.Fatalf("error 1053 from Rows.Next: %d connections closed as fatal on release; want 1 (closed: %v)", got, rec.reasons)
	}
	before := p.Stats().Validations
	var one int
	if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("next query: %v", err)
	}
	if p.Stats().Validations == before {
		t.Fatal("error 1053 (server gone) from rows did not make the pool probe its idle connection")
	}
}
