package server

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/spool"
)

// endpointKind is which collector endpoint a POST came to.
type endpointKind int

const (
	v2Endpoint endpointKind = iota // POST /api/v2/spans: JSON v2 or proto3
	v1Endpoint                     // POST /api/v1/spans: JSON v1
)

// postWait is how long a POST waits for a decoding slot before a 503.
const postWait = time.Second

// postSpans is Zipkin's collector endpoint: read (bounded), gunzip
// (bounded), decode and validate synchronously; sample; offer to the queue;
// 202. Anything wrong with the body is a 400 or 413 and nothing of it is
// stored; no room in the queue is a 503 with Retry-After.
func (s *Server) postSpans(ep endpointKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.m.messages.Inc()
		if s.closing.Load() {
			s.unavailable(w, "The server is shutting down; send the spans to another instance or retry later")
			return
		}
		if s.q.full() {
			s.unavailable(w, "The span queue is full; retry later")
			return
		}
		raw, release, code, msg := s.receiveBody(w, r)
		defer release()
		if code == http.StatusServiceUnavailable {
			s.unavailable(w, msg)
			return
		}
		if code != 0 {
			s.m.messagesDropped.Inc()
			textError(w, code, msg)
			return
		}
		// The decoding slot is taken only now that the whole body has
		// arrived: a client that stalls while sending holds none, so no
		// number of slow clients keeps the others from being decoded.
		if !s.acquirePost(r) {
			s.unavailable(w, "Too many span requests are being decoded; retry later")
			return
		}
		defer func() { <-s.posts }()

		body, code, msg := s.gunzip(r, raw)
		if code != 0 {
			s.m.messagesDropped.Inc()
			textError(w, code, msg)
			return
		}
		// Zipkin answers an empty body or an empty list with 202 and stores
		// nothing (Brave's check() posts "[]").
		if len(body) == 0 || isEmptyList(body) {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		s.m.bytes.Add(float64(len(body)))
		s.m.messageBytes.Set(float64(len(body)))

		spans, err := decodeSpans(ep, r.Header.Get("Content-Type"), body)
		if err != nil {
			s.m.messagesDropped.Inc()
			textError(w, http.StatusBadRequest, err.Error())
			return
		}
		s.m.spans.Add(float64(len(spans)))
		s.m.messageSpans.Set(float64(len(spans)))

		kept := s.sampler.filter(spans)
		if dropped := len(spans) - len(kept); dropped > 0 {
			s.m.spansDropped.Add(float64(dropped))
		}
		if len(kept) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if len(kept) > s.ingest.maxSpans {
			s.m.messagesDropped.Inc()
			s.m.spansDropped.Add(float64(len(kept)))
			textError(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large: "+strconv.Itoa(len(kept))+
				" spans in one request; this server queues at most "+strconv.Itoa(s.ingest.maxSpans)+": send smaller batches")
			return
		}
		var persist func() (uint64, error)
		if s.spool != nil {
			persist = func() (uint64, error) {
				rec := make([]byte, 2, 2+len(body))
				rec[0] = byte(ep)
				if strings.Contains(strings.ToLower(r.Header.Get("Content-Type")), "protobuf") {
					rec[1] = 1
				}
				return s.spool.Append(append(rec, body...))
			}
		}
		switch err := s.q.offerDurable(message{spans: kept, bytes: int64(len(body))}, persist); {
		case errors.Is(err, spool.ErrFull):
			s.m.spansDropped.Add(float64(len(kept)))
			s.unavailable(w, "The span spool is full; retry later")
			return
		case errors.Is(err, errQueueFull):
			s.m.spansDropped.Add(float64(len(kept)))
			s.unavailable(w, "The span queue is full; retry later")
			return
		case errors.Is(err, errClosing), errors.Is(err, spool.ErrClosed):
			s.m.spansDropped.Add(float64(len(kept)))
			s.unavailable(w, "The server is shutting down; send the spans to another instance or retry later")
			return
		case err != nil:
			s.m.spansDropped.Add(float64(len(kept)))
			s.log.Error("cannot write a request to the spool", "err", err)
			s.unavailable(w, "Cannot write the spans to the spool; retry later")
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
}

// acquirePost takes a decoding slot, waiting up to postWait.
func (s *Server) acquirePost(r *http.Request) bool {
	select {
	case s.posts <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(postWait)
	defer t.Stop()
	select {
	case s.posts <- struct{}{}:
		return true
	case <-t.C:
	case <-r.Context().Done():
	}
	return false
}

// unavailable answers 503 with Retry-After and counts the refusal.
func (s *Server) unavailable(w http.ResponseWriter, msg string) {
	s.m.messagesRejected.Inc()
	secs := int64(math.Ceil(s.ingest.retryAfter.Seconds()))
	w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	textError(w, http.StatusServiceUnavailable, msg)
}

// receiveBody reads the request body, bounded by maxBody, into a buffer
// that grows with what arrives (never to the announced Content-Length in
// one step). The bytes held are reserved from the budget of body bytes
// being received (Config.MaxReceivingBytes) as the buffer grows, so that a
// client that announces a large body and stalls holds only what it sent;
// when the budget is spent the answer is 503. A body must arrive within
// bodyTimeout, else 408. release gives the reservation back; call it once
// the body is no longer needed. A non-zero code is the error to answer.
func (s *Server) receiveBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), code int, msg string) {
	var held int64
	release = func() {
		if held > 0 {
			s.receiving.Add(-held)
			held = 0
		}
	}
	limit := s.ingest.maxBody
	tooLarge := "Request Entity Too Large: the body is larger than " + strconv.FormatInt(limit, 10) + " bytes"
	if r.ContentLength > limit {
		return nil, release, http.StatusRequestEntityTooLarge, tooLarge
	}
	// (A ResponseWriter without deadlines, as in tests that call the
	// handler directly, reads without one.) The deadline is lifted once
	// the body is read; after an error it stays, so that the HTTP server's
	// discarding of the unread body fails fast and closes the connection
	// instead of waiting on the client.
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(s.ingest.bodyTimeout)) == nil
	rd := http.MaxBytesReader(w, r.Body, limit)
	var buf []byte
	var err error
	for {
		if len(buf) == cap(buf) {
			grow := int64(min(max(cap(buf), minReceiveChunk), maxReceiveChunk))
			if r.ContentLength >= 0 && int64(cap(buf)) >= r.ContentLength {
				grow = minReceiveChunk // room to see EOF (or a body longer than announced)
			}
			if !reserveUpTo(&s.receiving, grow, s.ingest.maxReceiving) {
				return nil, release, http.StatusServiceUnavailable, "Too many span bytes are being received; retry later"
			}
			held += grow
			nb := make([]byte, len(buf), int64(cap(buf))+grow)
			copy(nb, buf)
			buf = nb
		}
		var n int
		n, err = rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			break
		}
	}
	if err == io.EOF {
		err = nil
	}
	if err == nil && deadline {
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, release, http.StatusRequestEntityTooLarge, tooLarge
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, release, http.StatusRequestTimeout, "Request Timeout: the body did not arrive within " + s.ingest.bodyTimeout.String()
		}
		return nil, release, http.StatusBadRequest, "Cannot read the request body: " + err.Error()
	}
	return buf, release, 0, ""
}

// Growth steps of receiveBody's buffer: it starts at minReceiveChunk and
// doubles up to steps of maxReceiveChunk.
const (
	minReceiveChunk = 512
	maxReceiveChunk = 1 << 20
)

// gunzip returns body inflated when Content-Encoding says gzip, bounded by
// maxBody (a gzip bomb is a 413), else body itself. A non-zero code is the
// error to answer.
func (s *Server) gunzip(r *http.Request, body []byte) ([]byte, int, string) {
	limit := s.ingest.maxBody
	if len(body) == 0 || !strings.Contains(strings.ToLower(r.Header.Get("Content-Encoding")), "gzip") {
		return body, 0, ""
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, http.StatusBadRequest, "Cannot gunzip spans"
	}
	var out bytes.Buffer
	out.Grow(min(4*len(body), int(limit)+1))
	n, err := out.ReadFrom(io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, http.StatusBadRequest, "Cannot gunzip spans"
	}
	if n > limit {
		return nil, http.StatusRequestEntityTooLarge, "Request Entity Too Large: the body is larger than " + strconv.FormatInt(limit, 10) + " bytes after gunzip"
	}
	return out.Bytes(), 0, ""
}

// isEmptyList reports whether body is a JSON empty list, "[]" with optional
// white space.
func isEmptyList(body []byte) bool {
	t := bytes.TrimSpace(body)
	if len(t) < 2 || t[0] != '[' || t[len(t)-1] != ']' {
		return false
	}
	return len(bytes.TrimSpace(t[1:len(t)-1])) == 0
}

// sampler is Zipkin's CollectorSampler: a trace is kept when its debug flag
// is set or when |low 64 bits of the trace ID, as a signed long| ≤ rate ×
// MaxInt64, so that every span of a trace gets the same decision.
type sampler struct {
	all      bool
	boundary int64
}

func newSampler(rate float64) sampler {
	switch {
	case rate == 0 || rate >= 1:
		return sampler{all: true}
	case rate < 0:
		return sampler{boundary: 0}
	}
	return sampler{boundary: int64(float64(math.MaxInt64) * rate)}
}

func (s sampler) keep(sp *model.Span) bool {
	if s.all || sp.Debug {
		return true
	}
	t := int64(sp.TraceID.Low)
	switch {
	case t == math.MinInt64:
		t = math.MaxInt64
	case t < 0:
		t = -t
	}
	return t <= s.boundary
}

// filter returns the kept spans, reusing spans' array.
func (s sampler) filter(spans []model.Span) []model.Span {
	if s.all {
		return spans
	}
	kept := spans[:0]
	for i := range spans {
		if s.keep(&spans[i]) {
			kept = append(kept, spans[i])
		}
	}
	return kept
}
