// Package pgdialect is PostgreSQL's pool.Dialect, for pgx's database/sql driver
// (github.com/jackc/pgx/v5/stdlib) and lib/pq. Importing it registers it: pool.New then chooses
// it for those drivers' connectors, and a program writes
//
//	import _ "github.com/sqlpool/sqlpool/pgdialect"
//	…
//	p, err := pool.New(stdlib.GetConnector(*cfg), pool.Config{})
//
// or sets pool.Config.Dialect to pgdialect.Dialect explicitly.
//
// Errors: a connection is discarded on 57P01 (admin shutdown, pg_terminate_backend), 57P02
// (crash shutdown), 57P03 (cannot connect now), 57P04/57P05, 25P03/25P04 (session timeouts),
// SQLSTATE class 08, 53300 (too many connections), 25006 (read-only transaction) unless the
// borrower opened a read-only transaction itself (a failover to a standby), any FATAL or PANIC
// error, pgx's closed connection (pgx closes a connection whose context ended), and the network
// and driver errors package validate knows. 57P01, 57P02, 57P03, 25006 and refused or reset
// sockets say the server went away. 40001, 40P01 and 55P03 are transient: retry the whole
// transaction on the same or another connection.
//
// Session state: the tracker follows SET / RESET / SET LOCAL, SET ROLE, SET SESSION
// AUTHORIZATION, search_path, SET SESSION CHARACTERISTICS, set_config(…, false), LISTEN,
// session advisory locks, temporary objects, SQL PREPARE, DECLARE … WITH HOLD, nextval/setval,
// and the transaction: from the protocol's transaction status where the driver exposes it (pgx
// PgConn().TxStatus(), lib/pq's connection state), including the failed state 'E', from
// statements otherwise. Release then runs ROLLBACK (when in a transaction) and one
// simple-protocol string of the targeted resets (CLOSE ALL, RESET SESSION AUTHORIZATION, RESET
// ROLE, RESET name or RESET ALL, UNLISTEN *, SELECT pg_advisory_unlock_all(), DISCARD TEMP,
// DISCARD SEQUENCES, DEALLOCATE name), which keeps the driver's protocol-level prepared
// statements. A state it cannot follow (sql.Conn.Raw, DO, CALL) gets all of those at once:
// everything DISCARD ALL resets except DEALLOCATE ALL, which would break pgx's statement
// cache. LOAD, DEALLOCATE ALL and DISCARD ALL close the connection at release. A clean session sends nothing.
package pgdialect

import (
	"context"
	"database/sql/driver"
	"errors"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/lib/pq"

	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/validate"
)

// Dialect is PostgreSQL's dialect.
var Dialect pool.Dialect = dialect{}

func init() {
	pool.RegisterDialect(Dialect, "github.com/jackc/pgx/v5/stdlib", "github.com/lib/pq")
}

type dialect struct{}

func (dialect) Name() string { return "postgres" }

func (dialect) Probe(ctx context.Context, dc driver.Conn, timeout time.Duration) error {
	return validate.Probe(ctx, dc, timeout)
}

func (dialect) NewSession(ctx context.Context, dc driver.Conn) (pool.SessionTracker, error) {
	_, isPq := pqStatusField(reflect.TypeOf(dc))
	return &tracker{txStatus: txStatusFunc(dc), sock: socketOf(dc), closed: closedFunc(dc), cacheFirst: isPq, skipReset: isPq || defaultReset(dc)}, nil
}

// Cancel asks the server to cancel the statement running on dc (PostgreSQL's cancel request,
// on a connection of its own), for pgx's connections; it returns errors.ErrUnsupported for
// others. The pool's server-side cancel calls it.
func (dialect) Cancel(ctx context.Context, dc driver.Conn) error {
	if c, ok := dc.(*stdlib.Conn); ok {
		return c.Conn().PgConn().CancelRequest(ctx)
	}
	return errors.ErrUnsupported
}

// txStatusFunc returns a reader of dc's protocol transaction status, or nil.
func txStatusFunc(dc driver.Conn) func() byte {
	switch c := dc.(type) {
	case *stdlib.Conn:
		pc := c.Conn().PgConn()
		return pc.TxStatus
	}
	if idx, ok := pqStatusField(reflect.TypeOf(dc)); ok {
		v := reflect.ValueOf(dc).Elem().Field(idx)
		return func() byte { return byte(v.Uint()) }
	}
	return nil
}

var pqField struct {
	once sync.Once
	typ  reflect.Type
	idx  int
	ok   bool
}

// pqStatusField finds lib/pq's unexported conn.txnStatus (the ReadyForQuery status byte).
func pqStatusField(t reflect.Type) (int, bool) {
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct ||
		t.Elem().PkgPath() != "github.com/lib/pq" || t.Elem().Name() != "conn" {
		return 0, false
	}
	pqField.once.Do(func() {
		f, ok := t.Elem().FieldByName("txnStatus")
		if ok && f.Type.Kind() == reflect.Uint8 && len(f.Index) == 1 {
			pqField.typ, pqField.idx, pqField.ok = t, f.Index[0], true
		}
	})
	return pqField.idx, pqField.ok && pqField.typ == t
}

// code is one SQLSTATE's meaning.
type code struct {
	fatal, gone, transient bool
	reason                 string
}

var codes = map[string]code{
	"57P01": {fatal: true, gone: true, reason: "admin shutdown or terminated (57P01)"},
	"57P02": {fatal: true, gone: true, reason: "crash shutdown (57P02)"},
	"57P03": {fatal: true, gone: true, reason: "cannot connect now (57P03)"},
	"57P04": {fatal: true, reason: "database dropped (57P04)"},
	"57P05": {fatal: true, reason: "idle session timeout (57P05)"},
	"25P03": {fatal: true, reason: "idle-in-transaction session timeout (25P03)"},
	"25P04": {fatal: true, reason: "transaction timeout (25P04)"},
	"53300": {fatal: true, reason: "too many connections (53300)"},
	"40001": {transient: true},
	"40P01": {transient: true},
	"55P03": {transient: true},
}

// Classify implements pool.Dialect.
func (dialect) Classify(err error, s pool.ErrorContext) pool.ErrorClass {
	c := classify(err, s.ReadOnlyTx)
	if !c.Fatal && err != nil {
		// pgx closes a connection whose context ended mid-statement (and after some
		// protocol errors); nothing can be sent on it any more.
		if sc, ok := s.Conn.(*stdlib.Conn); ok && sc.Conn().IsClosed() {
			return pool.ErrorClass{Fatal: true, Reason: "pgx closed the connection"}
		}
	}
	return c
}

func classify(err error, readOnlyTx bool) pool.ErrorClass {
	if err == nil {
		return pool.ErrorClass{}
	}
	var state, severity, msg string
	var pge *pgconn.PgError
	var pqe *pq.Error
	switch {
	case errors.As(err, &pge):
		state, severity, msg = pge.Code, pge.Severity, pge.Message
	case errors.As(err, &pqe):
		state, severity, msg = string(pqe.Code), pqe.Severity, pqe.Message
	}
	if state == "26000" || state == "0A000" && strings.HasPrefix(msg, "cached plan must not change result type") {
		return pool.ErrorClass{StaleStatement: true}
	}
	if state != "" {
		if c, ok := codes[state]; ok {
			if c.fatal {
				return pool.ErrorClass{Fatal: true, ServerGone: c.gone, Reason: c.reason}
			}
			return pool.ErrorClass{Transient: c.transient}
		}
		switch {
		case state == "25006" && !readOnlyTx:
			return pool.ErrorClass{Fatal: true, ServerGone: true, Reason: "read-only transaction the borrower did not open (25006): a standby or demoted primary"}
		case state == "08007":
			return pool.ErrorClass{Fatal: true, Reason: "transaction resolution unknown (08007)"}
		case len(state) == 5 && state[:2] == "08":
			return pool.ErrorClass{Fatal: true, Reason: "connection exception (SQLSTATE class 08)"}
		case severity == "FATAL" || severity == "PANIC":
			return pool.ErrorClass{Fatal: true, Reason: "FATAL error from server (" + state + ")"}
		}
		return pool.ErrorClass{}
	}
	if errors.Is(err, pgconn.ErrConnClosed) {
		return pool.ErrorClass{Fatal: true, Reason: "pgx: conn closed"}
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		v := validate.Check(err, validate.Session{})
		if v.Fatal {
			return pool.ErrorClass{Fatal: true, ServerGone: v.ServerGone, Reason: v.Reason}
		}
		return pool.ErrorClass{Fatal: true, Reason: "pgx: connect failed"}
	}
	v := validate.Check(err, validate.Session{ReadOnlyTx: readOnlyTx})
	return pool.ErrorClass{Fatal: v.Fatal, ServerGone: v.ServerGone, Reason: v.Reason}
}

// AmbiguousCommit reports whether err, returned by COMMIT, leaves the transaction's outcome
// unknown: the connection failed (or 08007) after COMMIT may have reached the server, so the
// transaction must not be retried blindly. A transient error (40001, 40P01, 55P03) or any
// other answer from the server proves it was not committed.
func AmbiguousCommit(err error) bool {
	if err == nil {
		return false
	}
	c := classify(err, false)
	if !c.Fatal {
		return false
	}
	var pge *pgconn.PgError
	var pqe *pq.Error
	if errors.As(err, &pge) && pge.Code == "57P03" || errors.As(err, &pqe) && pqe.Code == "57P03" {
		return false // refused at connect: never sent
	}
	return true
}

// Transient reports whether err is a serialization failure (40001), a deadlock (40P01) or a
// lock not available (55P03): the whole transaction may be retried.
func Transient(err error) bool { return classify(err, false).Transient }
