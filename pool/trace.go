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
