package pool

import (
	"context"
	"database/sql/driver"
	"time"
)

// CloseReason says why the pool closed a physical connection. The set is small and fixed, so
// it can be a metric label.
type CloseReason string

// The reasons a connection is closed.
const (
	CloseEvicted          CloseReason = "evicted"           // SoftEvict, or marked by the pool
	CloseMaxLifetime      CloseReason = "max_lifetime"      // passed its (jittered) MaxLifetime
	CloseIdleTimeout      CloseReason = "idle_timeout"      // idle past IdleTimeout above MinIdleConns
	CloseValidationFailed CloseReason = "validation_failed" // failed the probe on acquire
	CloseKeepaliveFailed  CloseReason = "keepalive_failed"  // failed a keepalive ping
	CloseFatalError       CloseReason = "fatal_error"       // a driver call returned a fatal error
	CloseDriverInvalid    CloseReason = "driver_invalid"    // the driver's Validator (release) or SessionResetter (acquire) said so
	CloseResetFailed      CloseReason = "reset_failed"      // the release plan failed or could not reset the session
	ClosePoolClosed       CloseReason = "pool_closed"       // Close
)

// Events receives what happens in a pool, for metrics (package metrics implements it). The pool
// calls it from the goroutine where the event happens, including acquire and release, so an
// implementation must be safe for concurrent use, must not block, and should not allocate or
// take a lock shared by borrowers. Embed NopEvents to implement only some methods.
type Events interface {
	// Acquired: a connection was handed out after waiting wait (0 when one was idle).
	Acquired(pool string, wait time.Duration)
	// AcquireTimedOut: an acquire reached its deadline after waiting wait.
	AcquireTimedOut(pool string, wait time.Duration)
	// Released: a connection came back after being used for usage.
	Released(pool string, usage time.Duration)
	// Created: a physical connection was opened; dial includes ConnectionInit and the
	// baseline query.
	Created(pool string, dial time.Duration)
	// Closed: a physical connection was closed.
	Closed(pool string, reason CloseReason)
	// Validated: an acquire probed a connection idle longer than AliveBypassWindow; alive is
	// the outcome. (Acquires that skipped the probe are Stats().Acquires minus these.)
	Validated(pool string, alive bool)
	// ReleasePlanRun: a release ran statements to clean the session; rollback says whether a
	// ROLLBACK was among them, statements how many ran, ok whether they all succeeded.
	ReleasePlanRun(pool string, rollback bool, statements int, ok bool)
	// LeakedStatementClosed: a statement the borrower left open was closed on release.
	LeakedStatementClosed(pool string)
	// StatementDone: a statement ran on a pooled connection (Exec or Query, direct or
	// prepared) and took d until the driver answered (for a query: until the first result,
	// not until the rows were read); err is its error or nil. ctx is the caller's, so that an
	// implementation can read a statement name from it. query is the SQL text: an
	// implementation must not use it as a metric label as it is.
	StatementDone(ctx context.Context, pool, query string, d time.Duration, err error)
}

// NopEvents implements Events by doing nothing; embed it to implement only some methods.
type NopEvents struct{}

func (NopEvents) Acquired(string, time.Duration)                                      {}
func (NopEvents) AcquireTimedOut(string, time.Duration)                               {}
func (NopEvents) Released(string, time.Duration)                                      {}
func (NopEvents) Created(string, time.Duration)                                       {}
func (NopEvents) Closed(string, CloseReason)                                          {}
func (NopEvents) Validated(string, bool)                                              {}
func (NopEvents) ReleasePlanRun(string, bool, int, bool)                              {}
func (NopEvents) LeakedStatementClosed(string)                                        {}
func (NopEvents) StatementDone(context.Context, string, string, time.Duration, error) {}

var _ Events = NopEvents{}

// noteAcquired reports an acquire: the wait is 0 unless the acquire had to wait or probe (dl
// armed), so the fast path reads the exact clock once, for the usage timer.
func (p *Pool) noteAcquired(ev Events, e *entry, dl *deadline) {
	now := p.nanotime()
	e.usageStart = max(now, 1) // 0 means "not timed"
	var wait time.Duration
	if dl != nil && dl.start != 0 {
		wait = time.Duration(now - dl.start)
	}
	ev.Acquired(p.cfg.Name, wait)
}

// noteReleased reports the usage time of a connection coming back.
func (p *Pool) noteReleased(ev Events, e *entry) {
	if e.usageStart != 0 {
		ev.Released(p.cfg.Name, time.Duration(p.nanotime()-e.usageStart))
		e.usageStart = 0
	}
}

// noteStatement reports a statement's duration; driver.ErrSkip is not a statement (database/sql
// runs it again another way, which is reported then).
func (p *Pool) noteStatement(ev Events, ctx context.Context, query string, start int64, err error) {
	if err == driver.ErrSkip {
		return
	}
	ev.StatementDone(ctx, p.cfg.Name, query, time.Duration(p.nanotime()-start), err)
}
