package pool

import (
	"context"
	"time"
)

// AcquireObserver is an optional interface of Config.Events, for tracing: when the Events
// value implements it, the pool calls AcquireEnded at the end of every acquire that had to wait
// or probe (the slow path of Connect), with the acquire's ctx, so that an implementation can
// record a span under the caller's. An acquire that finds an idle connection it may hand out
// without a probe does not call it and pays nothing for it. Package otelpool implements it.
type AcquireObserver interface {
	// AcquireEnded: an acquire that waited or probed ended after waited (counted from when it
	// first had to wait or probe), having run probes liveness probes; err is its error or nil.
	AcquireEnded(ctx context.Context, pool string, waited time.Duration, probes int, err error)
}

// noteAcquireEnded reports the end of a slow acquire to an AcquireObserver.
func (p *Pool) noteAcquireEnded(ctx context.Context, ao AcquireObserver, dl *deadline, err error) {
	var waited time.Duration
	if dl.start != 0 {
		waited = time.Duration(p.nanotime() - dl.start)
	}
	ao.AcquireEnded(ctx, p.cfg.Name, waited, dl.probes, err)
}

// WorkObserver is an optional interface of Config.Events, for tracing: when the Events value
// implements it, the pool tells it of every release plan it runs and every liveness probe an
// acquire runs, with their durations. Pools whose Events do not implement it pay nothing.
// Package otelpool implements it.
type WorkObserver interface {
	// ReleasePlanEnded: a release ran a plan of statements (rollback: a ROLLBACK among them),
	// or found the session could not be reset (statements 0, err not nil), in took; err is why
	// the connection was then closed, or nil. There is no caller's ctx: the borrower is gone.
	ReleasePlanEnded(pool string, took time.Duration, statements int, rollback bool, err error)
	// ProbeEnded: an acquire probed a connection idle longer than AliveBypassWindow, in took,
	// under the acquire's ctx; alive is the outcome.
	ProbeEnded(ctx context.Context, pool string, took time.Duration, alive bool)
}

// probe runs validate.Probe on e, timed for a WorkObserver.
func (p *Pool) probe(ctx context.Context, e *entry, timeout time.Duration) error {
	wo, ok := p.cfg.Events.(WorkObserver)
	if !ok {
		return p.dialect.Probe(ctx, e.conn, timeout)
	}
	start := p.nanotime()
	err := p.dialect.Probe(ctx, e.conn, timeout)
	wo.ProbeEnded(ctx, p.cfg.Name, time.Duration(p.nanotime()-start), err == nil)
	return err
}

// runPlanObserved is runPlan, timed for a WorkObserver.
func (p *Pool) runPlanObserved(e *entry) error {
	wo, ok := p.cfg.Events.(WorkObserver)
	if !ok {
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
	wo.ReleasePlanEnded(p.cfg.Name, time.Duration(p.nanotime()-start), n, rollback, err)
	return err
}
