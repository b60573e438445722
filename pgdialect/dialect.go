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
// AUTHORIZATION, search_path, SET SESSION CHARACTERISTICS, SET TRANSACTION outside a
// transaction, set_config, LISTEN, session advisory locks, temporary objects, SQL PREPARE,
// DECLARE … WITH HOLD, nextval/setval, and the transaction: from the protocol's transaction
// status where the driver exposes it (pgx PgConn().TxStatus(), lib/pq's connection state),
// including the failed state 'E', from statements otherwise. Release then runs ROLLBACK (when in
// a transaction) and one simple-protocol string of the targeted resets (CLOSE ALL, RESET SESSION
// AUTHORIZATION, RESET ROLE, RESET name or RESET ALL, UNLISTEN *, SELECT
// pg_advisory_unlock_all(), DISCARD SEQUENCES, RESET transaction_isolation and its two
// siblings, DEALLOCATE name), which keeps the driver's protocol-level prepared statements. A
// state it cannot follow (sql.Conn.Raw, DO, CALL, a function it does not know) gets all of those
// at once, and a check that closes the connection when the session has a temporary schema or a
// custom setting any statement named. What PostgreSQL removes only with the session closes the
// connection at release: a custom setting (a name with a dot), a temporary object, LOAD,
// DEALLOCATE ALL, DISCARD ALL. When a borrower changes how names resolve (search_path, the role,
// a temporary object), pgx's statements prepared by earlier borrowers and not run in this one
// are dropped from pgx's caches and deallocated, and at release all of them, so that no borrower
// runs a statement prepared under other names. A clean session sends nothing.
//
// Server-side cancel (pool.ServerCancel, on with pool.Config.ServerCancelTimeout's default): a
// connection closed after its statement's context ended has that statement cancelled with
// pg_cancel_backend(pid) on a side connection, and stays counted against MaxConns until its
// backend leaves pg_stat_activity. The PID comes from the connection's BackendKeyData (no round
// trip); a connection of another driver is not cancelled.
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

	"github.com/sqlpool/sqlpool/internal/sqlstate"
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
	t := &tracker{txStatus: txStatusFunc(dc), sock: socketOf(dc), closed: closedFunc(dc), cacheFirst: isPq, skipReset: isPq || defaultReset(dc)}
	if c, ok := dc.(*stdlib.Conn); ok {
		t.pgx, t.pgxOK = newPgxCaches(c.Conn())
	}
	return t, nil
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
	if !isPqType(t) {
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

// Commit commits t, and wraps in a *pool.CommitUnknownError the two drivers' Commit errors
// that do not tell whether COMMIT reached the server (commitOutcomeUnknown).
func (dialect) Commit(_ context.Context, dc driver.Conn, t driver.Tx) error {
	err := t.Commit()
	if err != nil && commitOutcomeUnknown(dc, err) {
		err = &pool.CommitUnknownError{Err: err, Reason: "the driver's error does not tell whether COMMIT reached the server"}
	}
	return err
}

// commitOutcomeUnknown reports the two drivers' Commit errors that do not tell whether COMMIT
// reached the server:
//
//   - lib/pq returns driver.ErrBadConn when the connection was already bad (nothing sent) and
//     also when a FATAL answer or EOF came after COMMIT was sent;
//   - pgx's stdlib commits with the context the transaction began with: when that context ends
//     while COMMIT is in flight, Commit returns the context's error, which alone reads as
//     "database/sql did not send COMMIT". A context that had ended before pgx wrote anything
//     gives an error pgx marks SafeToRetry, and stays as it is.
func commitOutcomeUnknown(dc driver.Conn, err error) bool {
	if isPqConn(dc) {
		return errors.Is(err, driver.ErrBadConn)
	}
	if _, ok := dc.(*stdlib.Conn); ok {
		return (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) && !pgconn.SafeToRetry(err)
	}
	return false
}

// isPqConn reports whether dc is lib/pq's connection (its type is unexported: matched by package
// path and name).
func isPqConn(dc driver.Conn) bool { return isPqType(reflect.TypeOf(dc)) }

// isPqType reports whether t is *pq.conn.
func isPqType(t reflect.Type) bool {
	return t != nil && t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct &&
		t.Elem().PkgPath() == "github.com/lib/pq" && t.Elem().Name() == "conn"
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
	state, severity, msg := serverError(err)
	if state == "26000" || state == "0A000" && strings.HasPrefix(msg, "cached plan must not change result type") {
		return pool.ErrorClass{StaleStatement: true}
	}
	if state != "" {
		if m, ok := sqlstate.Lookup(state, readOnlyTx); ok {
			if m.Fatal {
				return pool.ErrorClass{Fatal: true, ServerGone: m.Gone, Reason: m.Reason}
			}
			return pool.ErrorClass{Transient: m.Retry}
		}
		if severity == "FATAL" || severity == "PANIC" {
			return pool.ErrorClass{Fatal: true, Login: sqlstate.Login(state), Reason: "FATAL error from server (" + state + ")"}
		}
		return pool.ErrorClass{Login: sqlstate.Login(state)}
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

// serverError returns the SQLSTATE, severity and message of the first server error of either
// driver in err's chain; all empty when there is none.
func serverError(err error) (state, severity, msg string) {
	var pge *pgconn.PgError
	var pqe *pq.Error
	switch {
	case errors.As(err, &pge):
		return pge.Code, pge.Severity, pge.Message
	case errors.As(err, &pqe):
		return string(pqe.Code), pqe.Severity, pqe.Message
	}
	return "", "", ""
}

// AmbiguousCommit reports whether err, returned by COMMIT, leaves the transaction's outcome
// unknown: the connection failed (or 08007) after COMMIT may have reached the server, so the
// transaction must not be retried blindly. A transient error (40001, 40P01, 55P03), a refusal
// before anything ran (57P03, 53300, 25006) or any other answer from the server proves it was
// not committed.
func AmbiguousCommit(err error) bool {
	if err == nil {
		return false
	}
	c := classify(err, false)
	if !c.Fatal {
		return false
	}
	state, _, _ := serverError(err)
	if m, ok := sqlstate.Lookup(state, false); ok && m.Refused {
		return false // refused before anything ran
	}
	return true
}

// Transient reports whether err is a serialization failure (40001), a deadlock (40P01) or a
// lock not available (55P03): the whole transaction may be retried.
func Transient(err error) bool { return classify(err, false).Transient }
