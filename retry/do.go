package retry

import (
	"context"
	"database/sql"
	"time"
)

// Do runs fn, and runs it again while it fails with a Transient error (see
// Classify), up to p's MaxAttempts, waiting a jittered backoff between
// attempts, as long as p's Budget grants each retry and ctx has not ended.
//
// The caller declares fn idempotent: Do may run it again after a connection
// was lost while fn's statements were in flight, when they may have been
// applied. Use Tx for a transaction.
//
// Do returns nil when an attempt succeeds. Otherwise it returns an *Error
// wrapping the last attempt's error and the number of attempts; errors.Is and
// errors.As reach the cause, and the ctx error when ctx ended during a wait.
// An Ambiguous error (1180, or a Tx inside fn that lost its COMMIT) is not
// retried and matches ErrAmbiguousCommit. If ctx has already ended, fn does
// not run. With a nil Observer, Do allocates nothing when fn succeeds.
func Do(ctx context.Context, p Policy, fn func(ctx context.Context) error) error {
	return run(ctx, &p, OpDo, fn, nil, nil, nil)
}

// Tx runs fn in a transaction begun with db.BeginTx(ctx, opts) and commits it
// when fn returns nil. When begin, fn or commit fails with a Transient error
// — a deadlock (1213), a lock wait timeout (1205), a connection lost before
// COMMIT was sent, a failover to a read-only server — Tx rolls the
// transaction back and runs the whole transaction again on a fresh begin, up
// to p's MaxAttempts, waiting a jittered backoff between attempts, as long as
// p's Budget grants each retry and ctx has not ended.
//
// fn must do all its work through tx and must not commit or roll it back
// itself; since it may run more than once, it must not have effects outside
// the transaction that cannot be repeated. If fn panics, Tx rolls back and
// panics again.
//
// When the connection is lost while COMMIT is in flight, or the server
// answers 1180, the transaction may or may not have been committed: Tx does
// not retry and returns an error matching ErrAmbiguousCommit. When opts asks
// for a read-only transaction, a 1792 error is the caller's own and is
// Permanent.
//
// Tx returns nil once a commit succeeds. Otherwise it returns an *Error
// wrapping the last attempt's error and the number of attempts; errors.Is and
// errors.As reach the cause.
func Tx(ctx context.Context, db *sql.DB, opts *sql.TxOptions, p Policy, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if p.Observer == nil {
		p.Observer = poolObserver(db) // a pool instrumented with package metrics: its observer
	}
	return run(ctx, &p, OpTx, nil, db, opts, fn)
}

// run is the loop behind Do (fnDo set) and Tx (db and fnTx set). It takes
// the functions rather than a closure so that Do does not allocate.
func run(ctx context.Context, p *Policy, op Op, fnDo func(context.Context) error,
	db *sql.DB, opts *sql.TxOptions, fnTx func(context.Context, *sql.Tx) error) error {
	r := p.resolve()
	if err := ctx.Err(); err != nil {
		return r.finish(&Error{Op: op, Err: err, Class: Permanent})
	}
	r.budget.Deposit()
	readOnly := opts != nil && opts.ReadOnly
	for n := 1; ; n++ {
		if r.obs != nil {
			r.obs.Attempt(op, n)
		}
		var err error
		var class Class
		if fnDo != nil {
			if err = fnDo(ctx); err != nil {
				class = classifyAttempt(err, false)
			}
		} else {
			err, class = txOnce(ctx, db, opts, readOnly, fnTx)
		}
		if err == nil {
			if r.obs != nil {
				r.obs.Done(op, n, nil)
			}
			return nil
		}
		switch {
		case class == Ambiguous:
			if r.obs != nil {
				r.obs.Ambiguous(op, n, err)
			}
			return r.finish(&Error{Op: op, Attempts: n, Class: Ambiguous, Err: err})
		case class != Transient, n >= r.maxAttempts:
			return r.finish(&Error{Op: op, Attempts: n, Class: class, Err: err})
		case !r.budget.TryWithdraw():
			if r.obs != nil {
				r.obs.BudgetExhausted(op, n, err)
			}
			return r.finish(&Error{Op: op, Attempts: n, Class: Transient, Err: err, BudgetExhausted: true})
		}
		d := r.delay(n)
		if r.obs != nil {
			r.obs.Retry(op, n, err, d)
		}
		if cerr := wait(ctx, d); cerr != nil {
			return r.finish(&Error{Op: op, Attempts: n, Class: Transient, Err: err, CtxErr: cerr})
		}
	}
}

// finish reports the end of a failed call and returns e.
func (r *policy) finish(e *Error) error {
	if r.obs != nil {
		r.obs.Done(e.Op, e.Attempts, e)
	}
	return e
}

// wait waits d on a timer, or until ctx ends, and returns ctx's error if it
// ended.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return ctx.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// txOnce runs one attempt of Tx: begin, fn, commit, rolling back on any
// failure before commit.
func txOnce(ctx context.Context, db *sql.DB, opts *sql.TxOptions, readOnly bool,
	fn func(context.Context, *sql.Tx) error) (err error, class Class) {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return err, classifyAttempt(err, readOnly)
	}
	finished := false
	defer func() {
		if !finished {
			// fn panicked: roll back, and let the panic go on.
			_ = tx.Rollback()
		}
	}()
	if err = fn(ctx, tx); err != nil {
		finished = true
		// After 1205 InnoDB rolled back only the statement: the rollback
		// ends the transaction and frees its locks before the next attempt.
		// Its own error does not matter (a lost connection is discarded).
		_ = tx.Rollback()
		return err, classifyAttempt(err, readOnly)
	}
	finished = true
	if err = tx.Commit(); err != nil {
		return classifyCommit(ctx, err, readOnly)
	}
	return nil, Permanent
}
