package memstore

import (
	"context"
	"reflect"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

func ep(svc string) *model.Endpoint { return &model.Endpoint{ServiceName: svc} }

func TestAcceptAndRead(t *testing.T) {
	ctx := context.Background()
	s := New(Options{AutocompleteKeys: []string{"env"}})
	tid := model.TraceID{Low: 0xabc}
	spans := []model.Span{
		{TraceID: tid, ID: 1, Kind: model.KindClient, Name: "get", Timestamp: 1_000_000, Duration: 100, LocalEndpoint: ep("front"), RemoteEndpoint: ep("back"), Tags: map[string]string{"env": "prod"}},
		{TraceID: tid, ID: 1, Kind: model.KindServer, Shared: true, Name: "get", Timestamp: 1_000_010, Duration: 50, LocalEndpoint: ep("back")},
		{TraceID: tid, ParentID: 1, ID: 2, Name: "db", Timestamp: 1_000_020, Duration: 10, LocalEndpoint: ep("back"), Annotations: []model.Annotation{{Timestamp: 1_000_021, Value: "slow"}}},
	}
	for round := 0; round < 2; round++ { // sent twice: stored once
		if err := s.Accept(ctx, spans); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := s.GetTrace(ctx, tid)
	if len(got) != 3 {
		t.Fatalf("GetTrace: %d spans, want 3 (sent twice)", len(got))
	}
	if got, _ := s.GetTrace(ctx, model.TraceID{High: 5, Low: 0xabc}); len(got) != 0 {
		t.Fatalf("strict trace ID: another high half found %d spans", len(got))
	}
	q := func(mod func(*model.QueryRequest)) int {
		r := model.QueryRequest{EndTs: 2000, Lookback: 2000, Limit: 10}
		mod(&r)
		if err := r.Normalize(); err != nil {
			t.Fatal(err)
		}
		tr, _ := s.GetTraces(ctx, r)
		return len(tr)
	}
	for name, c := range map[string]struct {
		mod  func(*model.QueryRequest)
		want int
	}{
		"all":          {func(r *model.QueryRequest) {}, 1},
		"service":      {func(r *model.QueryRequest) { r.ServiceName = "back" }, 1},
		"other":        {func(r *model.QueryRequest) { r.ServiceName = "nope" }, 0},
		"remote":       {func(r *model.QueryRequest) { r.ServiceName = "front"; r.RemoteServiceName = "back" }, 1},
		"spanName":     {func(r *model.QueryRequest) { r.SpanName = "db" }, 1},
		"tag":          {func(r *model.QueryRequest) { r.AnnotationQuery = map[string]string{"env": "prod"} }, 1},
		"tagWrong":     {func(r *model.QueryRequest) { r.AnnotationQuery = map[string]string{"env": "dev"} }, 0},
		"annotation":   {func(r *model.QueryRequest) { r.AnnotationQuery = map[string]string{"slow": ""} }, 1},
		"minDuration":  {func(r *model.QueryRequest) { r.MinDuration = 100 }, 1},
		"tooLong":      {func(r *model.QueryRequest) { r.MinDuration = 101 }, 0},
		"beforeWindow": {func(r *model.QueryRequest) { r.EndTs = 999 }, 0},
	} {
		if n := q(c.mod); n != c.want {
			t.Errorf("%s: %d traces, want %d", name, n, c.want)
		}
	}
	if n, _ := s.GetServiceNames(ctx); len(n) != 2 {
		t.Errorf("services %v", n)
	}
	if n, _ := s.GetSpanNames(ctx, "back"); len(n) != 2 {
		t.Errorf("span names of back %v", n)
	}
	if n, _ := s.GetRemoteServiceNames(ctx, "front"); len(n) != 1 || n[0] != "back" {
		t.Errorf("remote names of front %v", n)
	}
	if v, _ := s.GetValues(ctx, "env"); len(v) != 1 || v[0] != "prod" {
		t.Errorf("autocomplete values %v", v)
	}
	links, err := s.GetDependencies(ctx, 2000, 2000)
	if err != nil || len(links) != 1 || links[0].Parent != "front" || links[0].Child != "back" || links[0].CallCount != 1 {
		t.Errorf("dependencies %+v, %v", links, err)
	}
	if _, err := s.GetDependencies(ctx, 0, 1); !model.IsQueryError(err) {
		t.Errorf("endTs 0: %v", err)
	}
}

// Past MaxSpans the oldest traces are evicted whole.
func TestEviction(t *testing.T) {
	ctx := context.Background()
	s := New(Options{MaxSpans: 10})
	for i := 1; i <= 5; i++ {
		var spans []model.Span
		for k := 1; k <= 3; k++ {
			spans = append(spans, model.Span{TraceID: model.TraceID{Low: uint64(i)}, ID: model.ID(k), Timestamp: 1})
		}
		_ = s.Accept(ctx, spans)
	}
	if s.spans > 10 {
		t.Fatalf("%d spans held, bound 10", s.spans)
	}
	if got, _ := s.GetTrace(ctx, model.TraceID{Low: 1}); len(got) != 0 {
		t.Error("the oldest trace was kept")
	}
	if got, _ := s.GetTrace(ctx, model.TraceID{Low: 5}); len(got) != 3 {
		t.Error("the newest trace was evicted")
	}
}

// Evictions are reported to OnEvict (outside the lock: the callback may
// read the store) and counted in Stats.
func TestEvictionIsReported(t *testing.T) {
	ctx := context.Background()
	var calls [][2]int
	var s *Store
	s = New(Options{MaxSpans: 10, OnEvict: func(traces, spans int) {
		calls = append(calls, [2]int{traces, spans})
		_ = s.Stats() // would deadlock under the store's lock
	}})
	for i := 1; i <= 5; i++ {
		var spans []model.Span
		for k := 1; k <= 3; k++ {
			spans = append(spans, model.Span{TraceID: model.TraceID{Low: uint64(i)}, ID: model.ID(k), Timestamp: 1})
		}
		_ = s.Accept(ctx, spans)
	}
	if want := [][2]int{{1, 3}, {1, 3}}; !reflect.DeepEqual(calls, want) {
		t.Errorf("OnEvict calls %v, want %v", calls, want)
	}
	if got, want := s.Stats(), (Stats{Spans: 9, Traces: 3, EvictedSpans: 6, EvictedTraces: 2}); got != want {
		t.Errorf("Stats %+v, want %+v", got, want)
	}
}
