package pool

import (
	"context"
	"errors"
	"fmt"
	"time"
)

var (
	// ErrClosed is returned by Connect, and by every other method that needs the pool, after
	// Close has been called.
	ErrClosed = errors.New("sqlpool: pool is closed")

	// ErrAcquireTimeout is matched (errors.Is) by the error Connect returns when no connection
	// became available before the earlier of the caller's ctx deadline and AcquireTimeout. The
	// error itself is an *AcquireTimeoutError with the pool's counts and last connection error.
	ErrAcquireTimeout = errors.New("sqlpool: timed out waiting for a connection")

	// ErrPoolExhausted is returned at once by Connect when no connection is idle and MaxWaiters
	// goroutines are already waiting: back-pressure instead of an unbounded queue.
	ErrPoolExhausted = errors.New("sqlpool: pool exhausted: too many goroutines waiting for a connection")
)

// AcquireTimeoutError says that an acquire reached its deadline. It matches ErrAcquireTimeout
// with errors.Is, and also context.DeadlineExceeded when the caller's ctx deadline came first.
//
// It tells a busy pool from a failing one. Failing is true, and LastErr set, when the pool's
// last attempt to open or validate a connection failed and none has succeeded since: the
// database (or the network, or Hooks.AfterConnect) is the problem, and Unwrap gives that error, so
// that retry.Classify can judge it (a refused dial or 1040 is Transient). Otherwise the pool
// was merely busy (every connection in use, or being opened): LastErr is nil, Unwrap returns
// nil, and retry.Classify calls the timeout Permanent. The pool forgets its last error as soon
// as a connection is opened, or an idle one passes a probe, as HikariCP does.
type AcquireTimeoutError struct {
	Pool    string        // the pool's Config.Name
	Waited  time.Duration // how long the acquire waited
	Total   int           // physical connections when it gave up
	Active  int           // connections in use
	Idle    int           // idle connections
	Waiting int           // goroutines waiting, this one included
	// CtxDeadline is true when the caller's ctx deadline, not AcquireTimeout, ended the wait.
	CtxDeadline bool
	// Failing is true when the pool's last attempt to open or validate a connection failed
	// and none has succeeded since; false when the pool was only busy.
	Failing bool
	// LastErr is that failed attempt's error (dial, AfterConnect or validation) when Failing;
	// nil when the pool was only busy.
	LastErr error
}

func (e *AcquireTimeoutError) Error() string {
	by := "AcquireTimeout"
	if e.CtxDeadline {
		by = "the context deadline"
	}
	msg := fmt.Sprintf("sqlpool: %s: connection not available: request timed out after %v (%s) (total=%d, active=%d, idle=%d, waiting=%d)",
		e.Pool, e.Waited.Round(time.Millisecond), by, e.Total, e.Active, e.Idle, e.Waiting)
	switch {
	case e.Failing && e.LastErr != nil:
		msg += "; pool failing: its last attempt to open or validate a connection failed; last connection error: " + e.LastErr.Error()
	case e.Active >= e.Total && e.Total > 0:
		msg += "; pool busy: every connection is in use: raise MaxConns, shorten transactions, or look for leaks (LeakDetectionThreshold)"
	default:
		msg += "; pool busy: no connection became free in time and no connection attempt has failed since the last success"
	}
	return msg
}

// Is reports whether target is ErrAcquireTimeout, or context.DeadlineExceeded when the ctx
// deadline ended the wait.
func (e *AcquireTimeoutError) Is(target error) bool {
	return target == ErrAcquireTimeout || (e.CtxDeadline && target == context.DeadlineExceeded)
}

// Unwrap returns LastErr: the error of the failed connection attempt when Failing, or nil when
// the pool was only busy.
func (e *AcquireTimeoutError) Unwrap() error { return e.LastErr }
