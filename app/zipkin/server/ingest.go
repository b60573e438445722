package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/spool"
)

// Errors of Transport.Accept. A collector answers ErrQueueFull and
// ErrClosing with its protocol's "retry later" (HTTP 503 with Retry-After,
// gRPC UNAVAILABLE with RetryInfo) and ErrTooManySpans with its "too large,
// do not retry" (HTTP 413, gRPC RESOURCE_EXHAUSTED).
var (
	ErrQueueFull    = errQueueFull
	ErrClosing      = errClosing
	ErrTooManySpans = errors.New("more spans in one message than the ingest queue holds")
)

// Transport is the ingest entry point of a collector other than the span
// endpoints of this package (OTLP, gRPC): it goes through the same
// sampling, bounded queue and writers as POST /api/v2/spans, and counts
// into the zipkin_collector_* metrics under its own transport label. Get
// one with Server.Transport; its methods are safe for concurrent use.
type Transport struct {
	s    *Server
	name string
	m    *collectorMetrics
}

// Transport registers the per-message zipkin_collector_* counters and
// gauges of a collector named name (the label transport=name, e.g.
// "otlp-http", "otlp-grpc", "grpc") and returns its entry point. Calling
// it twice with one name is an error, as is "http" (this package's own).
func (s *Server) Transport(name string) (*Transport, error) {
	if name == "" || name == "http" {
		return nil, fmt.Errorf("server: transport name %q is empty or reserved", name)
	}
	m := newTransportMetrics(name)
	for i, c := range m.perMessage {
		if err := s.reg.Register(c); err != nil {
			for _, r := range m.perMessage[:i] {
				s.reg.Unregister(r)
			}
			return nil, fmt.Errorf("server: registering metrics of transport %q: %w", name, err)
		}
	}
	s.transportsMu.Lock()
	s.transports = append(s.transports, name)
	s.transportsMu.Unlock()
	return &Transport{s: s, name: name, m: m}, nil
}

// Name returns the transport label.
func (t *Transport) Name() string { return t.name }

// MaxBodyBytes is the bound on one message, received and decompressed
// (Config.MaxBodyBytes).
func (t *Transport) MaxBodyBytes() int64 { return t.s.ingest.maxBody }

// RetryAfter is the wait to advise a refused client (Config.RetryAfter),
// at least one second.
func (t *Transport) RetryAfter() time.Duration {
	return max(t.s.ingest.retryAfter.Round(time.Second), time.Second)
}

// Received counts one message received (zipkin_collector_messages_total);
// call it first, for every message, as Zipkin counts on receipt.
func (t *Transport) Received() { t.m.messages.Inc() }

// Bytes counts the decoded (decompressed) size of a message that is about
// to be decoded.
func (t *Transport) Bytes(n int) {
	t.m.bytes.Add(float64(n))
	t.m.messageBytes.Set(float64(n))
}

// Dropped counts a message refused for its content (bad encoding, too
// large): nothing of it is stored.
func (t *Transport) Dropped() { t.m.messagesDropped.Inc() }

// SpansDropped counts spans of an accepted message that will not be stored
// (rejected by validation: a partial success).
func (t *Transport) SpansDropped(n int) { t.m.spansDropped.Add(float64(n)) }

// Unavailable reports whether a message would be refused now, the queue
// being full or the server stopping, and if so counts the refusal
// (zipkin_collector_messages_rejected_total); a collector checks it before
// reading a body.
func (t *Transport) Unavailable() error {
	switch {
	case t.s.closing.Load():
		t.m.messagesRejected.Inc()
		return ErrClosing
	case t.s.q.full():
		t.m.messagesRejected.Inc()
		return ErrQueueFull
	}
	return nil
}

// Acquire takes one of the decoding slots shared with POST /api/v2/spans
// (Config.MaxConcurrentPosts), waiting up to a second or until ctx ends;
// false means none came free (answer "retry later"; the refusal is
// counted). Call Release after decoding and Accept.
func (t *Transport) Acquire(ctx context.Context) bool {
	select {
	case t.s.posts <- struct{}{}:
		return true
	default:
	}
	tm := time.NewTimer(postWait)
	defer tm.Stop()
	select {
	case t.s.posts <- struct{}{}:
		return true
	case <-tm.C:
	case <-ctx.Done():
	}
	t.m.messagesRejected.Inc()
	return false
}

// Release gives back the slot of Acquire.
func (t *Transport) Release() { <-t.s.posts }

// ReadBody reads an HTTP request body as POST /api/v2/spans does: bounded
// by MaxBodyBytes before and after gunzip (Content-Encoding: gzip), within
// Config.BodyReadTimeout, the bytes being received counted against
// Config.MaxReceivingBytes. Call it before Acquire, so that a client that
// stalls while sending holds no decoding slot. A non-zero code is the HTTP
// status to answer with msg: 503 (too many bytes being received; answer it
// as a full queue, with Retry-After), or 400, 408 and 413, for which the
// message is already counted as dropped.
func (t *Transport) ReadBody(w http.ResponseWriter, r *http.Request) (body []byte, code int, msg string) {
	raw, release, code, msg := t.s.receiveBody(w, r)
	defer release()
	if code == 0 {
		body, code, msg = t.s.gunzip(r, raw)
	}
	switch code {
	case 0:
	case http.StatusServiceUnavailable:
		t.m.messagesRejected.Inc()
	default:
		t.Dropped()
	}
	return body, code, msg
}

// Accept counts the decoded spans of one message, samples them
// (Config.SampleRate) and offers the kept ones to the bounded queue, all or
// nothing. bytes is the message's decoded size, what the queue's byte
// bound counts. nil means the writers own the spans (or all were sampled
// out); ErrQueueFull, ErrClosing and ErrTooManySpans mean none was queued.
// The spans must be valid and normalized (model.Span.Normalize), as the
// codec package returns them.
func (t *Transport) Accept(spans []model.Span, bytes int64) error {
	if len(spans) == 0 {
		return nil
	}
	t.m.spans.Add(float64(len(spans)))
	t.m.messageSpans.Set(float64(len(spans)))
	kept := t.s.sampler.filter(spans)
	if dropped := len(spans) - len(kept); dropped > 0 {
		t.m.spansDropped.Add(float64(dropped))
	}
	if len(kept) == 0 {
		return nil
	}
	if len(kept) > t.s.ingest.maxSpans {
		t.m.messagesDropped.Inc()
		t.m.spansDropped.Add(float64(len(kept)))
		return fmt.Errorf("%w: %d spans; this server queues at most %s: send smaller batches",
			ErrTooManySpans, len(kept), strconv.Itoa(t.s.ingest.maxSpans))
	}
	var persist func() (uint64, error)
	if sp := t.s.spool; sp != nil {
		// The spool holds requests as POST /api/v2/spans bodies; a
		// collector's decoded spans are written as proto3, which replay
		// decodes like such a POST.
		persist = func() (uint64, error) {
			return sp.Append(codec.AppendProto3Spans([]byte{byte(v2Endpoint), 1}, kept))
		}
	}
	if err := t.s.q.offerDurable(message{spans: kept, bytes: bytes}, persist); err != nil {
		t.m.messagesRejected.Inc()
		t.m.spansDropped.Add(float64(len(kept)))
		switch {
		case errors.Is(err, errQueueFull), errors.Is(err, errClosing):
			return err
		case errors.Is(err, spool.ErrClosed):
			return fmt.Errorf("%w: %v", ErrClosing, err)
		default: // the spool is full or cannot be written: retry later
			return fmt.Errorf("%w: %v", ErrQueueFull, err)
		}
	}
	return nil
}
