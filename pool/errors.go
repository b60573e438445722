package pool

import (
	"context"
	"errors"
	"fmt"
	"time"
)

var (
	// ErrClosed is returned by Connect and the setters after Close.
	ErrClosed = errors.New("sqlpool: pool is closed")

	// ErrAcquireTimeout is matched by Connect's *AcquireTimeoutError.
	ErrAcquireTimeout = errors.New("sqlpool: timed out waiting for a connection")

	// ErrPoolExhausted is returned at once by Connect when MaxWaiters goroutines already wait.
	ErrPoolExhausted = errors.New("sqlpool: pool exhausted: too many goroutines waiting for a connection")
)

// AcquireTimeoutError is an acquire that reached its deadline: it matches ErrAcquireTimeout, and
// context.DeadlineExceeded when the ctx's came first.
type AcquireTimeoutError struct {
	Pool        string        // the pool's Config.Name
	Waited      time.Duration // how long the acquire waited
	Total       int           // physical connections when it gave up
	Active      int           // connections in use
	Idle        int           // idle connections
	Waiting     int           // goroutines waiting, this one included
	CtxDeadline bool          // the ctx deadline, not AcquireTimeout, ended the wait
	Failing     bool          // the last attempt to open or validate a connection failed
	LastErr     error         // that attempt's error when Failing

	addr    string        // the server's address, when the pool knows it
	dialing time.Duration // how long the attempt to open a connection in progress has run; 0: none
}

// Error names the pool, its counts, whether it was busy or failing, and the last connection error.
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
	case e.dialing > 0 && e.addr != "":
		msg += fmt.Sprintf("; pool waiting for the server: an attempt to open a connection to %s has had no answer for %v (ConnectTimeout bounds it)",
			e.addr, e.dialing.Round(time.Millisecond))
	case e.dialing > 0:
		msg += fmt.Sprintf("; pool waiting for the server: an attempt to open a connection has had no answer for %v (ConnectTimeout bounds it)",
			e.dialing.Round(time.Millisecond))
	case e.Active >= e.Total && e.Total > 0:
		msg += "; pool busy: every connection is in use: raise MaxConns, shorten transactions, or look for leaks (LeakDetectionThreshold)"
	default:
		msg += "; pool busy: no connection became free in time and no connection attempt has failed since the last success"
	}
	return msg
}

// Is matches ErrAcquireTimeout.
func (e *AcquireTimeoutError) Is(target error) bool {
	return target == ErrAcquireTimeout || (e.CtxDeadline && target == context.DeadlineExceeded)
}

// Unwrap returns LastErr.
func (e *AcquireTimeoutError) Unwrap() error { return e.LastErr }
