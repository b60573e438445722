package pgstore_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	"github.com/sqlpool/sqlpool/app/zipkin/pgstore"
)

// TestDependencyAggregationGenerated writes random traces split over
// batches — fragments of one span in different batches, Zipkin shared
// spans (a client and a server half with one span ID), late earlier spans
// that move a trace to an earlier hour, replays of whole batches and
// batches mixing stored and new fragments — drains part of the queue at
// random points, and after every step compares GetDependencies, for the
// whole span of hours and for each hour, with linking every trace stored
// so far at once (mysqlstore.LinkTraces, each trace in the hour of its
// earliest span). PGSTORE_GEN_SEED picks the workload (default: 1, 2
// and 3).
func TestDependencyAggregationGenerated(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if v := os.Getenv("PGSTORE_GEN_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("PGSTORE_GEN_SEED=%q: %v", v, err)
		}
		seeds = []uint64{n}
	}
	forEachServer(t, func(t *testing.T, srv server) {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				h := newHarness(t, srv)
				s := h.store(t, pgstore.Options{DependencyDrainInterval: -1})
				pgstore.SetDrainRows(s, 2)
				runGenerated(t, s, rand.New(rand.NewPCG(seed, 7)))
			})
		}
	})
}

func runGenerated(t *testing.T, s *pgstore.Store, rng *rand.Rand) {
	base := micros(today) - 6*3_600_000_000 // six hours before today's midnight
	var pending []model.Span                // fragments not sent yet, in sending order
	for range 24 {
		pending = append(pending, genTrace(rng, base)...)
	}
	// Sending order: shuffled, so that a trace's fragments land in
	// different batches, some after their trace was drained.
	rng.Shuffle(len(pending), func(i, j int) { pending[i], pending[j] = pending[j], pending[i] })
	stored := map[string]model.Span{} // what the store holds, by fragment
	var sent [][]model.Span
	step := 0
	check := func(what string) {
		t.Helper()
		step++
		checkLinks(t, s, stored, fmt.Sprintf("step %d (%s)", step, what))
	}
	for len(pending) > 0 {
		var batch []model.Span
		switch r := rng.IntN(10); {
		case r == 0 && len(sent) > 0: // a replay of a whole batch (COPY: 23505, staged)
			batch = sent[rng.IntN(len(sent))]
		default:
			n := min(1+rng.IntN(8), len(pending))
			batch = append(batch, pending[:n]...)
			pending = pending[n:]
			if r == 1 && len(sent) > 0 { // new fragments with stored ones
				old := sent[rng.IntN(len(sent))]
				batch = append(batch, old[:1+rng.IntN(len(old))]...)
			}
		}
		accept(t, s, batch...)
		sent = append(sent, batch)
		for _, sp := range batch {
			stored[fragKey(sp)] = sp
		}
		check("write")
		if rng.IntN(3) == 0 { // part of the queue: 1 to 3 transactions of at most 2 writes
			for range 1 + rng.IntN(3) {
				if _, err := pgstore.DrainOnce(ctxT(t), s); err != nil {
					t.Fatal(err)
				}
			}
			check("drain")
		}
	}
	if _, err := s.DrainDependencies(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	check("drained")
	// Replays of everything after the drain change nothing.
	for _, b := range sent[:min(len(sent), 5)] {
		accept(t, s, b...)
	}
	check("replays")
	if _, err := s.DrainDependencies(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	check("replays drained")
}

// genTrace returns the fragments of a random trace: a root server span,
// then client spans with, for most of them, the callee's server span —
// shared (Zipkin's shared span: the client's span ID) or a child span of
// its own — some with an error tag, some in two fragments (the second a
// late annotation, or the span's timestamp arriving later), with
// timestamps spread over a few hours.
func genTrace(rng *rand.Rand, base int64) []model.Span {
	services := []string{"web", "api", "auth", "db", "cache"}
	ep := func(svc string) *model.Endpoint { return &model.Endpoint{ServiceName: svc} }
	id := randomTraceID()
	start := base + rng.Int64N(4*3_600_000_000)
	nextID := uint64(rng.Uint64()>>8) | 1
	newID := func() model.ID { nextID++; return model.ID(nextID) }
	root := model.Span{TraceID: id, ID: newID(), Name: "root", Kind: model.KindServer, Timestamp: start,
		Duration: 100, LocalEndpoint: ep(services[rng.IntN(len(services))])}
	out := []model.Span{root}
	parents := []model.Span{root}
	for i := range 1 + rng.IntN(5) {
		p := parents[rng.IntN(len(parents))]
		callee := services[rng.IntN(len(services))]
		// Mostly after the root; now and then an hour or two before it (a
		// late earlier span: the trace moves to that hour).
		ts := start + int64(i+1)*10
		if rng.IntN(6) == 0 {
			ts = start - rng.Int64N(2*3_600_000_000)
		}
		c := model.Span{TraceID: id, ID: newID(), ParentID: p.ID, Name: "call", Kind: model.KindClient, Timestamp: ts,
			Duration: 10, LocalEndpoint: ep(p.LocalEndpoint.ServiceName), RemoteEndpoint: ep(callee)}
		if rng.IntN(4) == 0 {
			c.Tags = map[string]string{"error": "boom"}
		}
		out = append(out, c)
		switch rng.IntN(3) {
		case 0: // shared: the server half under the client's span ID
			sv := model.Span{TraceID: id, ID: c.ID, ParentID: p.ID, Name: "call", Kind: model.KindServer, Shared: true,
				Timestamp: ts + 1, Duration: 8, LocalEndpoint: ep(callee)}
			out = append(out, sv)
			parents = append(parents, sv)
		case 1: // a child span of its own
			sv := model.Span{TraceID: id, ID: newID(), ParentID: c.ID, Name: "call", Kind: model.KindServer,
				Timestamp: ts + 1, Duration: 8, LocalEndpoint: ep(callee)}
			out = append(out, sv)
			parents = append(parents, sv)
		}
	}
	// Some spans in two fragments: a late annotation, or the span without
	// its timestamp and kind first and the rest later.
	for i, n := 0, len(out); i < n; i++ {
		if rng.IntN(5) != 0 {
			continue
		}
		sp := out[i]
		late := model.Span{TraceID: sp.TraceID, ID: sp.ID, LocalEndpoint: sp.LocalEndpoint, Shared: sp.Shared,
			Annotations: []model.Annotation{{Timestamp: sp.Timestamp + 1, Value: "late"}}}
		if rng.IntN(2) == 0 {
			late.Kind, late.Timestamp, late.Duration = sp.Kind, sp.Timestamp, sp.Duration
			out[i].Timestamp, out[i].Duration, out[i].Kind = 0, 0, ""
		}
		out = append(out, late)
	}
	for i := range out {
		out[i].Normalize()
	}
	return out
}

// fragKey identifies a fragment as the store does: the same span sent
// again is one fragment.
func fragKey(sp model.Span) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v|%d|%d|%s|%d|%d|%v|%v|%v", sp.TraceID, sp.ID, sp.ParentID, sp.Kind, sp.Timestamp, sp.Duration,
		sp.Shared, sp.LocalEndpoint, sp.RemoteEndpoint)
	for _, a := range sp.Annotations {
		fmt.Fprintf(&b, "|%d:%s", a.Timestamp, a.Value)
	}
	keys := make([]string, 0, len(sp.Tags))
	for k := range sp.Tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "|%s=%s", k, sp.Tags[k])
	}
	return b.String()
}

// checkLinks compares GetDependencies, over every hour the traces span and
// for each of those hours, with linking the stored traces at once.
func checkLinks(t *testing.T, s *pgstore.Store, stored map[string]model.Span, when string) {
	t.Helper()
	traces := map[uint64][]model.Span{}
	for _, sp := range stored {
		traces[sp.TraceID.Low] = append(traces[sp.TraceID.Low], sp)
	}
	byHour := map[int64][][]model.Span{}
	for _, spans := range traces {
		if h, ok := mysqlstore.TraceHour(spans); ok {
			byHour[h] = append(byHour[h], spans)
		}
	}
	const hourMs = 3_600_000
	first, last := int64(1<<62), int64(-1<<62)
	for h := range byHour {
		first, last = min(first, h), max(last, h)
	}
	if len(byHour) == 0 {
		return
	}
	want := func(h0, h1 int64) []model.DependencyLink {
		var all [][]model.Span
		for h := h0; h <= h1; h++ {
			all = append(all, byHour[h]...)
		}
		return sortLinks(mysqlstore.LinkTraces(all))
	}
	windows := [][2]int64{{first, last}}
	for h := first; h <= last; h++ {
		windows = append(windows, [2]int64{h, h})
	}
	for _, w := range windows {
		endTs, lookback := (w[1]+1)*hourMs, (w[1]-w[0]+1)*hourMs
		got := sortLinks(deps(t, s, endTs, lookback))
		if exp := want(w[0], w[1]); !slices.Equal(got, exp) {
			t.Fatalf("%s: GetDependencies of hours %d..%d = %v, linking the stored traces at once gives %v", when, w[0], w[1], got, exp)
		}
	}
}

func sortLinks(ls []model.DependencyLink) []model.DependencyLink {
	out := slices.Clone(ls)
	slices.SortFunc(out, func(a, b model.DependencyLink) int {
		return cmp.Or(strings.Compare(a.Parent, b.Parent), strings.Compare(a.Child, b.Child))
	})
	if out == nil {
		out = []model.DependencyLink{}
	}
	return out
}

// TestDependencyAggregationConcurrent: writers and drains at once (a drain
// reads the stored fragments while writes of the same traces commit), then
// a last drain: the hour counts are those of linking every stored trace at
// once, as is the answer at every step of the way there.
func TestDependencyAggregationConcurrent(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		h := newHarness(t, srv)
		s := h.store(t, pgstore.Options{DependencyDrainInterval: -1})
		pgstore.SetDrainRows(s, 3)
		rng := rand.New(rand.NewPCG(11, 7))
		base := micros(today) - 6*3_600_000_000
		var spans []model.Span
		for range 60 {
			spans = append(spans, genTrace(rng, base)...)
		}
		rng.Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
		stored := map[string]model.Span{}
		for _, sp := range spans {
			stored[fragKey(sp)] = sp
		}
		const writers = 3
		errs := make(chan error, writers+1)
		done := make(chan struct{})
		go func() { // drains until the writers are done
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				if _, err := pgstore.DrainOnce(ctxT(t), s); err != nil {
					errs <- err
					return
				}
			}
		}()
		written := make(chan error, writers)
		for w := range writers {
			go func() {
				for i := w * 4; i < len(spans); i += writers * 4 {
					if err := s.Accept(ctxT(t), spans[i:min(i+4, len(spans))]); err != nil {
						written <- err
						return
					}
				}
				written <- nil
			}()
		}
		for range writers {
			if err := <-written; err != nil {
				t.Fatal(err)
			}
		}
		close(done)
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		checkLinks(t, s, stored, "written")
		if _, err := s.DrainDependencies(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		checkLinks(t, s, stored, "drained")
	})
}
