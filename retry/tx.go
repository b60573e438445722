package retry

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	"github.com/sqlpool/sqlpool/pool"
)

// Beginner begins a *sql.Tx. *sql.DB and *sql.Conn are Beginners, and so is
// any type that embeds one, such as sqlx's *sqlx.DB and *sqlx.Conn.
type Beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// Committer is a transaction TxWith commits or rolls back: *sql.Tx, sqlx's
// *sqlx.Tx, or an adapter around another library's transaction (see
// docs/retry.md for GORM's).
type Committer interface {
	Commit() error
	Rollback() error
}

// errNilStarter is the error of a Tx or TxWith called without a way to begin.
var errNilStarter = errors.New("retry: the transaction starter is nil; pass a *sql.DB, a *sql.Conn or another Beginner to Tx, or a begin function such as db.BeginTxx to TxWith")

// Tx runs fn in a transaction begun with db.BeginTx(ctx, opts) and commits it
// when fn returns nil. db is anything that begins a *sql.Tx: a *sql.DB (the
// pool's p.OpenDB()), a *sql.Conn, sqlx's *sqlx.DB. When begin, fn or commit
// fails with a Transient error — a deadlock (1213; PostgreSQL 40P01), a
// serialization failure (40001), a lock wait timeout (1205; 55P03), a
// connection lost before COMMIT was sent (57P01, class 08), a failover to a
// read-only server — Tx rolls the transaction back and runs the whole
// transaction again on a fresh begin, up to p's MaxAttempts, waiting a
// jittered backoff between attempts, as long as p's Budget grants each retry
// and ctx has not ended. p.Dialect classifies the errors the package's own
// rules do not name (see Policy.Classify); when it is nil and db is a *sql.DB
// over a pool (p.OpenDB()), or embeds one, the pool's dialect does.
//
// fn must do all its work through tx and must not commit or roll it back
// itself; since it may run more than once, it must not have effects outside
// the transaction that cannot be repeated. If fn panics, Tx rolls back and
// panics again. With a *sql.Conn every attempt runs on that one connection:
// a connection lost makes the retries fail too, so prefer a *sql.DB.
//
// When the connection is lost while COMMIT is in flight, or the server
// answers 1180 or 08007, or the pool reports a pool.CommitUnknownError, the
// transaction may or may not have been committed: Tx does not retry and
// returns an error matching ErrAmbiguousCommit. When opts asks for a
// read-only transaction, a 1792 or 25006 error is the caller's own and is
// Permanent.
//
// Tx returns nil once a commit succeeds. Otherwise it returns an *Error
// wrapping the last attempt's error and the number of attempts; errors.Is and
// errors.As reach the cause. A nil db is a Permanent error, not a panic.
func Tx(ctx context.Context, db Beginner, opts *sql.TxOptions, p Policy, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if db == nil || isNilValue(db) || fn == nil {
		return nilStarter(&p, fn == nil)
	}
	if p.Dialect == nil {
		p.Dialect = dialectOf(db)
	}
	if p.Observer == nil {
		p.Observer = poolObserver(db)
	}
	return run(ctx, &p, OpTx, nil, &txJob[*sql.Tx]{db: db, opts: opts, fn: fn})
}

// TxWith is Tx for a transaction of any type: begin starts one (sqlx's
// db.BeginTxx, or an adapter for GORM), fn does the work, and TxWith commits
// it when fn returns nil, rolls it back and runs the whole transaction again
// on a Transient error, and reports an unknown COMMIT outcome as
// ErrAmbiguousCommit — all as Tx does, with the same Policy, classes and
// Observer events (Op is OpTx).
//
// T's Commit must return the driver's error (through database/sql's, as
// *sqlx.Tx and GORM's transaction do) for the outcome of a failed COMMIT to
// be read right: an error TxWith does not know is Ambiguous. A nil begin or
// fn is a Permanent error, not a panic.
func TxWith[T Committer](ctx context.Context, begin func(ctx context.Context, opts *sql.TxOptions) (T, error),
	opts *sql.TxOptions, p Policy, fn func(ctx context.Context, tx T) error) error {
	if begin == nil || fn == nil {
		return nilStarter(&p, fn == nil)
	}
	return run(ctx, &p, OpTx, nil, &txJob[T]{begin: begin, opts: opts, fn: fn})
}

// dialectOf returns the dialect of the pool under db — a *sql.DB over a pool (p.OpenDB(), or
// sql.OpenDB(p)), or a type that embeds one, such as *sqlx.DB — and nil for any other starter.
func dialectOf(db Beginner) Classifier {
	dr, ok := db.(interface{ Driver() driver.Driver })
	if !ok {
		return nil
	}
	if pd, ok := dr.Driver().(interface{ Dialect() pool.Dialect }); ok {
		return pd.Dialect()
	}
	return nil
}

// nilStarter is the error of Tx or TxWith called without a starter or
// without fn, reported to the Observer as a call that ended before its first
// attempt.
func nilStarter(p *Policy, noFn bool) error {
	err := errNilStarter
	if noFn {
		err = errors.New("retry: fn is nil; pass the function that does the transaction's work")
	}
	r := p.resolve()
	return r.finish(&Error{Op: OpTx, Err: err, Class: Permanent})
}

// txJob is the transaction of one Tx (db set) or TxWith (begin set) call.
type txJob[T Committer] struct {
	db    Beginner // T is *sql.Tx
	begin func(context.Context, *sql.TxOptions) (T, error)
	opts  *sql.TxOptions
	fn    func(context.Context, T) error
}

// attempt runs one attempt of Tx or TxWith: begin, fn, commit, rolling back
// on any failure before commit.
func (j *txJob[T]) attempt(ctx context.Context, d Classifier) (err error, class Class) {
	readOnly := j.opts != nil && j.opts.ReadOnly
	var tx T
	if j.db != nil {
		// Called directly rather than through a method value, which would allocate.
		var st *sql.Tx
		st, err = j.db.BeginTx(ctx, j.opts)
		tx = any(st).(T)
	} else {
		tx, err = j.begin(ctx, j.opts)
	}
	if err != nil {
		return err, classifyAttempt(err, readOnly, d)
	}
	finished := false
	defer func() {
		if !finished {
			// fn panicked: roll back, and let the panic go on.
			_ = tx.Rollback()
		}
	}()
	if err = j.fn(ctx, tx); err != nil {
		finished = true
		// After 1205 InnoDB rolled back only the statement (after 55P03
		// PostgreSQL aborted the transaction): the rollback ends the
		// transaction and frees its locks before the next attempt. Its own
		// error does not matter (a lost connection is discarded).
		_ = tx.Rollback()
		return err, classifyAttempt(err, readOnly, d)
	}
	finished = true
	if err = tx.Commit(); err != nil {
		return classifyCommit(ctx, err, readOnly, d)
	}
	return nil, Permanent
}
