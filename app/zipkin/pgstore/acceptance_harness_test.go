package pgstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	"github.com/sqlpool/sqlpool/app/zipkin/pgstore"
	"github.com/sqlpool/sqlpool/pool"
)

// The harness of Zipkin's storage acceptance checklist (reference §5): the
// facts of Zipkin's zipkin-tests ITs — data relative to TODAY (UTC
// midnight), a default request of endTs TODAY+DAY, lookback 2·DAY, limit
// 100, spans accepted in chunks of 100, results compared after Trace.merge
// because the stores return merged traces.

const day = int64(86_400_000)

var today = func() int64 {
	now := time.Now().UnixMilli()
	return now - now%day
}()

// Endpoints of Zipkin's TestObjects.
var (
	frontend = &model.Endpoint{ServiceName: "frontend", IPv4: mustAddr("172.17.0.13")}
	backend  = &model.Endpoint{ServiceName: "backend", IPv4: mustAddr("172.17.0.9")}
	dbEP     = &model.Endpoint{ServiceName: "db", IPv4: mustAddr("172.17.0.2"), Port: 3306}
	kafka    = &model.Endpoint{ServiceName: "kafka"}
)

func epName(name string) *model.Endpoint { return &model.Endpoint{ServiceName: name} }

// randomTraceID is a random 128-bit trace ID.
func randomTraceID() model.TraceID {
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

func randomID() model.ID {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return model.ID(binary.BigEndian.Uint64(b[:]) | 1)
}

// micros converts epoch milliseconds to microseconds.
func micros(ms int64) int64 { return ms * 1000 }

// harness is one server's schema, pool and stores.
type harness struct {
	srv server
	db  *sql.DB // sqlpool's *sql.DB (p.OpenDB())
}

var quietPoolLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// poolDB opens srv's database through the sqlpool pool as the product does:
// pool.New over the driver's connector (pgdialect's rules), then p.OpenDB().
func poolDB(t testing.TB, srv server) *sql.DB {
	t.Helper()
	p, err := pool.New(srv.connector(t), pool.Config{MaxConns: 4, MinIdleConns: -1, Logger: quietPoolLog})
	if err != nil {
		t.Fatalf("pool.New: %v", err)
	}
	db := p.OpenDB()
	t.Cleanup(func() {
		db.Close()
		if err := p.Close(); err != nil {
			t.Errorf("pool Close: %v", err)
		}
	})
	return db
}

// newHarness creates a fresh schema with the store's tables on srv.
func newHarness(t *testing.T, srv server) *harness {
	t.Helper()
	srv = freshSchema(t, srv)
	db := poolDB(t, srv)
	if err := pgstore.CreateSchema(ctxT(t), db); err != nil {
		t.Fatalf("CreateSchema: %v", err)
	}
	return &harness{srv: srv, db: db}
}

// reset empties the tables (each checklist item starts on an empty store).
func (h *harness) reset(t *testing.T) {
	t.Helper()
	if _, err := h.db.ExecContext(ctxT(t), "TRUNCATE zipkin_spans, zipkin_names, zipkin_dependency_queue, zipkin_dependency_traces, zipkin_dependency_hours"); err != nil {
		t.Fatalf("TRUNCATE: %v", err)
	}
}

// store opens a Store with opts on the harness' pool.
func (h *harness) store(t *testing.T, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(ctxT(t), h.db, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// accept stores spans in chunks of 100, as Zipkin's ITs do.
func accept(t *testing.T, s *pgstore.Store, spans ...model.Span) {
	t.Helper()
	for start := 0; start < len(spans); start += 100 {
		chunk := append([]model.Span(nil), spans[start:min(start+100, len(spans))]...)
		for i := range chunk {
			chunk[i] = clone(chunk[i])
		}
		if err := s.Accept(ctxT(t), chunk); err != nil {
			t.Fatalf("Accept: %v", err)
		}
	}
}

func clone(s model.Span) model.Span {
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

// request returns Zipkin's default test request changed by opts.
func request(opts ...func(*model.QueryRequest)) model.QueryRequest {
	q := model.QueryRequest{EndTs: today + day, Lookback: 2 * day, Limit: 100}
	for _, o := range opts {
		o(&q)
	}
	return q
}

func svc(name string) func(*model.QueryRequest) {
	return func(q *model.QueryRequest) { q.ServiceName = name }
}
func remote(name string) func(*model.QueryRequest) {
	return func(q *model.QueryRequest) { q.RemoteServiceName = name }
}
func spanName(name string) func(*model.QueryRequest) {
	return func(q *model.QueryRequest) { q.SpanName = name }
}
func annotationQuery(s string) func(*model.QueryRequest) {
	return func(q *model.QueryRequest) { q.AnnotationQuery = model.ParseAnnotationQuery(s) }
}
func durations(minD, maxD int64) func(*model.QueryRequest) {
	return func(q *model.QueryRequest) { q.MinDuration, q.MaxDuration = minD, maxD }
}
func window(endTs, lookback int64) func(*model.QueryRequest) {
	return func(q *model.QueryRequest) { q.EndTs, q.Lookback = endTs, lookback }
}
func limit(n int) func(*model.QueryRequest) {
	return func(q *model.QueryRequest) { q.Limit = n }
}

func getTraces(t *testing.T, s *pgstore.Store, q model.QueryRequest) [][]model.Span {
	t.Helper()
	got, err := s.GetTraces(ctxT(t), q)
	if err != nil {
		t.Fatalf("GetTraces(%+v): %v", q, err)
	}
	return got
}

// canonical merges a trace (Trace.merge) and orders its spans for
// comparison.
func canonical(trace []model.Span) []model.Span {
	in := make([]model.Span, len(trace))
	for i := range trace {
		in[i] = clone(trace[i])
	}
	out := mysqlstore.MergeTrace(in)
	sort.SliceStable(out, func(i, j int) bool { return spanString(&out[i]) < spanString(&out[j]) })
	return out
}

func spanString(s *model.Span) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{trace=%s parent=%s id=%s kind=%s name=%q ts=%d dur=%d", s.TraceID, s.ParentID, s.ID,
		s.Kind, s.Name, s.Timestamp, s.Duration)
	if s.LocalEndpoint != nil {
		fmt.Fprintf(&b, " local=%+v", *s.LocalEndpoint)
	}
	if s.RemoteEndpoint != nil {
		fmt.Fprintf(&b, " remote=%+v", *s.RemoteEndpoint)
	}
	if len(s.Annotations) > 0 {
		fmt.Fprintf(&b, " annotations=%v", s.Annotations)
	}
	if len(s.Tags) > 0 {
		keys := make([]string, 0, len(s.Tags))
		for k := range s.Tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString(" tags={")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(" ")
			}
			v := s.Tags[k]
			if len(v) > 40 {
				v = fmt.Sprintf("%.20s…(%d bytes)", v, len(v))
			}
			fmt.Fprintf(&b, "%s=%q", k, v)
		}
		b.WriteString("}")
	}
	if s.Debug {
		b.WriteString(" debug")
	}
	if s.Shared {
		b.WriteString(" shared")
	}
	b.WriteString("}")
	return b.String()
}

func traceString(trace []model.Span) string {
	parts := make([]string, len(trace))
	for i := range trace {
		parts[i] = spanString(&trace[i])
	}
	return strings.Join(parts, "\n    ")
}

// tracesString renders traces canonically, sorted, for comparison.
func tracesString(traces [][]model.Span) []string {
	out := make([]string, len(traces))
	for i, tr := range traces {
		out[i] = traceString(canonical(tr))
	}
	sort.Strings(out)
	return out
}

// assertTraces checks that got holds exactly the traces want, in any order,
// each compared after Trace.merge.
func assertTraces(t *testing.T, what string, got [][]model.Span, want ...[]model.Span) {
	t.Helper()
	g, w := tracesString(got), tracesString(want)
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Errorf("%s: got %d traces:\n  %s\nwant %d:\n  %s", what, len(g), strings.Join(g, "\n  "), len(w), strings.Join(w, "\n  "))
	}
}

// assertGetTraces runs GetTraces and checks its result with assertTraces.
func assertGetTraces(t *testing.T, s *pgstore.Store, q model.QueryRequest, want ...[]model.Span) {
	t.Helper()
	assertTraces(t, fmt.Sprintf("GetTraces(%s)", describe(q)), getTraces(t, s, q), want...)
}

func describe(q model.QueryRequest) string {
	var parts []string
	if q.ServiceName != "" {
		parts = append(parts, "service="+q.ServiceName)
	}
	if q.RemoteServiceName != "" {
		parts = append(parts, "remote="+q.RemoteServiceName)
	}
	if q.SpanName != "" {
		parts = append(parts, "span="+q.SpanName)
	}
	if len(q.AnnotationQuery) > 0 {
		parts = append(parts, "annotationQuery="+model.FormatAnnotationQuery(q.AnnotationQuery))
	}
	if q.MinDuration != 0 || q.MaxDuration != 0 {
		parts = append(parts, fmt.Sprintf("duration=[%d,%d]", q.MinDuration, q.MaxDuration))
	}
	parts = append(parts, fmt.Sprintf("endTs=TODAY%+dms lookback=%d limit=%d", q.EndTs-today, q.Lookback, q.Limit))
	return strings.Join(parts, " ")
}

func assertTrace(t *testing.T, s *pgstore.Store, id model.TraceID, want []model.Span) {
	t.Helper()
	got, err := s.GetTrace(ctxT(t), id)
	if err != nil {
		t.Fatalf("GetTrace(%s): %v", id, err)
	}
	var gotT, wantT [][]model.Span
	if len(got) > 0 {
		gotT = append(gotT, got)
	}
	if len(want) > 0 {
		wantT = append(wantT, want)
	}
	assertTraces(t, "GetTrace("+id.String()+")", gotT, wantT...)
}

func assertStrings(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

// assertLinks compares dependency links regardless of order.
func assertLinks(t *testing.T, what string, got []model.DependencyLink, want ...model.DependencyLink) {
	t.Helper()
	str := func(ls []model.DependencyLink) string {
		s := make([]string, len(ls))
		for i, l := range ls {
			s[i] = fmt.Sprintf("%s->%s calls=%d errors=%d", l.Parent, l.Child, l.CallCount, l.ErrorCount)
		}
		sort.Strings(s)
		return strings.Join(s, "; ")
	}
	if str(got) != str(want) {
		t.Errorf("%s = [%s], want [%s]", what, str(got), str(want))
	}
}

// ctxBG is for helpers without a *testing.T.
var ctxBG = context.Background()

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
