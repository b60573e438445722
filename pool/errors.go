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
// Unwrap gives the last error the pool saw while connecting or validating, if any.
type AcquireTimeoutError struct {
	Pool    string        // the pool's Config.Name
	Waited  time.Duration // how long the acquire waited
	Total   int           // physical connections when it gave up
	Active  int           // connections in use
	Idle    int           // idle connections
	Waiting int           // goroutines waiting, this one included
	// CtxDeadline is true when the caller's ctx deadline, not AcquireTimeout, ended the wait.
	CtxDeadline bool
	// LastErr is the last connection error (dial, init or validation) the pool saw; nil if none.
	LastErr error
}

func (e *AcquireTimeoutError) Error() string {
	by := "AcquireTimeout"
	if e.CtxDeadline {
		by = "the context deadline"
	}
	msg := fmt.Sprintf("sqlpool: %s: connection not available: request timed out after %v (%s) (total=%d, active=%d, idle=%d, waiting=%d)",
		e.Pool, e.Waited.Round(time.Millisecond), by, e.Total, e.Active, e.Idle, e.Waiting)
	if e.LastErr != nil {
		msg += "; last connection error: " + e.LastErr.Error()
	} else if e.Active >= e.Total && e.Total > 0 {
		msg += "; every connection is in use: raise MaxConns, shorten transactions, or look for leaks (LeakDetectionThreshold)"
	}
	return msg
}

// Is reports whether target is ErrAcquireTimeout, or context.DeadlineExceeded when the ctx
// deadline ended the wait.
func (e *AcquireTimeoutError) Is(target error) bool {
	return target == ErrAcquireTimeout || (e.CtxDeadline && target == context.DeadlineExceeded)
}

// Unwrap returns the last connection error, or nil.
func (e *AcquireTimeoutError) Unwrap() error { return e.LastErr }
