package mysqlstore

import (
	"context"
	"sync"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// maxGroupSpans bounds the spans of Accept calls combined into one
// transaction (Options.ConcurrentWrites): four of the span server's
// batches.
const maxGroupSpans = 2000

// writeGroups runs at most Options.ConcurrentWrites write transactions at
// once; the Accept calls that find them all running queue up in groups,
// and each group is written as one batch when a running write finishes.
type writeGroups struct {
	mu      sync.Mutex
	running int
	queue   []*writeGroup // waiting, oldest first
}

// writeGroup is Accept calls written together.
type writeGroup struct {
	spans []model.Span
	calls int
	turn  chan struct{} // closed when the group may write: its first call writes it
	done  chan struct{} // closed when the group's write has returned
	err   error         // the write's error, read after done
}

// writeGrouped writes spans, in a transaction of its own when fewer than
// Options.ConcurrentWrites run, else combined with the other calls that
// wait meanwhile (at most maxGroupSpans spans per group).
func (s *Store) writeGrouped(ctx context.Context, spans []model.Span) error {
	limit := s.opts.ConcurrentWrites
	if limit == 0 {
		limit = 2
	}
	if limit < 0 {
		return s.writeSpans(ctx, spans)
	}
	g := &s.groups
	g.mu.Lock()
	if g.running < limit && len(g.queue) == 0 {
		g.running++
		g.mu.Unlock()
		defer g.next()
		return s.writeSpans(ctx, spans)
	}
	var grp *writeGroup
	if n := len(g.queue); n > 0 && len(g.queue[n-1].spans)+len(spans) <= maxGroupSpans {
		grp = g.queue[n-1]
	} else {
		grp = &writeGroup{turn: make(chan struct{}), done: make(chan struct{})}
		g.queue = append(g.queue, grp)
	}
	first := grp.calls == 0
	grp.calls++
	grp.spans = append(grp.spans, spans...)
	g.mu.Unlock()
	if !first {
		// The group's first call writes it, bounded by its context: waiting
		// here ends when that write returns.
		<-grp.done
		return grp.err
	}
	<-grp.turn // next took the group off the queue: no call joins it any more
	defer g.next()
	grp.err = s.writeSpans(ctx, grp.spans)
	close(grp.done)
	return grp.err
}

// next passes a finished write's turn to the oldest waiting group, or
// frees it.
func (g *writeGroups) next() {
	g.mu.Lock()
	if len(g.queue) == 0 {
		g.running--
		g.mu.Unlock()
		return
	}
	grp := g.queue[0]
	g.queue[0] = nil
	g.queue = g.queue[1:]
	g.mu.Unlock()
	close(grp.turn)
}
