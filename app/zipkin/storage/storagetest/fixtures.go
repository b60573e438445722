package storagetest

import (
	"crypto/rand"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/storage"
)

// Day is one day in milliseconds.
const Day = int64(86_400_000)

// Today is the UTC midnight before the test binary started, in epoch
// milliseconds: the checks' data lies on the day after it.
var Today = func() int64 {
	now := time.Now().UnixMilli()
	return now - now%Day
}()

// Micros converts epoch milliseconds to microseconds.
func Micros(ms int64) int64 { return ms * 1000 }

// Endpoints of Zipkin's TestObjects.
var (
	Frontend = &model.Endpoint{ServiceName: "frontend", IPv4: netip.MustParseAddr("172.17.0.13")}
	Backend  = &model.Endpoint{ServiceName: "backend", IPv4: netip.MustParseAddr("172.17.0.9")}
	DB       = &model.Endpoint{ServiceName: "db", IPv4: netip.MustParseAddr("172.17.0.2"), Port: 3306}
	Kafka    = &model.Endpoint{ServiceName: "kafka"}
)

// Remote endpoints of the dependency checks: frontend and backend seen from
// the other side of a call.
var (
	frontendRemote = &model.Endpoint{ServiceName: "frontend", IPv4: Frontend.IPv4, Port: 31400}
	backendRemote  = &model.Endpoint{ServiceName: "backend", IPv4: Backend.IPv4, Port: 9000}
)

// EpName is an endpoint with only a service name.
func EpName(name string) *model.Endpoint { return &model.Endpoint{ServiceName: name} }

// RandomTraceID is a random 128-bit trace ID (neither half zero).
func RandomTraceID() model.TraceID {
	var b [16]byte
	_, _ = rand.Read(b[:])
	t := model.TraceID{High: binary.BigEndian.Uint64(b[:8]), Low: binary.BigEndian.Uint64(b[8:])}
	if t.High == 0 {
		t.High = 1
	}
	if t.Low == 0 {
		t.Low = 1
	}
	return t
}

// RandomID is a random non-zero span ID.
func RandomID() model.ID {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return model.ID(binary.BigEndian.Uint64(b[:]) | 1)
}

// StdTrace is Zipkin's TestObjects.TRACE: frontend serves a root request
// and calls backend, which answers as the shared server side of that client
// span and calls db, failing (tag error).
type StdTrace struct {
	ID                           model.TraceID
	Root, Client, Server, DBCall model.Span
	Start                        int64 // the root's timestamp, µs
}

// NewStdTrace returns a StdTrace with a random trace ID, starting 100 ms
// after Today.
func NewStdTrace() StdTrace {
	id := RandomTraceID()
	start := Micros(Today) + 100_000
	t := StdTrace{ID: id, Start: start}
	t.Root = model.Span{TraceID: id, ID: 1, Kind: model.KindServer, Name: "get /", Timestamp: start, Duration: 350_000,
		LocalEndpoint: Frontend, Tags: map[string]string{"http.path": "/api"}}
	t.Client = model.Span{TraceID: id, ParentID: 1, ID: 2, Kind: model.KindClient, Name: "get", Timestamp: start + 50_000,
		Duration: 250_000, LocalEndpoint: Frontend, RemoteEndpoint: Backend,
		Annotations: []model.Annotation{{Timestamp: start + 60_000, Value: "foo"}}}
	t.Server = model.Span{TraceID: id, ParentID: 1, ID: 2, Kind: model.KindServer, Name: "get", Timestamp: start + 100_000,
		Duration: 150_000, LocalEndpoint: Backend, RemoteEndpoint: frontendRemote, Shared: true}
	t.DBCall = model.Span{TraceID: id, ParentID: 2, ID: 3, Kind: model.KindClient, Name: "query", Timestamp: start + 150_000,
		Duration: 50_000, LocalEndpoint: Backend, RemoteEndpoint: DB, Tags: map[string]string{"error": ""}}
	return t
}

// Spans returns the trace's four spans.
func (s StdTrace) Spans() []model.Span { return []model.Span{s.Root, s.Client, s.Server, s.DBCall} }

// EndTs is the trace's end, in epoch milliseconds.
func (s StdTrace) EndTs() int64 { return (s.Root.Timestamp + s.Root.Duration) / 1000 }

// ClientSpan is a one-span trace: a frontend CLIENT call "get" to backend
// of 200 ms at ts (µs).
func ClientSpan(id model.TraceID, ts int64) model.Span {
	return model.Span{TraceID: id, ID: RandomID(), Kind: model.KindClient, Name: "get", Timestamp: ts, Duration: 200_000,
		LocalEndpoint: Frontend, RemoteEndpoint: Backend}
}

// span is a dependency checks' span named "get".
func span(id model.TraceID, parent, spanID model.ID, kind model.Kind, ts, dur int64, local, remote *model.Endpoint) model.Span {
	return model.Span{TraceID: id, ParentID: parent, ID: spanID, Kind: kind, Name: "get", Timestamp: ts, Duration: dur,
		LocalEndpoint: local, RemoteEndpoint: remote}
}

func one(s model.Span) []model.Span { return []model.Span{s} }

// trace returns spans as one trace.
func trace(spans ...model.Span) []model.Span { return spans }

// Clone returns a deep copy of s, normalised (as the collectors hand spans
// to a store).
func Clone(s model.Span) model.Span {
	c := s
	if s.LocalEndpoint != nil {
		e := *s.LocalEndpoint
		c.LocalEndpoint = &e
	}
	if s.RemoteEndpoint != nil {
		e := *s.RemoteEndpoint
		c.RemoteEndpoint = &e
	}
	c.Annotations = append([]model.Annotation(nil), s.Annotations...)
	if s.Tags != nil {
		c.Tags = make(map[string]string, len(s.Tags))
		for k, v := range s.Tags {
			c.Tags[k] = v
		}
	}
	c.Normalize()
	return c
}

// Accept stores copies of spans (Clone) in chunks of 100, as Zipkin's ITs
// do, from the calling goroutine, and fails t on an error.
func Accept(t testing.TB, s storage.SpanConsumer, spans ...model.Span) {
	t.Helper()
	for start := 0; start < len(spans); start += 100 {
		chunk := make([]model.Span, 0, min(100, len(spans)-start))
		for _, sp := range spans[start:min(start+100, len(spans))] {
			chunk = append(chunk, Clone(sp))
		}
		if err := s.Accept(Ctx(t), chunk); err != nil {
			t.Fatalf("Accept: %v", err)
		}
	}
}

// Request returns Zipkin's default test request (endTs Today+Day, lookback
// 2·Day, limit 100) changed by opts.
func Request(opts ...func(*model.QueryRequest)) model.QueryRequest {
	q := model.QueryRequest{EndTs: Today + Day, Lookback: 2 * Day, Limit: 100}
	for _, o := range opts {
		o(&q)
	}
	return q
}

// Svc sets a request's service name.
func Svc(name string) func(*model.QueryRequest) {
	return func(q *model.QueryRequest) { q.ServiceName = name }
}

// Remote sets a request's remote service name.
func Remote(name string) func(*model.QueryRequest) {
	return func(q *model.QueryRequest) { q.RemoteServiceName = name }
}

// SpanName sets a request's span name.
func SpanName(name string) func(*model.QueryRequest) {
	return func(q *model.QueryRequest) { q.SpanName = name }
}

// AnnotationQuery sets a request's annotation query, in Zipkin's syntax.
func AnnotationQuery(s string) func(*model.QueryRequest) {
	return func(q *model.QueryRequest) { q.AnnotationQuery = model.ParseAnnotationQuery(s) }
}

// Durations sets a request's minimum and maximum duration (µs).
func Durations(minD, maxD int64) func(*model.QueryRequest) {
	return func(q *model.QueryRequest) { q.MinDuration, q.MaxDuration = minD, maxD }
}

// Window sets a request's endTs and lookback (ms).
func Window(endTs, lookback int64) func(*model.QueryRequest) {
	return func(q *model.QueryRequest) { q.EndTs, q.Lookback = endTs, lookback }
}

// Limit sets a request's trace limit.
func Limit(n int) func(*model.QueryRequest) {
	return func(q *model.QueryRequest) { q.Limit = n }
}

// Link is a dependency link.
func Link(parent, child string, calls, errs int64) model.DependencyLink {
	return model.DependencyLink{Parent: parent, Child: child, CallCount: calls, ErrorCount: errs}
}
