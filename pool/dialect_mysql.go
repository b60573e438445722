package pool

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"time"

	"github.com/sqlpool/sqlpool/txstate"
	"github.com/sqlpool/sqlpool/validate"
)

// MySQL is the MySQL/MariaDB dialect: errors classified by package validate, the session
// followed by package txstate's Tracker from a baseline recorded at connect
// (txstate.BaselineQuery), liveness by validate.Probe. New chooses it for go-sql-driver's
// connector and for every connector no other dialect is registered for. It imports no driver.
var MySQL Dialect = mysqlDialect{}

type mysqlDialect struct{}

// erLockDeadlock and erLockWaitTimeout are MySQL's transient errors (ER_LOCK_DEADLOCK,
// ER_LOCK_WAIT_TIMEOUT).
const (
	erLockDeadlock    = 1213
	erLockWaitTimeout = 1205
)

func (mysqlDialect) Name() string { return "mysql" }

func (mysqlDialect) Classify(err error, s ErrorContext) ErrorClass {
	v := validate.Check(err, validate.Session{ReadOnlyTx: s.ReadOnlyTx})
	c := ErrorClass{Fatal: v.Fatal, ServerGone: v.ServerGone, Reason: v.Reason}
	if !v.Fatal {
		if n, ok := validate.ErrorNumber(err); ok {
			c.Transient = n == erLockDeadlock || n == erLockWaitTimeout
			c.StatementLimit = n == erMaxPreparedStmtCount
		}
	}
	return c
}

func (mysqlDialect) Probe(ctx context.Context, dc driver.Conn, timeout time.Duration) error {
	return validate.Probe(ctx, dc, timeout)
}

// goSQLDriver is go-sql-driver/mysql's package path.
const goSQLDriver = "github.com/go-sql-driver/mysql"

// CommitContext commits a go-sql-driver transaction by sending COMMIT through the connection's
// ExecContext, which watches ctx (go-sql-driver's Tx.Commit sends the same COMMIT without
// one); when ctx ends first the driver closes the socket and the outcome is unknown. When the
// driver sent nothing (driver.ErrBadConn), and for any other driver's transaction, the
// transaction's own Commit answers.
func (mysqlDialect) CommitContext(ctx context.Context, dc driver.Conn, t driver.Tx) error {
	if pkgPath(t) != goSQLDriver {
		return t.Commit()
	}
	err := execDriver(ctx, dc, "COMMIT")
	if errors.Is(err, driver.ErrBadConn) {
		// go-sql-driver sent nothing (its connection was closed already): the driver's own
		// Commit answers as plain database/sql would (mysql.ErrInvalidConn).
		return t.Commit()
	}
	return err
}

// NewSession records the session baseline in one round trip and starts the tracker from it.
func (mysqlDialect) NewSession(ctx context.Context, dc driver.Conn) (SessionTracker, error) {
	s := &mysqlSession{}
	b, known, err := queryBaseline(ctx, dc)
	if err != nil {
		return nil, err
	}
	// When the driver could not answer the baseline query the tracker has no baseline and
	// plans a discard for any change it cannot undo.
	if known {
		s.t.Reset(b)
	}
	return s, nil
}

// mysqlSession is MySQL's SessionTracker: a txstate.Tracker.
type mysqlSession struct {
	t txstate.Tracker
}

func (s *mysqlSession) Begin(opts driver.TxOptions) { s.t.Begin(opts) }
func (s *mysqlSession) Commit()                     { s.t.Commit() }
func (s *mysqlSession) Rollback()                   { s.t.Rollback() }
func (s *mysqlSession) Statement(query string)      { s.t.Statement(query) }
func (s *mysqlSession) Failed()                     { s.t.Failed() }
func (s *mysqlSession) Unknown()                    { s.t.Unknown() }
func (s *mysqlSession) Clean() bool                 { return s.t.Clean() }
func (s *mysqlSession) ReadOnlyTx() bool            { return s.t.ReadOnlyTx() }
func (s *mysqlSession) Done()                       { s.t.Done() }

// Result tells the tracker the last insert id: zero means the statement generated no
// AUTO_INCREMENT value, so LAST_INSERT_ID() needs no reset for it.
func (s *mysqlSession) Result(r driver.Result) {
	if id, err := r.LastInsertId(); err == nil {
		s.t.InsertID(id)
	}
}

func (s *mysqlSession) Plan() ReleasePlan {
	p := s.t.Plan()
	switch p.Action {
	case txstate.ActionNone:
		return ReleasePlan{}
	case txstate.ActionDiscard:
		return ReleasePlan{Discard: true, Reason: p.Reason}
	}
	return ReleasePlan{Statements: p.Statements, Reason: p.Reason}
}

var releaseAllLocks = []string{"SELECT RELEASE_ALL_LOCKS()"}

func (s *mysqlSession) BeforeClose() []string {
	if s.t.MayHoldUserLocks() {
		return releaseAllLocks
	}
	return nil
}

func (s *mysqlSession) Scope() (string, bool) {
	db, _, known := s.t.Resolution()
	return db, known
}

// queryBaseline runs txstate.BaselineQuery (directly, or prepared when the driver has no
// QueryerContext): once per connection, right after dialling, never on a borrow. A server that
// rejects it with an ordinary (non-fatal) error, such as one that lacks a system variable it
// names, gets txstate.BaselineCoreQuery instead (one more round trip, on such servers only): the
// database, autocommit, isolation and access mode are then still reset, and only a SET of a
// session variable discards the connection. A row whose variable columns cannot be read keeps
// its core columns the same way. A server that rejects both leaves the baseline unknown.
func queryBaseline(ctx context.Context, dc driver.Conn) (txstate.Baseline, bool, error) {
	b, known, rejected, err := runBaseline(ctx, dc, txstate.BaselineQuery)
	if err != nil || !rejected {
		return b, known, err
	}
	b, known, _, err = runBaseline(ctx, dc, txstate.BaselineCoreQuery)
	return b, known, err
}

// runBaseline runs one baseline query and reads its row. rejected reports an ordinary error
// from the server (the query may be retried); err is a fatal one (or the ctx's).
func runBaseline(ctx context.Context, dc driver.Conn, q string) (b txstate.Baseline, known, rejected bool, err error) {
	rows, err := queryDriver(ctx, dc, q)
	if err != nil {
		if v := validate.Check(err, validate.Session{}); v.Fatal || ctx.Err() != nil {
			return b, false, false, err
		}
		return b, false, true, nil
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(dest); err != nil {
		if err == io.EOF {
			return b, false, false, nil
		}
		if v := validate.Check(err, validate.Session{}); v.Fatal || ctx.Err() != nil {
			return b, false, false, err
		}
		return b, false, true, nil
	}
	b, err = txstate.BaselineFromRow(dest)
	if err != nil && len(dest) > txstate.BaselineCoreColumns {
		// A variable column it cannot read: keep the core columns (no variables recorded).
		b, err = txstate.BaselineFromRow(dest[:txstate.BaselineCoreColumns])
	}
	if err != nil {
		return b, false, false, nil
	}
	return b, true, false, nil
}
