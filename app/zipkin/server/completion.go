package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// Errors a completion of Transport.AcceptWait is told.
var (
	// ErrGivenUp is a message whose spans the store refused until the
	// retry deadline (Config.RetryDeadline): they are logged with their
	// IDs and counted as dropped, and will not be stored. A collector
	// acknowledges such a message (commits its offset) so that it does not
	// come back forever: the error log and the metric are where the
	// operator sees it.
	ErrGivenUp = errors.New("spans given up after the retry deadline")
	// ErrAbandoned is a message still unwritten when Server.Close ran out
	// of time: it is not stored, and a collector must not acknowledge it,
	// so that the broker delivers it again.
	ErrAbandoned = errors.New("spans abandoned at shutdown")
)

// completion joins the parts of one message (offer splits a message by
// writer) and calls fn once, when the last part is written or given up,
// with the first error.
type completion struct {
	pending atomic.Int64
	err     atomic.Pointer[error]
	fn      func(error)
}

func (c *completion) part(err error) {
	if err != nil {
		c.err.CompareAndSwap(nil, &err)
	}
	if c.pending.Add(-1) == 0 {
		var e error
		if p := c.err.Load(); p != nil {
			e = *p
		}
		c.fn(e)
	}
}

// AcceptWait is Accept for a collector that keeps a message in its broker
// until the spans are stored (Kafka, RabbitMQ): it counts and samples the
// spans as Accept does, but while the queue is full it waits for room,
// until ctx ends, instead of refusing, and it reports the outcome to done.
//
// When AcceptWait returns nil, done is called exactly once, from a writer
// goroutine (or from AcceptWait itself when every span was sampled out):
// with nil once every kept span is stored (or, where the server keeps a
// durable spool, written to it), with an error wrapping ErrGivenUp when the
// store refused them until the retry deadline, or ErrAbandoned when the
// server stopped before they were written. done must not block.
//
// When it returns an error, done is never called and nothing was queued:
// ctx.Err() when ctx ended while the queue was full (nothing is counted as
// dropped: the message is still the broker's), ErrClosing once Close has
// begun, and ErrTooManySpans (counted as a dropped message) when the
// message holds more spans than the queue, which waiting cannot cure.
func (t *Transport) AcceptWait(ctx context.Context, spans []model.Span, bytes int64, done func(error)) error {
	if len(spans) == 0 {
		done(nil)
		return nil
	}
	t.m.spans.Add(float64(len(spans)))
	t.m.messageSpans.Set(float64(len(spans)))
	kept := t.s.sampler.filter(spans)
	if dropped := len(spans) - len(kept); dropped > 0 {
		t.m.spansDropped.Add(float64(dropped))
	}
	if len(kept) == 0 {
		done(nil)
		return nil
	}
	if len(kept) > t.s.ingest.maxSpans {
		t.m.messagesDropped.Inc()
		t.m.spansDropped.Add(float64(len(kept)))
		return fmt.Errorf("%w: %d spans; this server queues at most %s: send smaller batches",
			ErrTooManySpans, len(kept), strconv.Itoa(t.s.ingest.maxSpans))
	}
	if t.s.closing.Load() {
		return ErrClosing
	}
	// A message larger than the byte bound would never find room; the
	// bound is at least MaxBodyBytes, so it can only be a caller's error.
	bytes = min(bytes, t.s.ingest.maxBytes)
	c := &completion{fn: done}
	return t.s.q.offerWait(ctx, message{spans: kept, bytes: bytes, done: c, dropped: t.m.spansDropped})
}

// Room returns how many spans and bytes the queue can take now.
func (t *Transport) Room() (spans int, bytes int64) {
	return t.s.ingest.maxSpans - int(t.s.q.spans.Load()), t.s.ingest.maxBytes - t.s.q.bytes.Load()
}

// MaxQueueSpans is the queue's bound in spans (Config.MaxQueueSpans).
func (t *Transport) MaxQueueSpans() int { return t.s.ingest.maxSpans }
