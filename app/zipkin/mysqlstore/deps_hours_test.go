package mysqlstore_test

import (
	"reflect"
	"sort"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
)

// A trace counts in the hour of its earliest span: a window on hour
// boundaries has exactly the links of the traces that start in it, even
// when later spans of a trace fall in the next hour — before and after the
// aggregator drains its queue — and zipkin_dependencies' day row sums the
// hours for Zipkin's own readers.
func TestDependenciesHourWindows(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		h := newHarness(t, srv)
		s := h.store(t, mysqlstore.Options{DependencyFoldInterval: -1})
		const hour = int64(3_600_000)
		base := genDay + 5*hour // 05:00 UTC of a fixed day
		trace := func(startMs int64, child string) []model.Span {
			id := randomTraceID()
			ts := startMs * 1000
			// The client call starts 2 minutes after the root.
			return []model.Span{
				{TraceID: id, ID: 1, Kind: model.KindServer, Name: "get", Timestamp: ts, Duration: 10, LocalEndpoint: epName("front")},
				{TraceID: id, ParentID: 1, ID: 2, Kind: model.KindClient, Name: "call", Timestamp: ts + 120_000_000, Duration: 10,
					LocalEndpoint: epName("front"), RemoteEndpoint: epName(child)},
			}
		}
		var spans []model.Span
		spans = append(spans, trace(base+10*60_000, "a")...)      // 05:10
		spans = append(spans, trace(base+59*60_000, "b")...)      // 05:59, its client at 06:01
		spans = append(spans, trace(base+hour+5*60_000, "c")...)  // 06:05
		spans = append(spans, trace(base-hour+30*60_000, "d")...) // 04:30
		accept(t, s, spans...)
		children := func(endTs, lookback int64) []string {
			t.Helper()
			var out []string
			for _, l := range deps(t, s, endTs, lookback) {
				out = append(out, l.Child)
			}
			return out
		}
		for _, state := range []string{"queued", "drained"} {
			if state == "drained" {
				if _, err := s.FoldDependencies(ctxT(t)); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range []struct {
				name            string
				endTs, lookback int64
				want            []string
			}{
				{"05:00-06:00", base + hour, hour, []string{"a", "b"}},
				{"06:00-07:00", base + 2*hour, hour, []string{"c"}},
				{"04:00-05:00", base, hour, []string{"d"}},
				{"04:00-07:00", base + 2*hour, 3 * hour, []string{"a", "b", "c", "d"}},
				{"the whole day", genDay + 24*hour, 24 * hour, []string{"a", "b", "c", "d"}},
				{"05:30-05:40 (rounded out to 05:00-06:00)", base + 40*60_000, 10 * 60_000, []string{"a", "b"}},
			} {
				got := children(c.endTs, c.lookback)
				if len(got) == 0 {
					got = nil
				}
				sort.Strings(got)
				if !reflect.DeepEqual(got, c.want) {
					t.Errorf("%s, %s: children %v, want %v", state, c.name, got, c.want)
				}
			}
		}
		if n := scalarInt(t, h, "SELECT SUM(call_count) FROM zipkin_dependencies"); n != 4 {
			t.Errorf("zipkin_dependencies counts %d calls, want 4 (one day row per link)", n)
		}
		if n := scalarInt(t, h, "SELECT SUM(call_count) FROM zipkin_dependency_hours"); n != 4 {
			t.Errorf("zipkin_dependency_hours counts %d calls, want 4", n)
		}
	})
}
