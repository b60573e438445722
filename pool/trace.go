package pool

import (
	"context"
	"database/sql/driver"
	"time"
)

// Trace receives the pool's events; every field is optional, runs on the event's goroutine
// and must not block. pool is Config.Name.
type Trace struct {
	// Acquired: a connection was handed out after waiting wait (0 without a wait or probe).
	Acquired func(pool string, wait time.Duration)
	// AcquireTimedOut: an acquire reached its deadline after waiting wait.
	AcquireTimedOut func(pool string, wait time.Duration)
	// AcquireEnded: an acquire that had to wait or probe ended (err: nil or why).
	AcquireEnded func(ctx context.Context, pool string, waited time.Duration, probes int, err error)
	// Released: a connection came back after being used for usage.
	Released func(pool string, usage time.Duration)
	// Created: a connection was opened in dial, AfterConnect and baseline included.
	Created func(pool string, dial time.Duration)
	// Closed: a connection was closed.
	Closed func(pool string, reason CloseReason)
	// Validated: an acquire probed a connection in took; alive is the outcome.
	Validated func(ctx context.Context, pool string, took time.Duration, alive bool)
	// ReleasePlanRun: a release ran statements statements, rollback first or not; ok: all
	// succeeded.
	ReleasePlanRun func(pool string, rollback bool, statements int, ok bool)
	// ReleasePlanEnded: a release plan ended (statements 0: no reset possible); err: why it closed.
	ReleasePlanEnded func(pool string, took time.Duration, statements int, rollback bool, err error)
	// LeakedStatementClosed: a statement the borrower left open was closed on release.
	LeakedStatementClosed func(pool string)
	// StatementDone: an Exec or Query took d; query is SQL text, never a label.
	StatementDone func(ctx context.Context, pool, query string, d time.Duration, err error)
	// ServerCancelled: a server-side cancel ended with outcome, d after its connection closed.
	ServerCancelled func(pool string, outcome CancelOutcome, d time.Duration)
	// ConnectFailed: opening a connection failed in phase (dial, tls, handshake, authentication, init, timeout, probe).
	ConnectFailed func(pool, phase string, err error)
	// Attached: New made p, before its first dial; once per pool. Detached: p closed, or New failed.
	Attached, Detached func(p *Pool)
	// RetryObserver returns a retry.Observer for the pool named pool; retry.Tx on its DB uses it.
	RetryObserver func(pool string) any
}

// attachTrace calls Trace.Attached; New calls it once.
func (p *Pool) attachTrace() {
	if t := p.cfg.Trace; t != nil && t.Attached != nil {
		t.Attached(p)
	}
}

// detachTrace calls Trace.Detached.
func (p *Pool) detachTrace() {
	if t := p.cfg.Trace; t != nil && t.Detached != nil {
		t.Detached(p)
	}
}

// RetryObserver returns Config.Trace.RetryObserver(Name), or nil; package retry finds it
// through the DB's driver (a *sql.DB from OpenDB or sql.OpenDB(p)).
func (d poolDriver) RetryObserver() any {
	if t := d.p.cfg.Trace; t != nil && t.RetryObserver != nil {
		return t.RetryObserver(d.p.cfg.Name)
	}
	return nil
}

// forStatements returns t when it times statements, else nil.
func (t *Trace) forStatements() *Trace {
	if t == nil || t.StatementDone == nil {
		return nil
	}
	return t
}

// forPlans returns t when it counts release plans (ReleasePlanRun), else nil.
func (t *Trace) forPlans() *Trace {
	if t == nil || t.ReleasePlanRun == nil {
		return nil
	}
	return t
}

// noteAcquired reports an acquire: the wait is 0 unless the acquire had to wait or probe (dl
// armed), so the fast path reads the exact clock once, for the usage timer.
func (p *Pool) noteAcquired(t *Trace, e *entry, dl *deadline) {
	now := p.nanotime()
	e.usageStart = max(now, 1) // 0 means "not timed"
	if t.Acquired != nil {
		var wait time.Duration
		if dl != nil && dl.start != 0 {
			wait = time.Duration(now - dl.start)
		}
		t.Acquired(p.cfg.Name, wait)
	}
}

// noteReleased reports the usage time of a connection coming back.
func (p *Pool) noteReleased(t *Trace, e *entry) {
	if e.usageStart != 0 {
		if t.Released != nil {
			t.Released(p.cfg.Name, time.Duration(p.nanotime()-e.usageStart))
		}
		e.usageStart = 0
	}
}

// noteStatement reports a statement's duration; driver.ErrSkip is not a statement (database/sql
// runs it again another way, which is reported then).
func (p *Pool) noteStatement(t *Trace, ctx context.Context, query string, start int64, err error) {
	if err == driver.ErrSkip {
		return
	}
	t.StatementDone(ctx, p.cfg.Name, query, time.Duration(p.nanotime()-start), err)
}

// noteAcquireEnded reports the end of a slow acquire.
func (p *Pool) noteAcquireEnded(ctx context.Context, t *Trace, dl *deadline, err error) {
	var waited time.Duration
	if dl.start != 0 {
		waited = time.Duration(p.nanotime() - dl.start)
	}
	t.AcquireEnded(ctx, p.cfg.Name, waited, dl.probes, err)
}

// probe runs the dialect's liveness probe on e, timed for Trace.Validated.
func (p *Pool) probe(ctx context.Context, e *entry, timeout time.Duration) error {
	t := p.cfg.Trace
	if t == nil || t.Validated == nil {
		return p.dialect.Probe(ctx, e.conn, timeout)
	}
	start := p.nanotime()
	err := p.dialect.Probe(ctx, e.conn, timeout)
	t.Validated(ctx, p.cfg.Name, time.Duration(p.nanotime()-start), err == nil)
	return err
}

// runPlanObserved is runPlan, timed for Trace.ReleasePlanEnded.
func (p *Pool) runPlanObserved(e *entry) error {
	t := p.cfg.Trace
	if t == nil || t.ReleasePlanEnded == nil {
		return p.runPlan(e)
	}
	plan := e.sess.Plan()
	n, rollback := 0, false
	if !plan.Discard {
		n = len(plan.Statements)
		rollback = n > 0 && plan.Statements[0] == "ROLLBACK"
	}
	start := p.nanotime()
	err := p.runPlan(e)
	t.ReleasePlanEnded(p.cfg.Name, time.Duration(p.nanotime()-start), n, rollback, err)
	return err
}
