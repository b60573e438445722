package mysqlstore_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// genDay is the UTC day the generated traces fall on (its last traces
// cross midnight into the next day).
var genDay = time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC).UnixMilli()

// depGen builds a day of traces exercising every linker rule: shared
// client/server spans, split RPCs (server span with its own ID), leaf
// clients to uninstrumented databases, local spans between remote ones,
// producer/consumer pairs through a broker, kind-less spans with both
// names, error tags (and timeline annotations named "error", which are no
// error), 64- and 128-bit trace IDs, lost spans (missing parents and
// headless traces) and traces crossing midnight.
type depGen struct {
	r     *rand.Rand
	spans []model.Span
	tid   model.TraceID
	next  uint64
}

var genServices = []string{"frontend", "backend", "auth", "cart", "search", "pay", "ship", "notify"}

func (g *depGen) id() model.ID { g.next++; return model.ID(g.next*0x9E3779B97F4A7C15 | 1) }

func (g *depGen) svc() string { return genServices[g.r.IntN(len(genServices))] }

func (g *depGen) span(parent, id model.ID, kind model.Kind, ts int64, local, remote string) *model.Span {
	sp := model.Span{TraceID: g.tid, ParentID: parent, ID: id, Kind: kind, Name: "op", Timestamp: ts, Duration: 1000}
	if local != "" {
		sp.LocalEndpoint = &model.Endpoint{ServiceName: local}
	}
	if remote != "" {
		sp.RemoteEndpoint = &model.Endpoint{ServiceName: remote}
	}
	switch x := g.r.IntN(100); {
	case x < 12:
		sp.Tags = map[string]string{"error": "boom"}
	case x < 16:
		sp.Annotations = []model.Annotation{{Timestamp: ts + 1, Value: "error"}}
	}
	g.spans = append(g.spans, sp)
	return &g.spans[len(g.spans)-1]
}

// expand adds the children of a span of service local (ID id) at ts.
func (g *depGen) expand(id model.ID, local string, ts int64, depth int) {
	if depth > 3 {
		return
	}
	for range g.r.IntN(4) {
		ts += int64(g.r.IntN(5000) + 1)
		switch g.r.IntN(7) {
		case 0, 1: // RPC, client and server sharing an ID
			callee := g.svc()
			c := g.id()
			g.span(id, c, model.KindClient, ts, local, callee)
			srv := g.span(id, c, model.KindServer, ts+10, callee, local)
			srv.Shared = true
			g.expand(c, callee, ts+10, depth+1)
		case 2: // split RPC: the server span is the client's child
			callee := g.svc()
			c, s := g.id(), g.id()
			g.span(id, c, model.KindClient, ts, local, "")
			g.span(c, s, model.KindServer, ts+10, callee, "")
			g.expand(s, callee, ts+10, depth+1)
		case 3: // leaf client to an uninstrumented server
			g.span(id, g.id(), model.KindClient, ts, local, []string{"mysql", "redis"}[g.r.IntN(2)])
		case 4: // local span between remote ones
			l := g.id()
			g.span(id, l, model.KindUnset, ts, local, "")
			g.expand(l, local, ts+5, depth+1)
		case 5: // messaging through a broker
			broker := []string{"kafka", "rabbitmq"}[g.r.IntN(2)]
			consumer := g.svc()
			p, c := g.id(), g.id()
			g.span(id, p, model.KindProducer, ts, local, broker)
			g.span(p, c, model.KindConsumer, ts+100, consumer, broker)
			g.expand(c, consumer, ts+100, depth+1)
		case 6: // kind-less span with both names: a client
			g.span(id, g.id(), model.KindUnset, ts, local, g.svc())
		}
	}
}

// genTraces returns the spans of n traces on genDay (the last few crossing
// into the next day), with about 8 % of the spans lost.
func genTraces(seed uint64, n int) []model.Span {
	g := &depGen{r: rand.New(rand.NewPCG(seed, seed^0xD1CE))}
	for i := range n {
		g.tid = model.TraceID{Low: g.r.Uint64() | 1}
		if i%3 == 0 {
			g.tid.High = g.r.Uint64() | 1
		}
		start := model.MillisToMicros(genDay) + int64(i)*model.MillisToMicros(86_400_000-60_000)/int64(n) + 1
		if i >= n-3 {
			start = model.MillisToMicros(genDay+86_400_000) - 2000 // crosses midnight
		}
		first := len(g.spans)
		root := g.id()
		remote := ""
		if i%5 == 0 {
			remote = "gateway" // an uninstrumented caller
		}
		g.span(0, root, model.KindServer, start, g.svc(), remote)
		g.expand(root, g.spans[first].LocalEndpoint.ServiceName, start, 0)
		if i%4 == 0 { // a 64-bit half of a 128-bit trace
			for j := first + 1; j < len(g.spans); j += 3 {
				g.spans[j].TraceID.High = 0
			}
		}
	}
	kept := g.spans[:0]
	for _, sp := range g.spans {
		if g.r.IntN(100) >= 8 {
			kept = append(kept, sp)
		}
	}
	return kept
}

// linkString is the sorted form of links, for comparison.
func linkString(ls []model.DependencyLink) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = fmt.Sprintf("%s->%s calls=%d errors=%d", l.Parent, l.Child, l.CallCount, l.ErrorCount)
	}
	sort.Strings(s)
	return strings.Join(s, "\n")
}

// TestAggregatedDependenciesEqualOnDemand is the aggregator's bar: on a
// generated day of traces, the links the aggregator records — stored in
// order, and stored shuffled with a fifth of the spans sent twice (so that
// children arrive before their parents, traces are recomputed many times
// and the same span is stored twice), sequentially and, on MariaDB, from
// four writers at once — equal on-demand linking of the same spans: every
// link, call count and error count, for the day and for two days, read
// through GetDependencies (queued and drained) and from zipkin_dependencies
// as Zipkin's own reader sees it.
func TestAggregatedDependenciesEqualOnDemand(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		n := 300
		if srv.name == "embedded" {
			n = 50 // go-mysql-server runs the joins slowly
		}
		spans := genTraces(28, n)
		t.Logf("%d spans in %d traces", len(spans), n)

		ref := newHarness(t, srv)
		onDemand := ref.store(t, mysqlstore.Options{DisableDependencyAggregation: true})
		accept(t, onDemand, spans...)
		dayEnd := genDay + 86_400_000 - 1
		windows := []struct {
			name            string
			endTs, lookback int64
			zipkinDays      []string
		}{
			{"day", dayEnd, 86_400_000 - 1, []string{"2026-11-20"}},
			{"two days", dayEnd + 86_400_000, 2*86_400_000 - 1, []string{"2026-11-20", "2026-11-21"}},
		}
		want := map[string]string{}
		for _, w := range windows {
			links := deps(t, onDemand, w.endTs, w.lookback)
			if len(links) < 20 {
				t.Fatalf("on-demand linking of the %s found %d links; the generator should make more", w.name, len(links))
			}
			want[w.name] = linkString(links)
		}

		check := func(t *testing.T, h *harness, s *mysqlstore.Store, selfFolding bool) {
			t.Helper()
			for _, w := range windows {
				if got := linkString(deps(t, s, w.endTs, w.lookback)); got != want[w.name] {
					t.Errorf("aggregated links of the %s (queued) differ from on-demand linking (%s)", w.name, linkDiff(got, want[w.name]))
				}
			}
			moved, err := s.FoldDependencies(ctxT(t))
			if err != nil {
				t.Fatalf("FoldDependencies: %v", err)
			}
			if moved == 0 && !selfFolding {
				t.Errorf("FoldDependencies drained 0 queued writes")
			}
			for _, w := range windows {
				if got := linkString(deps(t, s, w.endTs, w.lookback)); got != want[w.name] {
					t.Errorf("aggregated links of the %s (drained) differ from on-demand linking (%s)", w.name, linkDiff(got, want[w.name]))
				}
				// Zipkin's reader: the rows of the days, summed.
				var table []model.DependencyLink
				for _, d := range w.zipkinDays {
					rows, err := h.db.QueryContext(ctxT(t), "SELECT parent, child, call_count, error_count FROM zipkin_dependencies WHERE day = ?", d)
					if err != nil {
						t.Fatal(err)
					}
					for rows.Next() {
						var l model.DependencyLink
						if err := rows.Scan(&l.Parent, &l.Child, &l.CallCount, &l.ErrorCount); err != nil {
							t.Fatal(err)
						}
						table = append(table, l)
					}
					rows.Close()
				}
				if got := linkString(sumLinks(table)); got != want[w.name] {
					t.Errorf("zipkin_dependencies rows of the %s differ from on-demand linking (%s)", w.name, linkDiff(got, want[w.name]))
				}
			}
		}

		t.Run("inOrder", func(t *testing.T) {
			h := newHarness(t, srv)
			s := h.store(t, mysqlstore.Options{DependencyFoldInterval: -1})
			accept(t, s, spans...)
			check(t, h, s, false)
		})
		t.Run("backfilled", func(t *testing.T) {
			// Spans stored with the aggregator off (or by a bulk loader), then
			// counted by BackfillDependencies.
			h := newHarness(t, srv)
			accept(t, h.store(t, mysqlstore.Options{DisableDependencyAggregation: true}), spans...)
			s := h.store(t, mysqlstore.Options{DependencyFoldInterval: -1})
			n, err := s.BackfillDependencies(ctxT(t))
			if err != nil {
				t.Fatalf("BackfillDependencies: %v", err)
			}
			if want := len(byLow(spans)); n != want {
				t.Errorf("BackfillDependencies went through %d traces, want %d", n, want)
			}
			check(t, h, s, true)
		})
		shuffled := shuffleResend(spans, 7)
		t.Run("shuffledResent", func(t *testing.T) {
			h := newHarness(t, srv)
			s := h.store(t, mysqlstore.Options{}) // folds by itself every second, too
			r := rand.New(rand.NewPCG(3, 4))
			for start := 0; start < len(shuffled); {
				n := min(1+r.IntN(40), len(shuffled)-start)
				accept(t, s, shuffled[start:start+n]...)
				start += n
			}
			check(t, h, s, true)
			// Sending every span again changes nothing.
			accept(t, s, spans...)
			check(t, h, s, true)
		})
		if srv.name != "mariadb" {
			return // the embedded server loses concurrent transactions
		}
		t.Run("concurrentWriters", func(t *testing.T) {
			h := newHarness(t, srv)
			s := h.store(t, mysqlstore.Options{})
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for start := w * 20; start < len(shuffled); start += 80 {
						if err := s.Accept(ctxT(t), cloneAll(shuffled[start:min(start+20, len(shuffled))])); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("Accept: %v", err)
			}
			st := s.Stats()
			t.Logf("deadlocks %d, lock wait timeouts %d (each retried)", st.Deadlocks, st.LockWaitTimeouts)
			check(t, h, s, true)
		})
	})
}

// shuffleResend returns spans shuffled with a fifth of them sent twice.
func shuffleResend(spans []model.Span, seed uint64) []model.Span {
	r := rand.New(rand.NewPCG(seed, seed))
	out := append([]model.Span(nil), spans...)
	for i := range spans {
		if i%5 == 0 {
			out = append(out, spans[i])
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func cloneAll(spans []model.Span) []model.Span {
	out := make([]model.Span, len(spans))
	for i := range spans {
		out[i] = clone(spans[i])
	}
	return out
}

// TestAggregationOffSwitch: with DisableDependencyAggregation the store
// writes nothing to the aggregator's tables, and a schema without them
// runs with aggregation off.
func TestAggregationOffSwitch(t *testing.T) {
	srv := server{"embedded", mysqltest.EmbeddedDSN(t)}
	h := newHarness(t, srv)
	s := h.store(t, mysqlstore.Options{DisableDependencyAggregation: true})
	if s.DependencyAggregation() {
		t.Fatal("DependencyAggregation() = true with DisableDependencyAggregation")
	}
	accept(t, s, genTraces(1, 5)...)
	for _, table := range []string{"zipkin_dependency_traces", "zipkin_dependency_queue", "zipkin_dependency_hours", "zipkin_dependencies"} {
		if n := count(t, h.db, table); n != 0 {
			t.Errorf("%s has %d rows with aggregation disabled, want 0", table, n)
		}
	}
	if _, err := h.db.ExecContext(ctxT(t), "DROP TABLE zipkin_dependency_traces"); err != nil {
		t.Fatal(err)
	}
	if h.store(t, mysqlstore.Options{}).DependencyAggregation() {
		t.Error("DependencyAggregation() = true without zipkin_dependency_traces")
	}
}

// sumLinks sums links with the same parent and child.
func sumLinks(in []model.DependencyLink) []model.DependencyLink {
	idx := map[[2]string]int{}
	var out []model.DependencyLink
	for _, l := range in {
		k := [2]string{l.Parent, l.Child}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, model.DependencyLink{Parent: l.Parent, Child: l.Child})
		}
		out[i].CallCount += l.CallCount
		out[i].ErrorCount += l.ErrorCount
	}
	return out
}

// linkDiff names the lines of got and want (linkString forms) that differ.
func linkDiff(got, want string) string {
	g, w := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(got, "\n") {
		g[l] = true
	}
	for _, l := range strings.Split(want, "\n") {
		w[l] = true
	}
	var out []string
	for l := range g {
		if !w[l] {
			out = append(out, "+"+l)
		}
	}
	for l := range w {
		if !g[l] {
			out = append(out, "-"+l)
		}
	}
	sort.Strings(out)
	return "got +, want -: " + strings.Join(out, "; ")
}

// Retention deletes the aggregator's records of traces more than a day
// older than its cutoff and the links counted on those days (hours and
// days), and keeps the records and links of younger days.
func TestRetentionPurgesDependencyTraces(t *testing.T) {
	srv := server{"embedded", mysqltest.EmbeddedDSN(t)}
	h := newHarness(t, srv)
	s := h.store(t, mysqlstore.Options{DependencyFoldInterval: -1})
	old := genTraces(5, 6) // on genDay
	young := genTraces(6, 4)
	shift := model.MillisToMicros(10 * 86_400_000)
	for i := range young {
		young[i].Timestamp += shift // ten days later
	}
	accept(t, s, append(old, young...)...)
	if _, err := s.FoldDependencies(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	youngDay := genDay + 10*86_400_000
	youngLinks := deps(t, s, youngDay+86_400_000-1, 86_400_000-1)
	youngHour := deps(t, s, youngDay+3_600_000-1, 3_600_000-1)
	if len(deps(t, s, genDay+86_400_000-1, 86_400_000-1)) == 0 || len(youngLinks) == 0 {
		t.Fatal("setup: no links on the old or the young day")
	}
	r, err := s.NewRetention(mysqlstore.RetentionOptions{MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cutoff := time.UnixMilli(genDay + 5*86_400_000) // four days after the old traces' day
	if _, err := r.DeleteBefore(ctxT(t), cutoff); err != nil {
		t.Fatalf("DeleteBefore: %v", err)
	}
	if n := scalarInt(t, h, "SELECT COUNT(*) FROM zipkin_dependency_traces WHERE day < '2026-11-24'"); n != 0 {
		t.Errorf("%d records of traces older than the cutoff remain", n)
	}
	if n := scalarInt(t, h, "SELECT COUNT(*) FROM zipkin_dependency_traces"); n != 4 {
		t.Errorf("%d records remain, want the 4 young traces'", n)
	}
	for _, q := range []string{
		"SELECT COUNT(*) FROM zipkin_dependencies WHERE day < '2026-11-24'",
		fmt.Sprintf("SELECT COUNT(*) FROM zipkin_dependency_hours WHERE hour < %d", (genDay+4*86_400_000)/3_600_000),
	} {
		if n := scalarInt(t, h, q); n != 0 {
			t.Errorf("%s: %d rows of the purged days remain", q, n)
		}
	}
	if got := deps(t, s, genDay+86_400_000-1, 86_400_000-1); len(got) != 0 {
		t.Errorf("links of the old day after retention: %v, want none", got)
	}
	if got := linkString(deps(t, s, youngDay+86_400_000-1, 86_400_000-1)); got != linkString(youngLinks) {
		t.Errorf("links of the young day after retention (%s)", linkDiff(got, linkString(youngLinks)))
	}
	if got := linkString(deps(t, s, youngDay+3_600_000-1, 3_600_000-1)); got != linkString(youngHour) {
		t.Errorf("links of the young day's first hour after retention (%s)", linkDiff(got, linkString(youngHour)))
	}
}

func scalarInt(t *testing.T, h *harness, q string) int64 {
	t.Helper()
	var n int64
	if err := h.db.QueryRowContext(ctxT(t), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// byLow counts the traces of spans by the low 64 bits of their IDs.
func byLow(spans []model.Span) map[uint64]bool {
	m := map[uint64]bool{}
	for _, sp := range spans {
		m[sp.TraceID.Low] = true
	}
	return m
}

// TestDependenciesAtScale (opt-in: DEPS_SCALE_SPANS=n, MariaDB) stores
// about n generated spans on one day with the aggregator off, times the
// 24-hour GetDependencies linked on demand, backfills the aggregator
// (timed), and times the same call on the aggregated rows; both answers
// must be equal. docs/design/zipkin.md quotes the figures.
func TestDependenciesAtScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("DEPS_SCALE_SPANS"))
	if n <= 0 {
		t.Skip("DEPS_SCALE_SPANS unset: the at-scale dependency timing is opt-in")
	}
	mysqltest.RequireMariaDB(t, "the at-scale timing measures MariaDB")
	h := newHarness(t, server{"mariadb", mysqltest.DSN(t)})
	off := h.store(t, mysqlstore.Options{DisableDependencyAggregation: true})
	spans := genTraces(99, n/10)
	t0 := time.Now()
	for start := 0; start < len(spans); start += 500 {
		if err := off.Accept(ctxT(t), cloneAll(spans[start:min(start+500, len(spans))])); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d spans in %d traces stored in %s", len(spans), n/10, time.Since(t0).Round(time.Millisecond))
	dayEnd := genDay + 86_400_000 - 1
	timeIt := func(s *mysqlstore.Store) (string, time.Duration) {
		var best time.Duration
		var links []model.DependencyLink
		for i := range 5 {
			t0 := time.Now()
			links = deps(t, s, dayEnd, 86_400_000-1)
			if d := time.Since(t0); i == 0 || d < best {
				best = d
			}
		}
		return linkString(links), best
	}
	want, onDemand := timeIt(off)
	on := h.store(t, mysqlstore.Options{DependencyFoldInterval: -1})
	t0 = time.Now()
	traces, err := on.BackfillDependencies(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	backfill := time.Since(t0)
	got, aggregated := timeIt(on)
	if got != want {
		t.Errorf("aggregated links differ from on-demand linking (%s)", linkDiff(got, want))
	}
	t.Logf("24-hour dependencies: on demand %s, aggregated %s (best of 5); backfill of %d traces %s (%.0f traces/s)",
		onDemand.Round(time.Microsecond), aggregated.Round(time.Microsecond), traces, backfill.Round(time.Millisecond),
		float64(traces)/backfill.Seconds())
}
