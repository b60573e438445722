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

// Errors of Transport.Ingest, in Result.Err (wrapped, with the detail a
// client is told). errors.Is tells them apart.
var (
	// ErrQueueFull: the ingest queue, or the spool behind it, has no room
	// now (Outcome RetryLater).
	ErrQueueFull = errQueueFull
	// ErrClosing: the server is stopping (Outcome RetryLater; Stopped for
	// a message with Message.Done).
	ErrClosing = errClosing
	// ErrBusy: every decoding slot (Config.MaxConcurrentPosts) or the
	// budget of bytes being received (Config.MaxReceivingBytes) is taken
	// (Outcome RetryLater).
	ErrBusy = errors.New("too many span messages are being received or decoded")
	// ErrTooManySpans: more spans in one message than the queue holds,
	// which no retry cures (Outcome TooLarge).
	ErrTooManySpans = errors.New("more spans in one message than the ingest queue holds")
)

// Outcome is what Transport.Ingest did with a message. Every protocol maps
// it to its own answer; docs/server.md has the table.
type Outcome int

const (
	// Accepted: the spans are queued for the writers (or there were none
	// to store: an empty message, every span sampled out). With
	// Message.Done, done is called once the spans are stored or given up
	// (it may have been already).
	Accepted Outcome = iota
	// Refused: the message was refused for its metadata
	// (Message.Refuse), before its body was looked at.
	Refused
	// Malformed: the body does not decode (or, over HTTP, cannot be read
	// or gunzipped). Nothing of it is stored; a retry would fail again.
	Malformed
	// TooLarge: the body is larger than Config.MaxBodyBytes, or holds more
	// spans than the queue (ErrTooManySpans). Nothing of it is stored; a
	// retry would fail again.
	TooLarge
	// Timeout: an HTTP body did not arrive within Config.BodyReadTimeout.
	Timeout
	// RetryLater: no room now (ErrQueueFull, ErrBusy) or the server is
	// stopping (ErrClosing): nothing is stored; the client retries after
	// Result.RetryAfter. Never the outcome of a message with Message.Done,
	// which waits for room instead.
	RetryLater
	// Stopped: a message with Message.Done whose context ended, or whose
	// server began closing, while it waited for room. Nothing is stored,
	// done is not called, and the message must not be acknowledged (the
	// broker delivers it again).
	Stopped
)

var outcomeNames = [...]string{"Accepted", "Refused", "Malformed", "TooLarge", "Timeout", "RetryLater", "Stopped"}

func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Result is the answer of Transport.Ingest.
type Result struct {
	Outcome Outcome
	// Err says why the message was not accepted, in words for the client
	// (an HTTP body, a gRPC status message, a poison-message log line);
	// nil for Accepted.
	Err error
	// RetryAfter is the wait to advise with RetryLater: Config.RetryAfter
	// rounded up to whole seconds, at least one second (HTTP Retry-After,
	// gRPC RetryInfo).
	RetryAfter time.Duration
	// Spans is how many spans the message decoded to.
	Spans int
	// Rejected and RejectedMessage are Decoded's, for an Accepted message
	// (OTLP's partial_success).
	Rejected        int64
	RejectedMessage string
}

// Decoded is what a Decoder makes of a message body.
type Decoded struct {
	// Spans are the decoded spans, valid and normalized
	// (model.Span.Normalize), as the codec package returns them.
	Spans []model.Span
	// Rejected spans were left out of Spans for being invalid, and
	// RejectedMessage says why: the message is still accepted (a partial
	// success), and the rejected spans are counted as dropped.
	Rejected        int64
	RejectedMessage string
	// Empty marks a message that holds nothing (Zipkin's "[]"): accepted
	// without being counted in bytes or spans.
	Empty bool
	// Format, when set (codec.JSONV1, JSONV2 or Proto3), says that the
	// body is a list of spans in that format as POST /api/v1/spans or
	// /api/v2/spans takes it: the spool keeps the body itself. Otherwise
	// the spool keeps the kept spans as proto3.
	Format codec.Format
}

// Decoder decodes a message body (received whole and decompressed).
// An error means nothing of the message is stored.
type Decoder func(body []byte) (Decoded, error)

// Message is one message for Transport.Ingest.
type Message struct {
	// Body is the message, received whole and decompressed. Ignored when
	// Request is set.
	Body []byte
	// Request and ResponseWriter, when set, are an HTTP request whose body
	// Ingest reads as POST /api/v2/spans does: bounded by MaxBodyBytes
	// before and after gunzip (Content-Encoding: gzip), within
	// Config.BodyReadTimeout, the bytes being received counted against
	// Config.MaxReceivingBytes. It is read after the queue check and before
	// a decoding slot is taken, so that a client that stalls while sending
	// holds none.
	Request        *http.Request
	ResponseWriter http.ResponseWriter
	// Decode decodes the body. Required.
	Decode Decoder
	// Refuse, when set, refuses the message at once, before its body is
	// looked at (e.g. an unsupported media type): it is counted as received
	// and dropped, and the outcome is Refused with this error.
	Refuse error
	// Done, when set, makes this the message of a broker (Kafka,
	// RabbitMQ) that keeps it until its spans are stored: the size bound
	// is checked against Body as received; no decoding slot is taken; while
	// the queue is full Ingest waits for room, until ctx ends (Stopped),
	// instead of refusing; the spool is not written (the broker keeps the
	// message). When the outcome is Accepted, done is called exactly once,
	// from a writer goroutine or from Ingest itself (nothing to store):
	// with nil once every kept span is stored, with an error wrapping
	// ErrGivenUp when the store refused them until the retry deadline, or
	// ErrAbandoned when the server stopped before they were written. done
	// must not block. For any other outcome done is never called.
	Done func(error)
}

// Transport is the ingest entry point of one collector (transport label
// of the zipkin_collector_* metrics): POST /api/v2/spans uses this
// package's own ("http"); the others get one with Server.Transport. Its
// methods are safe for concurrent use.
type Transport struct {
	s    *Server
	name string
	m    *collectorMetrics
}

// Transport registers the per-message zipkin_collector_* counters and
// gauges of a collector named name (the label transport=name, e.g.
// "otlp-http", "otlp-grpc", "grpc", "kafka") and returns its entry point.
// Calling it twice with one name is an error, as is "http" (this
// package's own).
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

// Room returns how many spans and bytes the queue can take now.
func (t *Transport) Room() (spans int, bytes int64) {
	return t.s.ingest.maxSpans - int(t.s.q.spans.Load()), t.s.ingest.maxBytes - t.s.q.bytes.Load()
}

// MaxQueueSpans is the queue's bound in spans (Config.MaxQueueSpans).
func (t *Transport) MaxQueueSpans() int { return t.s.ingest.maxSpans }

// retryAfter is Config.RetryAfter rounded up to whole seconds, at least one.
func (t *Transport) retryAfter() time.Duration {
	ra := t.s.ingest.retryAfter
	if r := ra.Truncate(time.Second); r != ra {
		ra = r + time.Second
	}
	return max(ra, time.Second)
}

// Ingest is the one way spans come into the server, whatever the
// protocol. It owns the whole sequence and its metrics (the
// zipkin_collector_* series of the transport):
//
//  1. count the message received;
//  2. Message.Refuse: count it dropped, Refused; an empty Body: Accepted;
//  3. without Message.Done: refuse at once when the server is closing or
//     the queue is full (RetryLater, counted rejected);
//  4. receive the HTTP body (Message.Request), or check Body: above
//     MaxBodyBytes is TooLarge (counted dropped);
//  5. without Message.Done: take a decoding slot shared with every other
//     transport (Config.MaxConcurrentPosts), waiting up to a second
//     (RetryLater with ErrBusy, counted rejected);
//  6. gunzip an HTTP body; decode (Malformed, counted dropped); count
//     bytes and spans;
//  7. sample (Config.SampleRate; sampled-out spans counted dropped);
//  8. more spans than the queue holds: TooLarge (counted dropped);
//  9. queue, all or nothing: without Message.Done, write the message to
//     the spool first (Config.SpoolDir) and refuse when there is no room
//     (RetryLater, counted rejected, spans dropped); with Message.Done,
//     wait for room.
//
// Every protocol maps the Result to its own answer; docs/server.md has
// the table.
func (t *Transport) Ingest(ctx context.Context, m Message) Result {
	wait := m.Done != nil
	t.m.messages.Inc()
	if m.Refuse != nil {
		t.m.messagesDropped.Inc()
		return Result{Outcome: Refused, Err: m.Refuse}
	}
	if wait {
		// Brokers count on receipt, as Zipkin's collectors do.
		t.m.bytes.Add(float64(len(m.Body)))
		t.m.messageBytes.Set(float64(len(m.Body)))
	}
	if m.Request == nil && len(m.Body) == 0 {
		// Nothing to store: a success even when the queue is full (an
		// empty ListOfSpans, an empty broker message).
		return t.accepted(m, Result{})
	}
	if !wait {
		switch {
		case t.s.closing.Load():
			return t.retryLater(msgClosing)
		case t.s.q.full():
			return t.retryLater(msgQueueFull)
		}
	}
	body := m.Body
	var raw []byte
	if m.Request != nil {
		var release func()
		var code int
		var msg string
		raw, release, code, msg = t.s.receiveBody(m.ResponseWriter, m.Request)
		defer release()
		if code != 0 {
			return t.bodyError(code, msg)
		}
	} else if int64(len(body)) > t.s.ingest.maxBody {
		t.m.messagesDropped.Inc()
		return Result{Outcome: TooLarge, Err: fmt.Errorf("message of %d bytes is larger than the bound of %d (the server's MaxBodyBytes)", len(body), t.s.ingest.maxBody)}
	}
	if !wait {
		// The decoding slot is taken only now that the whole body has
		// arrived: a client that stalls while sending holds none, so no
		// number of slow clients keeps the others from being decoded.
		if !t.acquire(ctx) {
			return t.retryLater(msgBusy)
		}
		defer func() { <-t.s.posts }()
	}
	if m.Request != nil {
		var code int
		var msg string
		if body, code, msg = t.s.gunzip(m.Request, raw); code != 0 {
			return t.bodyError(code, msg)
		}
	}
	d, err := m.Decode(body)
	if d.Empty && err == nil {
		return t.accepted(m, Result{})
	}
	if !wait {
		t.m.bytes.Add(float64(len(body)))
		t.m.messageBytes.Set(float64(len(body)))
	}
	if err != nil {
		t.m.messagesDropped.Inc()
		return Result{Outcome: Malformed, Err: err}
	}
	res := Result{Spans: len(d.Spans), Rejected: d.Rejected, RejectedMessage: d.RejectedMessage}
	if len(d.Spans) == 0 {
		return t.accepted(m, res)
	}
	t.m.spans.Add(float64(len(d.Spans)))
	t.m.messageSpans.Set(float64(len(d.Spans)))
	kept := t.s.sampler.filter(d.Spans)
	if dropped := len(d.Spans) - len(kept); dropped > 0 {
		t.m.spansDropped.Add(float64(dropped))
	}
	if len(kept) == 0 {
		return t.accepted(m, res)
	}
	if len(kept) > t.s.ingest.maxSpans {
		t.m.messagesDropped.Inc()
		t.m.spansDropped.Add(float64(len(kept)))
		res.Outcome = TooLarge
		res.Err = worded(ErrTooManySpans, fmt.Sprintf("%d spans in one message; this server queues at most %d: send smaller batches",
			len(kept), t.s.ingest.maxSpans))
		return res
	}
	size := int64(len(body))
	if wait {
		if t.s.closing.Load() {
			res.Outcome, res.Err = Stopped, ErrClosing
			return res
		}
		// A message larger than the byte bound would never find room; the
		// bound is at least MaxBodyBytes, so it cannot happen here.
		size = min(size, t.s.ingest.maxBytes)
		c := &completion{fn: m.Done}
		if err := t.s.q.offerWait(ctx, message{spans: kept, bytes: size, done: c, dropped: t.m.spansDropped}); err != nil {
			res.Outcome, res.Err = Stopped, err
			return res
		}
		return t.accepted(Message{}, res) // done is the writers' to call now
	}
	var persist func() (uint64, error)
	if sp := t.s.spool; sp != nil {
		persist = func() (uint64, error) {
			rec := spoolRecord{format: d.Format, body: body}
			if !rec.replayable() {
				// The spool holds messages as span-endpoint bodies: other
				// decoded spans are written as proto3, which replay
				// decodes like such a POST.
				rec = spoolRecord{format: codec.Proto3, body: codec.AppendProto3Spans(nil, kept)}
			}
			return sp.Append(rec.marshal())
		}
	}
	if err := t.s.q.offerDurable(message{spans: kept, bytes: size}, persist); err != nil {
		t.m.spansDropped.Add(float64(len(kept)))
		r := t.retryLater(t.offerError(err))
		r.Spans = res.Spans
		return r
	}
	return t.accepted(m, res)
}

// accepted completes an Accepted result: the decoder's rejected spans are
// counted as dropped, and a message with Done that queued nothing is done.
func (t *Transport) accepted(m Message, res Result) Result {
	if res.Rejected > 0 {
		t.m.spansDropped.Add(float64(res.Rejected))
	}
	if m.Done != nil {
		m.Done(nil)
	}
	res.Outcome = Accepted
	return res
}

// retryLater counts a refusal for want of room and returns it.
func (t *Transport) retryLater(err error) Result {
	t.m.messagesRejected.Inc()
	return Result{Outcome: RetryLater, Err: err, RetryAfter: t.retryAfter()}
}

// bodyError maps an error of receiveBody or gunzip (an HTTP status and its
// message) to a Result, counting it.
func (t *Transport) bodyError(code int, msg string) Result {
	err := errors.New(msg)
	switch code {
	case http.StatusServiceUnavailable:
		return t.retryLater(worded(ErrBusy, msg))
	case http.StatusRequestEntityTooLarge:
		t.m.messagesDropped.Inc()
		return Result{Outcome: TooLarge, Err: err}
	case http.StatusRequestTimeout:
		t.m.messagesDropped.Inc()
		return Result{Outcome: Timeout, Err: err}
	}
	t.m.messagesDropped.Inc()
	return Result{Outcome: Malformed, Err: err}
}

// The refusals of Ingest, in words for the client.
var (
	msgQueueFull  = worded(errQueueFull, "The span queue is full; retry later")
	msgSpoolFull  = worded(errQueueFull, "The span spool is full; retry later")
	msgSpoolError = worded(errQueueFull, "Cannot write the spans to the spool; retry later")
	msgClosing    = worded(errClosing, "The server is shutting down; send the spans to another instance or retry later")
	msgBusy       = worded(ErrBusy, "Too many span requests are being decoded; retry later")
)

// wordedError is err told to a client as msg.
type wordedError struct {
	msg string
	err error
}

func worded(err error, msg string) error { return &wordedError{msg: msg, err: err} }
func (e *wordedError) Error() string     { return e.msg }
func (e *wordedError) Unwrap() error     { return e.err }

// offerError words an error of offerDurable for the client.
func (t *Transport) offerError(err error) error {
	switch {
	case errors.Is(err, errQueueFull):
		return msgQueueFull
	case errors.Is(err, errClosing), errors.Is(err, spool.ErrClosed):
		return msgClosing
	case errors.Is(err, spool.ErrFull):
		return msgSpoolFull
	}
	t.s.log.Error("cannot write a request to the spool", "transport", t.name, "err", err)
	return msgSpoolError
}

// acquire takes one of the decoding slots shared by every transport
// (Config.MaxConcurrentPosts), waiting up to postWait or until ctx ends.
func (t *Transport) acquire(ctx context.Context) bool {
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
	return false
}
