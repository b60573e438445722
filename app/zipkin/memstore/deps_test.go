package memstore

import (
	"context"
	"reflect"
	"sort"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// A client span and the server span sharing its ID (v2 instrumentation's
// split RPC) are one call, as Zipkin's DependencyLinker counts it.
func TestDependenciesCountSharedSpanOnce(t *testing.T) {
	ctx := context.Background()
	s := New(Options{})
	tid := model.TraceID{High: 7, Low: 0xabc}
	const ts = 1_700_000_000_000_000
	spans := []model.Span{
		{TraceID: tid, ID: 1, Kind: model.KindServer, Name: "get", Timestamp: ts, Duration: 300, LocalEndpoint: ep("front")},
		{TraceID: tid, ParentID: 1, ID: 2, Kind: model.KindClient, Name: "get", Timestamp: ts + 10, Duration: 100, LocalEndpoint: ep("front"), RemoteEndpoint: ep("back")},
		{TraceID: tid, ParentID: 1, ID: 2, Kind: model.KindServer, Shared: true, Name: "get", Timestamp: ts + 20, Duration: 50, LocalEndpoint: ep("back"), RemoteEndpoint: ep("front")},
	}
	for i := range spans {
		spans[i].Normalize()
	}
	if err := s.Accept(ctx, spans); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetDependencies(ctx, ts/1000+1000, 3_600_000)
	if err != nil {
		t.Fatal(err)
	}
	want := []model.DependencyLink{{Parent: "front", Child: "back", CallCount: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GetDependencies = %+v, want %+v", got, want)
	}
}

// A trace counts in the hour of its earliest span: a window on hour
// boundaries has exactly the links of the traces that start in it, even
// when later spans of a trace fall in the next hour.
func TestDependenciesHourWindows(t *testing.T) {
	ctx := context.Background()
	s := New(Options{})
	const hour = int64(3_600_000) // ms
	base := int64(1_700_000_000_000) / hour * hour
	trace := func(low uint64, startMs int64, child string) []model.Span {
		tid := model.TraceID{Low: low}
		ts := startMs * 1000
		sp := []model.Span{
			{TraceID: tid, ID: 1, Kind: model.KindServer, Timestamp: ts, Duration: 10, LocalEndpoint: ep("front")},
			// the client span starts 2 minutes later, in the next hour for the late trace
			{TraceID: tid, ParentID: 1, ID: 2, Kind: model.KindClient, Timestamp: ts + 120_000_000, Duration: 10, LocalEndpoint: ep("front"), RemoteEndpoint: ep(child)},
		}
		for i := range sp {
			sp[i].Normalize()
		}
		return sp
	}
	var all []model.Span
	all = append(all, trace(1, base+10*60_000, "a")...)     // hour 0
	all = append(all, trace(2, base+59*60_000, "b")...)     // hour 0, client in hour 1
	all = append(all, trace(3, base+hour+5*60_000, "c")...) // hour 1
	if err := s.Accept(ctx, all); err != nil {
		t.Fatal(err)
	}
	names := func(endTs, lookback int64) []string {
		links, err := s.GetDependencies(ctx, endTs, lookback)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range links {
			out = append(out, l.Child)
		}
		sort.Strings(out) // the store links traces in no particular order
		return out
	}
	if got := names(base+hour, hour); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("hour 0: children %v, want [a b]", got)
	}
	if got := names(base+2*hour, hour); !reflect.DeepEqual(got, []string{"c"}) {
		t.Errorf("hour 1: children %v, want [c]", got)
	}
	if got := names(base+2*hour, 2*hour); len(got) != 3 {
		t.Errorf("both hours: children %v, want 3", got)
	}
}
