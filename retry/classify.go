package retry

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/sqlstate"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/validate"
)

// Class says whether a failed unit of work is worth another try.
type Class uint8

const (
	// Permanent errors are returned at once: running the work again would
	// fail the same way, or the caller's ctx has ended.
	Permanent Class = iota
	// Transient errors mean the whole unit of work can run again: nothing of
	// the failed attempt survives, and a later attempt may succeed.
	Transient
	// Ambiguous errors mean the outcome is unknown: a COMMIT may or may not
	// have been applied. They are never retried and are reported as
	// ErrAmbiguousCommit.
	Ambiguous
)

// String returns "permanent", "transient" or "ambiguous".
func (c Class) String() string {
	switch c {
	case Permanent:
		return "permanent"
	case Transient:
		return "transient"
	case Ambiguous:
		return "ambiguous"
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// Server error numbers this package decides on.
const (
	erConCount           = 1040 // ER_CON_COUNT_ERROR: too many connections
	erUnknownCom         = 1047 // ER_UNKNOWN_COM_ERROR: Galera node not ready
	erNetPacketTooLarge  = 1153 // ER_NET_PACKET_TOO_LARGE
	erErrorDuringCommit  = 1180 // ER_ERROR_DURING_COMMIT
	erTooManyUserConns   = 1203 // ER_TOO_MANY_USER_CONNECTIONS
	erLockWaitTimeout    = 1205 // ER_LOCK_WAIT_TIMEOUT
	erLockDeadlock       = 1213 // ER_LOCK_DEADLOCK
	erOptionPrevents     = 1290 // ER_OPTION_PREVENTS_STATEMENT (--read-only when validate says so)
	erCantExecReadOnlyTx = 1792 // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
	erReadOnlyMode       = 1836 // ER_READ_ONLY_MODE
)

// Classify returns the Class of err, as the package documentation lists:
// Transient for a deadlock (1213; PostgreSQL 40P01), a serialization failure
// (PostgreSQL 40001), a lock wait timeout (1205; 55P03), too many
// connections (1040, 1203; 53300), a read-only server after a failover (1290
// with --read-only, 1836, 1792; 25006), a Galera node not ready (1047),
// driver.ErrBadConn and a connection lost outside COMMIT; Ambiguous for 1180,
// 08007, an error whose AmbiguousCommit method reports true
// (pool.CommitUnknownError) and anything that matches ErrAmbiguousCommit;
// Permanent for nil, the caller's context ending, and everything else.
//
// Classify knows nothing of where err came from. It assumes the unit of work
// is one that Do or Tx runs: work declared idempotent, or a transaction whose
// COMMIT was not sent. Tx itself tells a failed COMMIT apart and reports
// such outcomes as ErrAmbiguousCommit, which Classify then sees as Ambiguous.
// Classify walks the whole error chain (fmt.Errorf %w and errors.Join).
func Classify(err error) Class {
	return classify(err, false, nil)
}

// Classify returns the Class Do and Tx give err under p: the package's
// Classify, and for an error none of its rules names, p.Dialect's verdict
// when p.Dialect is set — Transient when the dialect calls the error
// transient (pool.ErrorClass.Transient) or fatal to the connection for a
// reason other than a refused login, Permanent otherwise. With a nil
// Dialect it is Classify.
func (p Policy) Classify(err error) Class {
	return classify(err, false, p.Dialect)
}

// Classifier is what Policy.Dialect needs of a pool.Dialect: its verdict on
// one error. Every pool.Dialect is one, such as mysqldialect.Dialect and
// pgdialect.Dialect, or a type of your own that embeds one and overrides
// Classify.
type Classifier interface {
	Classify(err error, s pool.ErrorContext) pool.ErrorClass
}

// classify is Classify knowing whether the caller opened a read-only
// transaction itself, which makes 1792 its own mistake, and asking d (when
// not nil) about an error the package's own rules do not name.
func classify(err error, readOnlyTx bool, d Classifier) Class {
	c, named := classifyNamed(err, readOnlyTx)
	if named || d == nil {
		return c
	}
	return fromDialect(d.Classify(err, pool.ErrorContext{ReadOnlyTx: readOnlyTx}))
}

// fromDialect is the Class of a dialect's verdict on an error the package's
// own rules do not name: Transient when the dialect says a retried
// transaction may not meet it again, or that the connection is lost (the
// server rolls back the open transaction of a connection that went away) and
// not because the server refused a login; Permanent otherwise.
func fromDialect(ec pool.ErrorClass) Class {
	if ec.Transient || ec.Fatal && !ec.Login {
		return Transient
	}
	return Permanent
}

// classifyNamed is the package's own rules: the class of err and true when a
// rule names it, Permanent and false for an error no rule names (an
// application's error, 1062, 42601, ...).
func classifyNamed(err error, readOnlyTx bool) (Class, bool) {
	if err == nil {
		return Permanent, true
	}
	if errors.Is(err, ErrAmbiguousCommit) || ambiguousCommit(err) {
		return Ambiguous, true
	}
	me, isMySQL := errors.AsType[*mysql.MySQLError](err)
	if isMySQL && me != nil && me.Number == erErrorDuringCommit {
		return Ambiguous, true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Permanent, true
	}
	if m, ok := pgMeaning(err, readOnlyTx); ok {
		switch {
		case m.Unknown:
			return Ambiguous, true
		case m.Retry:
			return Transient, true
		}
		return Permanent, true
	}
	if safeToRetry(err) {
		return Transient, true
	}
	if isMySQL && me != nil {
		switch me.Number {
		case erLockDeadlock, erLockWaitTimeout, erConCount, erTooManyUserConns, erUnknownCom, erReadOnlyMode:
			return Transient, true
		case erCantExecReadOnlyTx:
			if readOnlyTx {
				return Permanent, true
			}
			return Transient, true
		case erNetPacketTooLarge:
			return Permanent, true
		}
		// 1290 only with --read-only, the connection-loss codes, SQLSTATE 08.
		if validate.Check(me, validate.Session{ReadOnlyTx: readOnlyTx}).Fatal {
			return Transient, true
		}
		// A server answer that says nothing about the connection (1062,
		// 1064, 1317, 1969, ...). A network error further down the chain
		// is still a lost connection.
	}
	if errors.Is(err, driver.ErrBadConn) {
		return Transient, true
	}
	if validate.Check(err, validate.Session{ReadOnlyTx: readOnlyTx}).Fatal {
		return Transient, true
	}
	return Permanent, false
}

// classifyAttempt is the class Do and Tx act on: classify, except that an
// error that already went through a retry loop is not retried again.
func classifyAttempt(err error, readOnlyTx bool, d Classifier) Class {
	c := classify(err, readOnlyTx, d)
	if c == Transient {
		if _, nested := errors.AsType[*Error](err); nested {
			return Permanent
		}
	}
	return c
}

// classifyCommit is the class of an error returned by sql.Tx.Commit. COMMIT
// may have been applied unless the error proves it was not.
func classifyCommit(ctx context.Context, err error, readOnlyTx bool, d Classifier) (error, Class) {
	if errors.Is(err, sql.ErrTxDone) {
		// database/sql rolled the transaction back because ctx ended, or fn
		// committed or rolled it back itself: COMMIT was not sent.
		if cerr := ctx.Err(); cerr != nil {
			return &txDoneError{ctx: cerr, err: err}, Permanent
		}
		return err, Permanent
	}
	if ambiguousCommit(err) {
		// COMMIT was sent and its context ended before the answer, or the driver's
		// error does not tell (the pool's pool.CommitUnknownError).
		return err, Ambiguous
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// database/sql checks ctx before it calls the driver's Commit, which
		// takes no ctx: a ctx error means COMMIT was not sent.
		return err, Permanent
	}
	if errors.Is(err, ErrAmbiguousCommit) {
		return err, Ambiguous
	}
	if errors.Is(err, driver.ErrBadConn) {
		// Nothing was sent (or, with rejectReadOnly, a read-only server
		// refused the COMMIT).
		return err, classifyAttempt(err, readOnlyTx, d)
	}
	if st, ok := errors.AsType[sqlStater](err); ok && !isNil(st) {
		// A PostgreSQL server's answer to COMMIT.
		state := st.SQLState()
		m, known := sqlstate.Lookup(state, readOnlyTx)
		switch {
		case known && (m.Unknown || m.Fatal && !m.Refused):
			// The connection ended (terminated, shut down, class 08, a session
			// timeout) while COMMIT was in flight, or the server says it does not
			// know (08007).
			return err, Ambiguous
		case known && m.Retry:
			// 40001 from a serializable transaction's commit-time check, 40P01,
			// or a refusal: rolled back, not committed.
			return err, classifyAttempt(err, readOnlyTx, d)
		case !known && len(state) == 5 && strings.Contains(" 53 57 58 XX ", " "+state[:2]+" "):
			// Insufficient resources, operator intervention, a system or internal
			// error: possibly a FATAL or PANIC after the commit record was written.
			return err, Ambiguous
		}
		// Any other answer (23505 from a deferred constraint, 40002, ...): an ERROR
		// to COMMIT, and the server rolled the transaction back.
		return err, Permanent
	}
	if me, ok := errors.AsType[*mysql.MySQLError](err); ok && me != nil {
		switch me.Number {
		case erErrorDuringCommit:
			return err, Ambiguous
		case erOptionPrevents, erReadOnlyMode, erCantExecReadOnlyTx, erUnknownCom:
			// A refusal: the server did not run the COMMIT.
			return err, classifyAttempt(err, readOnlyTx, d)
		}
		if validate.Check(me, validate.Session{ReadOnlyTx: readOnlyTx}).Fatal {
			// Shutdown, a killed connection, a network error on the server's
			// side, while COMMIT was in flight.
			return err, Ambiguous
		}
		// Any other server answer to COMMIT (1213 from a Galera
		// certification failure, ...): the transaction was not committed.
		return err, classifyAttempt(err, readOnlyTx, d)
	}
	// mysql.ErrInvalidConn, io.EOF, a network error, or an error this
	// package does not know: the outcome is unknown.
	return err, Ambiguous
}

// sqlStater is a PostgreSQL server error: pgx's *pgconn.PgError and lib/pq's *pq.Error both
// have this method.
type sqlStater interface {
	error
	SQLState() string
}

// pgMeaning returns what the first PostgreSQL server error in err's chain means, when its
// code says anything about the connection or the transaction.
func pgMeaning(err error, readOnlyTx bool) (sqlstate.Meaning, bool) {
	st, ok := errors.AsType[sqlStater](err)
	if !ok || isNil(st) {
		return sqlstate.Meaning{}, false
	}
	return sqlstate.Lookup(st.SQLState(), readOnlyTx)
}

// safeToRetry reports whether err's chain holds an error that says nothing was sent, through
// the SafeToRetry method pgx's connection errors have (pgconn.SafeToRetry).
func safeToRetry(err error) bool {
	s, ok := errors.AsType[interface {
		error
		SafeToRetry() bool
	}](err)
	return ok && !isNil(s) && s.SafeToRetry()
}

// ambiguousCommit reports whether err's chain holds an error whose AmbiguousCommit method
// reports true (pool.CommitUnknownError).
func ambiguousCommit(err error) bool {
	a, ok := errors.AsType[interface {
		error
		AmbiguousCommit() bool
	}](err)
	return ok && !isNil(a) && a.AmbiguousCommit()
}

// isNil reports whether e holds a nil pointer (a typed nil in an error chain), whose methods
// would dereference it.
func isNil(e error) bool {
	v := reflect.ValueOf(e)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// isNilValue reports whether v holds a nil pointer (a typed nil *sql.DB),
// whose methods would panic.
func isNilValue(v any) bool {
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}

// txDoneError is sql.ErrTxDone from a Commit after the caller's ctx ended.
type txDoneError struct{ ctx, err error }

func (e *txDoneError) Error() string   { return e.ctx.Error() + ": " + e.err.Error() }
func (e *txDoneError) Unwrap() []error { return []error{e.ctx, e.err} }
