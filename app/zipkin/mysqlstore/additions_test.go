package mysqlstore_test

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
)

// zipkinOnly creates Zipkin's three tables, without the schema additions,
// in a fresh database of srv.
func zipkinOnly(t *testing.T, srv server) *sql.DB {
	t.Helper()
	db := openPlain(t, freshDatabase(t, srv.dsn))
	for _, q := range mysqlstore.SchemaDDL() {
		if _, err := db.ExecContext(ctxT(t), q); err != nil {
			t.Fatalf("%.40s: %v", q, err)
		}
	}
	// Zipkin's own tag search: without the index it reads along.
	legacyTagLayout(t, db)
	return db
}

func openStore(t *testing.T, db *sql.DB) *mysqlstore.Store {
	t.Helper()
	s, err := mysqlstore.Open(ctxT(t), db, mysqlstore.Options{Logger: quietLogger})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// additionsWorkload returns traces that exercise the name and trace
// lookups: several services, client and server spans, spans without a local
// endpoint, without a name, named "unknown", with upper-case names, without
// a timestamp. Client and server have their own span IDs: for a span ID
// shared by both sides the additions index each side's own names, where
// Zipkin's queries see the one merged row (TestAdditionsSharedSpan).
func additionsWorkload(seed uint64, base time.Time) []model.Span {
	rng := rand.New(rand.NewPCG(seed, 1))
	svcs := []string{"frontend", "backend", "db", "cache", "auth"}
	var out []model.Span
	for tr := 0; tr < 40; tr++ {
		tid := model.TraceID{High: rng.Uint64(), Low: rng.Uint64()}
		ts := base.Add(-time.Duration(rng.IntN(3600)) * time.Second).UnixMicro()
		root := model.ID(rng.Uint64() | 1)
		caller, callee := svcs[rng.IntN(len(svcs))], svcs[rng.IntN(len(svcs))]
		names := []string{"get /a", "post /b", "unknown", "", "Query"}
		client := model.Span{TraceID: tid, ID: root, Kind: model.KindClient, Name: names[rng.IntN(len(names))],
			Timestamp: ts, Duration: 1000 + int64(rng.IntN(5000)),
			LocalEndpoint: ep(caller, "10.0.0.1", 80), RemoteEndpoint: ep(callee, "10.0.0.2", 81),
			Tags: map[string]string{"http.status_code": fmt.Sprint(200 + 300*rng.IntN(2))}}
		server := model.Span{TraceID: tid, ID: model.ID(rng.Uint64() | 1), ParentID: root, Kind: model.KindServer, Name: "handle",
			Timestamp: ts + 100, Duration: 500, LocalEndpoint: ep(callee, "10.0.0.2", 81)}
		child := model.Span{TraceID: tid, ID: model.ID(rng.Uint64() | 1), ParentID: root, Name: "local work",
			Timestamp: ts + 200, Duration: 50, LocalEndpoint: ep(callee, "", 0)}
		orphan := model.Span{TraceID: tid, ID: model.ID(rng.Uint64() | 1), ParentID: root, Name: "no endpoint",
			Timestamp: ts + 300, Duration: 10}
		noTS := model.Span{TraceID: tid, ID: model.ID(rng.Uint64() | 1), ParentID: root, Name: "no timestamp",
			LocalEndpoint: ep(caller, "", 0), RemoteEndpoint: ep("remote-x", "", 0)}
		for _, sp := range []model.Span{client, server, child, orphan, noTS} {
			sp.Normalize()
			out = append(out, sp)
		}
	}
	return out
}

type lookups struct {
	Services []string
	Spans    map[string][]string
	Remotes  map[string][]string
	Traces   map[string][]string
}

func allLookups(t *testing.T, s *mysqlstore.Store, base time.Time) lookups {
	t.Helper()
	ctx := ctxT(t)
	var l lookups
	var err error
	if l.Services, err = s.GetServiceNames(ctx); err != nil {
		t.Fatal(err)
	}
	l.Spans, l.Remotes, l.Traces = map[string][]string{}, map[string][]string{}, map[string][]string{}
	for _, svc := range append(l.Services, "FRONTEND", "nobody") {
		if l.Spans[svc], err = s.GetSpanNames(ctx, svc); err != nil {
			t.Fatal(err)
		}
		if l.Remotes[svc], err = s.GetRemoteServiceNames(ctx, svc); err != nil {
			t.Fatal(err)
		}
		for _, q := range []model.QueryRequest{
			{ServiceName: svc, EndTs: base.UnixMilli(), Lookback: 3_600_000, Limit: 5},
			{ServiceName: svc, EndTs: base.UnixMilli(), Lookback: 1_800_000, Limit: 100},
			{ServiceName: svc, SpanName: "get /a", EndTs: base.UnixMilli(), Lookback: 3_600_000, Limit: 10},
			{ServiceName: svc, RemoteServiceName: "backend", EndTs: base.UnixMilli(), Lookback: 3_600_000, Limit: 10},
			{ServiceName: svc, MinDuration: 3000, EndTs: base.UnixMilli(), Lookback: 3_600_000, Limit: 10},
			{ServiceName: svc, MinDuration: 100, MaxDuration: 2000, EndTs: base.UnixMilli(), Lookback: 3_600_000, Limit: 10},
		} {
			key := fmt.Sprintf("%s/%s/%s/%d-%d/%d/%d", svc, q.SpanName, q.RemoteServiceName, q.MinDuration, q.MaxDuration, q.Lookback, q.Limit)
			l.Traces[key] = tracesString(getTraces(t, s, q))
		}
	}
	return l
}

// The store answers every name lookup and getTraces by service the same
// with the schema additions as with Zipkin's queries on Zipkin's schema.
func TestAdditionsAnswerAsZipkinQueries(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		ctx := ctxT(t)
		base := time.Now().Truncate(time.Millisecond)
		spans := additionsWorkload(1, base)

		_, withDB := newStore(t, srv)
		with := openStore(t, withDB)
		plainDB := zipkinOnly(t, srv)
		plain := openStore(t, plainDB)
		if got := with.Additions(); !got.Names || !got.ServiceSpans {
			t.Fatalf("after CreateSchema: Additions() = %+v, want both", got)
		}
		if got := plain.Additions(); got.Names || got.ServiceSpans {
			t.Fatalf("on Zipkin's schema: Additions() = %+v, want none", got)
		}
		for i := 0; i < len(spans); i += 50 {
			chunk := spans[i:min(i+50, len(spans))]
			for _, s := range []*mysqlstore.Store{with, plain} {
				if err := s.Accept(ctx, chunk); err != nil {
					t.Fatalf("Accept: %v", err)
				}
			}
		}
		// Again: names already known are not inserted twice.
		if err := with.Accept(ctx, spans[:50]); err != nil {
			t.Fatal(err)
		}
		if err := plain.Accept(ctx, spans[:50]); err != nil {
			t.Fatal(err)
		}
		got, want := allLookups(t, with, base), allLookups(t, plain, base)
		if len(want.Services) < 3 || len(want.Traces) == 0 {
			t.Fatalf("workload too thin: %+v", want.Services)
		}
		if !reflect.DeepEqual(got, want) {
			for k := range want.Traces {
				if !reflect.DeepEqual(got.Traces[k], want.Traces[k]) {
					t.Errorf("getTraces %s:\n with additions %q\n Zipkin's query %q", k, got.Traces[k], want.Traces[k])
				}
			}
			t.Errorf("with additions:\n%+v\nZipkin's queries:\n%+v", got.Services, want.Services)
			for k := range want.Spans {
				if !reflect.DeepEqual(got.Spans[k], want.Spans[k]) || !reflect.DeepEqual(got.Remotes[k], want.Remotes[k]) {
					t.Errorf("%s: span names %q vs %q; remote %q vs %q", k, got.Spans[k], want.Spans[k], got.Remotes[k], want.Remotes[k])
				}
			}
		}
	})
}

// CreateSchema on a database that already holds spans adds the additions
// and fills them, so that the fast lookups find what was stored before.
func TestAdditionsBackfilledByCreateSchema(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		ctx := ctxT(t)
		base := time.Now().Truncate(time.Millisecond)
		db := zipkinOnly(t, srv)
		plain := openStore(t, db)
		if err := plain.Accept(ctx, additionsWorkload(2, base)); err != nil {
			t.Fatal(err)
		}
		want := allLookups(t, plain, base)
		if err := mysqlstore.CreateSchema(ctx, db); err != nil {
			t.Fatalf("CreateSchema over stored spans: %v", err)
		}
		with := openStore(t, db)
		if a := with.Additions(); !a.Names || !a.ServiceSpans {
			t.Fatalf("Additions() = %+v after CreateSchema", a)
		}
		if got := allLookups(t, with, base); !reflect.DeepEqual(got, want) {
			t.Errorf("after backfill:\n%+v\nwant\n%+v", got, want)
		}
		// Idempotent: a second CreateSchema neither fails nor duplicates.
		if err := mysqlstore.CreateSchema(ctx, db); err != nil {
			t.Fatalf("second CreateSchema: %v", err)
		}
	})
}

// A span ID reported by both client and server (B3's shared span) is one
// row of zipkin_spans, whose name and remote service the later write can
// replace; Zipkin's queries list that row's current values under both
// services. The additions index each side's own values instead, as
// Zipkin's Cassandra and Elasticsearch stores do.
func TestAdditionsSharedSpan(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		ctx := ctxT(t)
		_, db := newStore(t, srv)
		s := openStore(t, db)
		ts := time.Now().UnixMicro()
		tid := model.TraceID{Low: 77}
		client := model.Span{TraceID: tid, ID: 5, Kind: model.KindClient, Name: "call", Timestamp: ts, Duration: 100,
			LocalEndpoint: ep("web", "", 0), RemoteEndpoint: ep("api", "", 0)}
		server := model.Span{TraceID: tid, ID: 5, Kind: model.KindServer, Shared: true, Name: "serve", Timestamp: ts + 10,
			Duration: 50, LocalEndpoint: ep("api", "", 0)}
		if err := s.Accept(ctx, []model.Span{client, server}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			svc           string
			spans, remote []string
		}{{"web", []string{"call"}, []string{"api"}}, {"api", []string{"serve"}, nil}} {
			spans, err := s.GetSpanNames(ctx, c.svc)
			if err != nil {
				t.Fatal(err)
			}
			remote, err := s.GetRemoteServiceNames(ctx, c.svc)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(spans, c.spans) || !reflect.DeepEqual(remote, c.remote) {
				t.Errorf("%s: span names %q remote %q, want %q %q", c.svc, spans, remote, c.spans, c.remote)
			}
		}
	})
}

// The newest-first searches read on past the first rows when few of them
// match (a filter on the span row or on another term) and past a run of
// rows sharing one timestamp longer than a read, and still answer as
// Zipkin's queries: the limit newest traces by their newest matching span.
func TestAdditionsReadOnPastSparseMatches(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		ctx := ctxT(t)
		base := time.Now().Truncate(time.Second)
		top := base.Add(-time.Minute).UnixMicro()
		var spans []model.Span
		id := uint64(1)
		add := func(trace uint64, ts, dur int64, tags map[string]string) {
			id++
			sp := model.Span{TraceID: model.TraceID{High: 7, Low: trace}, ID: model.ID(id), Name: "op", Kind: model.KindServer,
				Timestamp: ts, Duration: dur, LocalEndpoint: ep("busy", "10.0.0.1", 80), Tags: tags}
			sp.Normalize()
			spans = append(spans, sp)
		}
		// Newest: 40 spans of one trace at one timestamp, all matching.
		for i := 0; i < 40; i++ {
			add(1, top, 9000, map[string]string{"error": "x", "k": "v"})
		}
		// Then 300 spans of 100 traces that match nothing, with every 23rd
		// one matching (its own timestamp), down the window.
		for i := 0; i < 300; i++ {
			ts := top - int64(i+1)*1_000_000
			if i%23 == 0 {
				add(1000+uint64(i), ts, 9000, map[string]string{"error": "y", "k": "v"})
				continue
			}
			add(100+uint64(i%100), ts, 10, map[string]string{"k": "w"})
		}
		_, withDB := newStore(t, srv)
		with := openStore(t, withDB)
		plain := openStore(t, zipkinOnly(t, srv))
		for _, s := range []*mysqlstore.Store{with, plain} {
			for i := 0; i < len(spans); i += 100 {
				if err := s.Accept(ctx, spans[i:min(i+100, len(spans))]); err != nil {
					t.Fatalf("Accept: %v", err)
				}
			}
		}
		for _, limit := range []int{1, 2, 3, 5, 12, 100} {
			for _, q := range []model.QueryRequest{
				{ServiceName: "busy", MinDuration: 5000},
				{ServiceName: "busy", AnnotationQuery: map[string]string{"error": ""}},
				{AnnotationQuery: map[string]string{"error": ""}},
				{AnnotationQuery: map[string]string{"k": "v"}},
				{ServiceName: "busy", AnnotationQuery: map[string]string{"k": "v", "error": ""}},
			} {
				q.EndTs, q.Lookback, q.Limit = base.UnixMilli(), 3_600_000, limit
				got, want := tracesString(getTraces(t, with, q)), tracesString(getTraces(t, plain, q))
				if len(want) != min(limit, 15) {
					t.Fatalf("%+v: Zipkin's query found %d traces, want %d: workload wrong", q, len(want), min(limit, 15))
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%+v:\n with additions %q\n Zipkin's query %q", q, got, want)
				}
			}
		}
	})
}
