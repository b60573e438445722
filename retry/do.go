package retry

import (
	"context"
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
	return run(ctx, &p, OpDo, fn, nil)
}

// attempter runs one attempt of a transaction (Tx and TxWith).
type attempter interface {
	attempt(ctx context.Context, d Classifier) (error, Class)
}

// run is the loop behind Do (fnDo set) and Tx and TxWith (tx set). It takes
// fnDo rather than a closure, and is not generic, so that Do does not
// allocate.
func run(ctx context.Context, p *Policy, op Op, fnDo func(context.Context) error, tx attempter) error {
	r := p.resolve()
	if err := ctx.Err(); err != nil {
		return r.finish(&Error{Op: op, Err: err, Class: Permanent})
	}
	r.budget.Deposit()
	for n := 1; ; n++ {
		if r.obs != nil {
			r.obs.Attempt(op, n)
		}
		var err error
		var class Class
		if fnDo != nil {
			if err = fnDo(ctx); err != nil {
				class = classifyAttempt(err, false, r.dialect)
			}
		} else {
			err, class = tx.attempt(ctx, r.dialect)
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
