package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/spool"
	"github.com/sqlpool/sqlpool/app/zipkin/storage"
)

// errQueueFull and errClosing are why offer refused a message.
var (
	errQueueFull = errors.New("ingest queue full")
	errClosing   = errors.New("server shutting down")
)

// message is the spans of one accepted POST and the decoded body size they
// are accounted for. done, when set, is told when the spans are stored or
// given up (several parts of one split message share it); dropped, when
// set, counts the spans of a batch given up instead of the http counter.
type message struct {
	spans   []model.Span
	bytes   int64
	done    *completion
	dropped prometheus.Counter
	// rec is the spool record of the request, shared by the parts of a
	// split message; nil without a spool.
	rec *spoolRef
}

// spoolRef is a spool record whose spans are queued: once every part of
// it is stored (or given up), the record is done.
type spoolRef struct {
	seq   uint64
	parts atomic.Int32
}

// maxQueueMessages bounds the messages (accepted POSTs) the queue holds, so
// that its channel, allocated up front at 32 bytes a slot, stays at most
// 2 MiB whatever the span bound: a bound of 1e8 spans used to allocate 3 GB
// at start-up. Each message has at least one span, so a span bound up to
// this many is unaffected.
const maxQueueMessages = 1 << 16

// ingestQueue is the bounded queue between the POST handlers and the
// storage writers.
//
// Request goroutines reserve room with compare-and-swap on three counters
// (messages, spans, bytes) and send on a channel with a slot for every
// message that can be reserved, so a send after a successful reservation
// never blocks. The only
// lock is mu, taken for reading around that send and for writing once, by
// close, to close the channel; writers never take it, so nothing a request
// needs is held while a writer batches or writes (the lesson of Brave 4.12).
//
// The counters cover spans from reservation until their batch is written or
// given up, so the bound is also the bound on what the writers hold.
//
// Each writer owns a share of the trace IDs (by the low 64 bits of the
// trace ID, hashed) and has its own channel: offer splits a message by
// owner, each part a message of its own. Two writers therefore never write
// rows of the same trace at the same time, which removes the row-lock
// conflicts (and most deadlocks) between concurrent batch transactions; the
// store writes each batch's rows in key order and retries the deadlocks and
// lock wait timeouts that remain (gap locks between neighbouring traces).
// Every channel has a slot for every message that can be reserved (all may
// belong to one writer): writers × 2 MiB at most.
type ingestQueue struct {
	cfg   resolvedIngest
	store storage.SpanConsumer
	log   *slog.Logger
	m     *collectorMetrics

	mu     sync.RWMutex // guards closed and sends on ch against close(ch)
	closed bool
	ch     []chan message // one per writer
	msgCap int            // the message bound: the capacity of each channel

	msgs  atomic.Int64 // accepted, not yet written or given up; ≤ msgCap
	spans atomic.Int64
	bytes atomic.Int64

	// room is closed (and replaced) when release frees room or close
	// begins, waking the offerWait callers that found the queue full.
	room atomic.Pointer[chan struct{}]

	// spool, when set, holds every queued request until it is stored
	// (Config.SpoolDir); leftInSpool counts the spans a drain deadline
	// left there.
	spool       *spool.Spool
	leftInSpool atomic.Int64

	// ctx ends when the drain deadline of close has passed: writes in
	// flight are abandoned and whatever is left is counted as failed (or,
	// with a spool, left in it).
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newIngestQueue(cfg resolvedIngest, store storage.SpanConsumer, log *slog.Logger, m *collectorMetrics, sp *spool.Spool) *ingestQueue {
	ctx, cancel := context.WithCancel(context.Background())
	q := &ingestQueue{
		cfg:    cfg,
		store:  store,
		log:    log,
		m:      m,
		ch:     make([]chan message, cfg.writers),
		msgCap: min(cfg.maxSpans, maxQueueMessages),
		spool:  sp,
		ctx:    ctx,
		cancel: cancel,
	}
	for i := range q.ch {
		q.ch[i] = make(chan message, q.msgCap)
	}
	q.wg.Add(cfg.writers)
	for i := 0; i < cfg.writers; i++ {
		go q.writer(q.ch[i])
	}
	return q
}

// full reports whether the queue has no room for even one more message or
// span; the POST handler uses it to refuse before reading a body.
func (q *ingestQueue) full() bool {
	return q.msgs.Load() >= int64(q.msgCap) || q.spans.Load() >= int64(q.cfg.maxSpans) || q.bytes.Load() >= q.cfg.maxBytes
}

// reserve takes room for k messages of n spans and b bytes in all, or none
// of it.
func (q *ingestQueue) reserve(k, n, b int64) bool {
	if !reserveUpTo(&q.msgs, k, int64(q.msgCap)) {
		return false
	}
	if !reserveUpTo(&q.spans, n, int64(q.cfg.maxSpans)) {
		q.msgs.Add(-k)
		return false
	}
	if !reserveUpTo(&q.bytes, b, q.cfg.maxBytes) {
		q.msgs.Add(-k)
		q.spans.Add(-n)
		return false
	}
	return true
}

// reserveUpTo adds n to c unless that would take it above limit.
func reserveUpTo(c *atomic.Int64, n, limit int64) bool {
	for {
		cur := c.Load()
		if cur+n > limit {
			return false
		}
		if c.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// release gives back the room of msgs messages of n spans and b bytes.
func (q *ingestQueue) release(msgs, n, b int64) {
	q.msgs.Add(-msgs)
	q.spans.Add(-n)
	q.bytes.Add(-b)
	q.wake()
}

// wake closes the room channel, if any waiter made one.
func (q *ingestQueue) wake() {
	if c := q.room.Swap(nil); c != nil {
		close(*c)
	}
}

// roomSignal returns a channel closed at the next release or close.
func (q *ingestQueue) roomSignal() <-chan struct{} {
	for {
		if c := q.room.Load(); c != nil {
			return *c
		}
		c := make(chan struct{})
		if q.room.CompareAndSwap(nil, &c) {
			return c
		}
	}
}

// offerWait is offer that waits for room, until ctx ends (ctx.Err()), while
// the queue is full.
func (q *ingestQueue) offerWait(ctx context.Context, msg message) error {
	for {
		// The signal is taken before the attempt, so that a release
		// between a failed attempt and the wait is not missed.
		room := q.roomSignal()
		err := q.offer(msg)
		if !errors.Is(err, errQueueFull) {
			return err
		}
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// offer enqueues msg without blocking. It returns errQueueFull when the
// bounds leave no room and errClosing once close has begun; nil means the
// writers own msg.
func (q *ingestQueue) offer(msg message) error { return q.offerDurable(msg, nil) }

// offerDurable is offer that, with persist set, calls it once the room is
// reserved and before the message is queued: persist writes the request
// to the spool and returns its record number. An error from persist
// gives the room back and is returned.
func (q *ingestQueue) offerDurable(msg message, persist func() (uint64, error)) error {
	n := int64(len(msg.spans))
	if n == 0 {
		return nil // nothing to store (the handler answers such a POST before it gets here)
	}
	parts := q.split(msg)
	var k int64
	for i := range parts {
		if len(parts[i].spans) > 0 {
			k++
		}
	}
	if !q.reserve(k, n, msg.bytes) {
		return errQueueFull
	}
	if msg.done != nil {
		msg.done.pending.Store(k)
	}
	if persist != nil {
		seq, err := persist()
		if err != nil {
			q.release(k, n, msg.bytes)
			return err
		}
		msg.rec = &spoolRef{seq: seq}
	}
	if msg.rec != nil {
		msg.rec.parts.Store(int32(k))
		for i := range parts {
			parts[i].rec = msg.rec
		}
	}
	q.mu.RLock()
	if q.closed {
		q.mu.RUnlock()
		q.release(k, n, msg.bytes)
		return errClosing
	}
	for i := range parts {
		if len(parts[i].spans) > 0 {
			q.ch[i] <- parts[i] // cannot block: every channel has a slot for every message reserved
		}
	}
	q.mu.RUnlock()
	return nil
}

// owner returns the writer that owns a trace: the low 64 bits of its ID
// (all that 64- and 128-bit halves of one trace share), mixed, modulo the
// writers.
func owner(low uint64, writers int) int {
	return int((low * 0x9e3779b97f4a7c15 >> 32) % uint64(writers))
}

// split divides msg by owning writer (parts[i] for writer i); the bytes are
// shared in proportion to the spans, so that they add up to msg.bytes.
func (q *ingestQueue) split(msg message) []message {
	n := len(q.ch)
	parts := make([]message, n)
	if n == 1 || len(msg.spans) == 0 {
		parts[0] = msg
		return parts
	}
	for i := range parts {
		parts[i].done, parts[i].dropped = msg.done, msg.dropped
	}
	first := owner(msg.spans[0].TraceID.Low, n)
	same := true
	for i := range msg.spans {
		if owner(msg.spans[i].TraceID.Low, n) != first {
			same = false
			break
		}
	}
	if same { // the common case: one trace per POST
		parts[first] = msg
		return parts
	}
	for _, sp := range msg.spans {
		o := owner(sp.TraceID.Low, n)
		parts[o].spans = append(parts[o].spans, sp)
	}
	left := msg.bytes
	last := -1
	for i := range parts {
		if len(parts[i].spans) > 0 {
			parts[i].bytes = msg.bytes * int64(len(parts[i].spans)) / int64(len(msg.spans))
			left -= parts[i].bytes
			last = i
		}
	}
	parts[last].bytes += left
	return parts
}

// writer takes one message, adds whatever else is queued right now up to
// batchSpans, writes the batch, and repeats until the channel is closed and
// empty.
func (q *ingestQueue) writer(ch chan message) {
	defer q.wg.Done()
	var batch []message
	var spans []model.Span
	for msg := range ch {
		batch = append(batch[:0], msg)
		n := len(msg.spans)
	gather:
		for n < q.cfg.batchSpans {
			select {
			case more, ok := <-ch:
				if !ok {
					break gather
				}
				batch = append(batch, more)
				n += len(more.spans)
			default:
				break gather
			}
		}
		spans = spans[:0]
		var bytes int64
		for i := range batch {
			spans = append(spans, batch[i].spans...)
			bytes += batch[i].bytes
		}
		err := q.write(spans)
		if err == nil || errors.Is(err, ErrGivenUp) {
			for i := range batch {
				if r := batch[i].rec; r != nil && r.parts.Add(-1) == 0 {
					q.spool.Done(r.seq)
				}
			}
		}
		clear(spans) // drop references held by the reused buffer
		q.release(int64(len(batch)), int64(n), bytes)
		kept := q.spool != nil && errors.Is(err, ErrAbandoned) // left in the spool: not dropped
		for i := range batch {
			if err != nil && !kept {
				dropped := batch[i].dropped
				if dropped == nil {
					dropped = q.m.spansDropped
				}
				dropped.Add(float64(len(batch[i].spans)))
			}
			if batch[i].done != nil {
				batch[i].done.part(err)
			}
			batch[i] = message{} // let the spans go once written
		}
	}
}

// write stores one batch, retrying every error with jittered exponential
// backoff until the retry deadline (counted from the first attempt) or the
// forced end of a drain. A batch given up is counted and logged with its
// trace and span IDs, and its error returned: ErrGivenUp, or ErrAbandoned
// when the drain deadline passed (with a spool the batch's records are
// then kept for the next start, and nothing is counted as dropped).
func (q *ingestQueue) write(spans []model.Span) error {
	start := time.Now()
	deadline := start.Add(q.cfg.retryDeadline)
	backoff := q.cfg.backoffBase
	for attempt := 1; ; attempt++ {
		if err := q.ctx.Err(); err != nil {
			if q.spool != nil {
				q.leftInSpool.Add(int64(len(spans)))
				return fmt.Errorf("%w: left in the spool for the next start", ErrAbandoned)
			}
			return q.giveUp(spans, attempt-1, errors.New("the server stopped before the batch could be written (drain deadline passed)"))
		}
		ctx, cancel := context.WithTimeout(q.ctx, q.cfg.attemptTimeout)
		t0 := time.Now()
		err := q.store.Accept(ctx, spans)
		cancel()
		q.m.writeSeconds.Observe(time.Since(t0).Seconds())
		if err == nil {
			q.m.writes.WithLabelValues("ok").Inc()
			q.m.spansStored.Add(float64(len(spans)))
			if attempt > 1 {
				q.log.Info("stored a batch after retrying", "spans", len(spans), "attempts", attempt, "took", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		q.m.writes.WithLabelValues("error").Inc()
		// Full jitter: a random wait in [backoff/2, backoff].
		wait := backoff/2 + rand.N(backoff/2+1)
		if q.ctx.Err() != nil && q.spool != nil {
			q.leftInSpool.Add(int64(len(spans)))
			return fmt.Errorf("%w: left in the spool for the next start", ErrAbandoned)
		}
		if q.ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			return q.giveUp(spans, attempt, err)
		}
		if attempt == 1 || attempt%10 == 0 {
			q.log.Warn("cannot store a batch; retrying", "spans", len(spans), "attempt", attempt,
				"retry_deadline", deadline.Format(time.RFC3339), "err", q.cfg.redact(err.Error()))
		}
		select {
		case <-time.After(wait):
		case <-q.ctx.Done():
		}
		backoff = min(backoff*2, q.cfg.backoffMax)
	}
}

// giveUp counts and logs a batch that will not be stored, as Zipkin logs
// "Cannot store spans [traceId/spanId, ...] due to ...", and returns the
// error its messages' completions are told (the writer counts the spans
// dropped, each message under its transport).
func (q *ingestQueue) giveUp(spans []model.Span, attempts int, err error) error {
	q.m.batchesFailed.Inc()
	ids := make([]string, len(spans))
	var b []byte
	for i := range spans {
		b = spans[i].TraceID.AppendHex(b[:0])
		b = append(b, '/')
		b = spans[i].ID.AppendHex(b)
		ids[i] = string(b)
	}
	q.log.Error("cannot store spans; batch dropped", "spans", ids, "count", len(spans), "attempts", attempts,
		"err", q.cfg.redact(err.Error()))
	kind := ErrGivenUp
	if q.ctx.Err() != nil {
		kind = ErrAbandoned
	}
	return fmt.Errorf("%w: %s", kind, q.cfg.redact(err.Error()))
}

// close stops accepting (offer returns errClosing), lets the writers drain
// what is queued, and waits for them until ctx ends. Then it abandons the
// writes in flight, counts and logs every span left as failed, and returns
// an error saying how many there were.
func (q *ingestQueue) close(ctx context.Context) error {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		for _, ch := range q.ch {
			close(ch)
		}
	}
	q.mu.Unlock()
	q.wake()
	done := make(chan struct{})
	go func() { q.wg.Wait(); close(done) }()
	select {
	case <-done:
		q.cancel()
		return nil
	case <-ctx.Done():
	}
	left := q.spans.Load()
	q.cancel()
	<-done
	if q.spool != nil {
		q.log.Warn("drain deadline passed; the spans not yet stored stay in the spool for the next start",
			"spans", q.leftInSpool.Load())
		return nil
	}
	return fmt.Errorf("drain deadline passed with %d spans not yet stored; they were dropped (see the error log for their IDs)", left)
}
