package storagetest

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// runDependencyCheck runs an ITDependencies check as a subtest per
// dependency mode of h (and per drained mode), each on emptied storage.
func runDependencyCheck(t *testing.T, h *Harness, run func(t *testing.T, h *Harness, s Store, write func(...model.Span))) {
	modes := h.Dependencies
	if modes == nil {
		modes = []DependencyMode{{Name: "onDemand"}}
	}
	for _, m := range modes {
		drains := []bool{false}
		if m.Drain != nil {
			drains = append(drains, true)
		}
		for _, drain := range drains {
			name := m.Name
			if drain {
				name = cmp.Or(m.DrainedName, m.Name+"Drained")
			}
			t.Run(name, func(t *testing.T) {
				h := *h
				h.mode = &m
				h.Reset(t)
				var s Store
				if m.Open != nil {
					s = m.Open(t)
				} else {
					s = h.open(t, Options{})
				}
				written := false
				write := func(spans ...model.Span) {
					t.Helper()
					if drain && written {
						m.Drain(t, s)
					}
					written = true
					if m.Write != nil {
						m.Write(t, s, spans)
					} else {
						Accept(t, s, spans...)
					}
				}
				if drain {
					run(t, &h, drainingStore{Store: s, t: t, drain: m.Drain}, write)
				} else {
					run(t, &h, s, write)
				}
			})
		}
	}
}

// drainingStore is a drained mode's store: GetDependencies answers before
// and after draining the background work, and the two must agree.
type drainingStore struct {
	Store
	t     *testing.T
	drain func(t *testing.T, s Store)
}

func (d drainingStore) GetDependencies(ctx context.Context, endTs, lookback int64) ([]model.DependencyLink, error) {
	d.t.Helper()
	before, err := d.Store.GetDependencies(ctx, endTs, lookback)
	if err != nil {
		return nil, err
	}
	d.drain(d.t, d.Store)
	after, err := d.Store.GetDependencies(ctx, endTs, lookback)
	if err == nil && LinksString(before) != LinksString(after) {
		d.t.Errorf("GetDependencies(TODAY%+dms, %d) changed when the background work was drained: [%s] before, [%s] after",
			endTs-Today, lookback, LinksString(before), LinksString(after))
	}
	return after, err
}

// depItem is an ITDependencies check: run writes spans with write (as the
// dependency mode does) and reads the links back.
func depItem(name string, run func(t *testing.T, h *Harness, s Store, write func(...model.Span))) check {
	return check{name: name, deps: run}
}

// stdLinks are the links of a StdTrace.
func stdLinks() []model.DependencyLink {
	return []model.DependencyLink{Link("frontend", "backend", 1, 0), Link("backend", "db", 1, 1)}
}

// The checks of ITDependencies and ITDependenciesHeavy; each but
// endTsAndLookbackMustBePositive runs once per DependencyMode.
var dependencyChecks = []check{
	depItem("getDependencies", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		tr := NewStdTrace()
		write(tr.Spans()...)
		AssertLinks(t, "GetDependencies", Deps(t, s, tr.EndTs(), Day), stdLinks()...)
	}),
	depItem("getDependencies_linksMixedTraceId", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		id := RandomTraceID()
		ts := Micros(Today) + 100_000
		client := span(id, 0, 1, model.KindClient, ts, 300_000, Frontend, Backend)
		server := span(model.TraceID{Low: id.Low}, 0, 1, model.KindServer, ts+10_000, 200_000, Backend, nil)
		server.Shared = true
		write(client, server)
		AssertLinks(t, "GetDependencies", Deps(t, s, Today+Day, Day), Link("frontend", "backend", 1, 0))
	}),
	depItem("replayOverwrites", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		tr := NewStdTrace()
		write(tr.Spans()...)
		write(tr.Spans()...)
		AssertLinks(t, "GetDependencies", Deps(t, s, tr.EndTs(), Day), stdLinks()...)
	}),
	depItem("empty", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		AssertLinks(t, "GetDependencies", Deps(t, s, Today+Day, Day))
	}),
	depItem("getDependenciesAllInstrumented", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		id := RandomTraceID()
		ts := Micros(Today) + 100_000
		root := span(id, 0, 1, model.KindServer, ts, 400_000, Frontend, nil)
		c1 := span(id, 1, 2, model.KindClient, ts+10_000, 300_000, Frontend, backendRemote)
		s1 := span(id, 1, 2, model.KindServer, ts+20_000, 280_000, Backend, frontendRemote)
		s1.Shared = true
		c2 := span(id, 2, 3, model.KindClient, ts+30_000, 200_000, Backend, DB)
		s2 := span(id, 2, 3, model.KindServer, ts+40_000, 100_000, DB, backendRemote)
		s2.Shared = true
		write(root, c1, s1, c2, s2)
		AssertLinks(t, "GetDependencies", Deps(t, s, Today+Day, Day), Link("frontend", "backend", 1, 0), Link("backend", "db", 1, 0))
	}),
	depItem("dependencies_loopback", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		id := RandomTraceID()
		ts := Micros(Today) + 100_000
		root := span(id, 0, 1, model.KindServer, ts, 400_000, Frontend, nil)
		c := span(id, 1, 2, model.KindClient, ts+10_000, 300_000, Frontend, frontendRemote)
		sv := span(id, 1, 2, model.KindServer, ts+20_000, 200_000, Frontend, frontendRemote)
		sv.Shared = true
		write(root, c, sv)
		AssertLinks(t, "GetDependencies", Deps(t, s, Today+Day, Day), Link("frontend", "frontend", 1, 0))
	}),
	depItem("dependencies_headlessTrace", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		tr := NewStdTrace()
		write(tr.Client, tr.Server, tr.DBCall)
		AssertLinks(t, "GetDependencies", Deps(t, s, tr.EndTs(), Day), stdLinks()...)
	}),
	depItem("looksBackIndefinitely", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		tr := NewStdTrace()
		write(tr.Spans()...)
		AssertLinks(t, "GetDependencies", Deps(t, s, tr.EndTs(), Day), stdLinks()...)
	}),
	depItem("endTsInsideTheTrace", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		tr := NewStdTrace()
		write(tr.Spans()...)
		AssertLinks(t, "GetDependencies", Deps(t, s, tr.Start/1000+100, 200), stdLinks()...)
	}),
	depItem("endTimeBeforeData", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		tr := NewStdTrace()
		write(tr.Spans()...)
		AssertLinks(t, "GetDependencies", Deps(t, s, Today-1, Day))
	}),
	depItem("lookbackAfterData", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		tr := NewStdTrace()
		write(tr.Spans()...)
		AssertLinks(t, "GetDependencies", Deps(t, s, Today+2*Day, Day))
	}),
	depItem("notInstrumentedClientAndServer", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		tr := NewStdTrace()
		tr.Root.RemoteEndpoint = Kafka
		write(tr.Spans()...)
		AssertLinks(t, "GetDependencies", Deps(t, s, tr.EndTs(), Day),
			Link("kafka", "frontend", 1, 0), Link("frontend", "backend", 1, 0), Link("backend", "db", 1, 1))
	}),
	{name: "endTsAndLookbackMustBePositive", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{})
		for _, c := range []struct {
			endTs, lookback int64
			msg             string
		}{{0, Day, "endTs <= 0"}, {-1, Day, "endTs <= 0"}, {Today, 0, "lookback <= 0"}, {Today, -1, "lookback <= 0"}} {
			_, err := s.GetDependencies(Ctx(t), c.endTs, c.lookback)
			if !model.IsQueryError(err) || err.Error() != c.msg {
				t.Errorf("GetDependencies(%d, %d) error = %v, want QueryError %q", c.endTs, c.lookback, err, c.msg)
			}
		}
	}},
	depItem("instrumentedClientAndServer", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		id := RandomTraceID()
		ts := Micros(Today) + 100_000
		c := span(id, 0, 1, model.KindClient, ts, 300_000, Frontend, backendRemote)
		sv := span(id, 0, 1, model.KindServer, ts+10_000, 200_000, Backend, frontendRemote)
		sv.Shared = true
		write(c, sv)
		AssertLinks(t, "GetDependencies", Deps(t, s, Today+Day, Day), Link("frontend", "backend", 1, 0))
	}),
	depItem("instrumentedProducerAndConsumer", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		id := RandomTraceID()
		ts := Micros(Today) + 100_000
		p := span(id, 0, 1, model.KindProducer, ts, 0, Frontend, Kafka)
		c := span(id, 1, 2, model.KindConsumer, ts+100_000, 0, Backend, Kafka)
		write(p, c)
		AssertLinks(t, "GetDependencies", Deps(t, s, Today+Day, Day), Link("frontend", "kafka", 1, 0), Link("kafka", "backend", 1, 0))
	}),
	depItem("missingIntermediateSpan", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		tr := NewStdTrace()
		// Frontend's call (sp 2, both sides) is missing: Backend's db
		// call still links, and the Link to Backend is backfilled.
		write(tr.Root, tr.DBCall)
		AssertLinks(t, "GetDependencies", Deps(t, s, tr.EndTs(), Day), Link("frontend", "backend", 1, 0), Link("backend", "db", 1, 1))
	}),
	depItem("canSearchForIntervalsBesidesToday", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		now, yesterday := NewStdTrace(), NewStdTrace()
		for _, sp := range []*model.Span{&yesterday.Root, &yesterday.Client, &yesterday.Server, &yesterday.DBCall} {
			sp.Timestamp -= Micros(Day)
		}
		write(append(yesterday.Spans(), now.Spans()...)...)
		AssertLinks(t, "GetDependencies(yesterday)", Deps(t, s, now.EndTs()-Day, 3_600_000), stdLinks()...)
		AssertLinks(t, "GetDependencies(today)", Deps(t, s, now.EndTs(), 400), stdLinks()...)
		AssertLinks(t, "GetDependencies(both days)", Deps(t, s, now.EndTs(), 2*Day),
			Link("frontend", "backend", 2, 0), Link("backend", "db", 2, 2))
	}),
	depItem("spanKindIsNotRequiredWhenEndpointsArePresent", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		id := RandomTraceID()
		ts := Micros(Today) + 100_000
		a := span(id, 0, 1, model.KindUnset, ts, 300_000, Frontend, Backend)
		b := span(id, 1, 2, model.KindUnset, ts+10_000, 200_000, Backend, DB)
		write(a, b)
		AssertLinks(t, "GetDependencies", Deps(t, s, Today+Day, Day), Link("frontend", "backend", 1, 0), Link("backend", "db", 1, 0))
	}),
	depItem("unnamedEndpointsAreSkipped", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		id := RandomTraceID()
		ts := Micros(Today) + 100_000
		unnamed := &model.Endpoint{IPv4: netip.MustParseAddr("172.17.0.4")}
		root := span(id, 0, 1, model.KindServer, ts, 350_000, unnamed, nil)
		c := span(id, 1, 2, model.KindClient, ts+50_000, 250_000, unnamed, nil)
		sv := span(id, 1, 2, model.KindServer, ts+100_000, 50_000, Backend, nil)
		sv.Shared = true
		write(root, c, sv)
		AssertLinks(t, "GetDependencies", Deps(t, s, Today+Day, Day))
	}),
	depItem("intermediateSpans", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		id := RandomTraceID()
		ts := Micros(Today) + 100_000
		root := span(id, 0, 1, model.KindServer, ts, 900_000, Frontend, nil)
		local1 := span(id, 1, 2, model.KindUnset, ts+10_000, 800_000, Frontend, nil)
		c := span(id, 2, 3, model.KindClient, ts+20_000, 700_000, Frontend, Backend)
		sv := span(id, 2, 3, model.KindServer, ts+30_000, 600_000, Backend, frontendRemote)
		sv.Shared = true
		local2 := span(id, 3, 4, model.KindUnset, ts+40_000, 500_000, Backend, nil)
		dbc := span(id, 4, 5, model.KindClient, ts+50_000, 400_000, Backend, DB)
		write(root, local1, c, sv, local2, dbc)
		AssertLinks(t, "GetDependencies", Deps(t, s, Today+Day, Day), Link("frontend", "backend", 1, 0), Link("backend", "db", 1, 0))
	}),
	depItem("duplicateAddress", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		// Finagle labels both sides of the socket alike: the server's
		// client address (ca) names the server itself.
		id := RandomTraceID()
		ts := Micros(Today) + 100_000
		root := span(id, 0, 1, model.KindServer, ts, 400_000, Frontend, nil)
		c := span(id, 1, 2, model.KindClient, ts+10_000, 300_000, Frontend, Backend)
		sv := span(id, 1, 2, model.KindServer, ts+20_000, 200_000, Backend, backendRemote)
		sv.Shared = true
		write(root, c, sv)
		AssertLinks(t, "GetDependencies", Deps(t, s, Today+Day, Day), Link("frontend", "backend", 1, 0))
	}),
	depItem("oneway", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		id := RandomTraceID()
		ts := Micros(Today) + 100_000
		c := span(id, 0, 1, model.KindClient, ts, 0, Frontend, Backend)
		sv := span(id, 0, 1, model.KindServer, ts+10_000, 0, Backend, frontendRemote)
		sv.Shared = true
		write(c, sv)
		AssertLinks(t, "GetDependencies", Deps(t, s, Today+Day, Day), Link("frontend", "backend", 1, 0))
	}),
	depItem("oneway_noClient", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		id := RandomTraceID()
		ts := Micros(Today) + 100_000
		sv := span(id, 0, 1, model.KindServer, ts, 0, Backend, Kafka)
		write(sv)
		AssertLinks(t, "GetDependencies", Deps(t, s, Today+Day, Day), Link("kafka", "backend", 1, 0))
	}),
	depItem("annotationNamedErrorIsntError", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		tr := NewStdTrace()
		tr.DBCall.Tags = nil
		tr.DBCall.Annotations = []model.Annotation{{Timestamp: tr.DBCall.Timestamp + 10, Value: "error"}}
		write(tr.Spans()...)
		AssertLinks(t, "GetDependencies", Deps(t, s, tr.EndTs(), Day), Link("frontend", "backend", 1, 0), Link("backend", "db", 1, 0))
	}),

	// The store's own: which traces a window holds, by the mode's Windows.
	depItem("dependencies_windows", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		const hour = int64(3_600_000)
		base := Today + 5*hour // 05:00 UTC
		trace := func(startMs int64, child string) []model.Span {
			id := RandomTraceID()
			ts := startMs * 1000
			// The client call starts 2 minutes after the root.
			return []model.Span{
				{TraceID: id, ID: 1, Kind: model.KindServer, Name: "get", Timestamp: ts, Duration: 10, LocalEndpoint: EpName("front")},
				{TraceID: id, ParentID: 1, ID: 2, Kind: model.KindClient, Name: "call", Timestamp: ts + 120_000_000, Duration: 10,
					LocalEndpoint: EpName("front"), RemoteEndpoint: EpName(child)},
			}
		}
		var spans []model.Span
		spans = append(spans, trace(base+10*60_000, "a")...)      // 05:10
		spans = append(spans, trace(base+59*60_000, "b")...)      // 05:59, its client at 06:01
		spans = append(spans, trace(base+hour+5*60_000, "c")...)  // 06:05
		spans = append(spans, trace(base-hour+30*60_000, "d")...) // 04:30
		write(spans...)
		for _, c := range []struct {
			name            string
			endTs, lookback int64
			want            [3]string // children by Windows: SpanWindows, HourWindows, DayWindows
		}{
			{"05:00-06:00", base + hour, hour, [3]string{"ab", "ab", "abcd"}},
			{"06:00-07:00", base + 2*hour, hour, [3]string{"bc", "c", "abcd"}},
			{"04:00-05:00", base, hour, [3]string{"d", "d", "abcd"}},
			{"04:00-07:00", base + 2*hour, 3 * hour, [3]string{"abcd", "abcd", "abcd"}},
			{"the whole day", Today + Day, Day, [3]string{"abcd", "abcd", "abcd"}},
			{"05:30-05:40", base + 40*60_000, 10 * 60_000, [3]string{"", "ab", "abcd"}},
		} {
			var want []model.DependencyLink
			for _, child := range c.want[h.mode.Windows] {
				want = append(want, Link("front", string(child), 1, 0))
			}
			AssertLinks(t, fmt.Sprintf("GetDependencies(%s) with %s", c.name, h.mode.Windows), Deps(t, s, c.endTs, c.lookback), want...)
		}
	}),

	// ITDependenciesHeavy
	depItem("manyLinks", func(t *testing.T, h *Harness, s Store, write func(...model.Span)) {
		n := cmp.Or(h.ManyLinks, 256)
		var spans []model.Span
		var want []model.DependencyLink
		for i := 0; i < n; i++ {
			id := RandomTraceID()
			ts := Micros(Today) + int64(i+1)*1000
			caller := fmt.Sprintf("caller%03d", i)
			callee := fmt.Sprintf("callee%03d", i)
			spans = append(spans,
				span(id, 0, 1, model.KindServer, ts, 500, Frontend, EpName(caller)),
				span(id, 1, 2, model.KindClient, ts+10, 100, Frontend, EpName(callee)))
			want = append(want, Link(caller, "frontend", 1, 0), Link("frontend", callee, 1, 0))
		}
		write(spans...)
		got := Deps(t, s, Today+Day, Day)
		if len(got) != 2*n {
			t.Errorf("GetDependencies = %d links, want %d", len(got), 2*n)
		}
		AssertLinks(t, "GetDependencies", got, want...)
	}),
}
