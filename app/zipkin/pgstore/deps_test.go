package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/pgstore"
)

// tableCount counts the rows of one of the store's tables.
func tableCount(t *testing.T, h *harness, table string) int {
	t.Helper()
	var n int
	if err := h.db.QueryRowContext(ctxT(t), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDependencyQueue follows writes through the dependency queue: the
// answer is the same before a drain (from the queued traces' span rows),
// after it (from zipkin_dependency_hours) and after a replay; a trace
// written in two batches is counted once, in the hour of its earliest
// span, even when that span comes last; a Store opened later (a restart)
// drains what an earlier one queued.
func TestDependencyQueue(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		h := newHarness(t, srv)
		s := h.store(t, pgstore.Options{DependencyDrainInterval: -1})
		a, b := newStdTrace(), newStdTrace()
		// b's root (its earliest span) comes after its other spans, an hour
		// earlier than they are.
		for _, sp := range []*model.Span{&b.Client, &b.Server, &b.DBCall} {
			sp.Timestamp += micros(3_600_000)
		}
		accept(t, s, a.spans()...)
		accept(t, s, b.Client, b.Server, b.DBCall)
		hourOf := func(us int64) int64 { return us / 1000 / 3_600_000 * 3_600_000 }
		rootHour, laterHour := hourOf(b.Root.Timestamp), hourOf(b.Client.Timestamp)
		check := func(when string, wantRootHour, wantLaterHour []model.DependencyLink) {
			t.Helper()
			assertLinks(t, when+": root hour", deps(t, s, rootHour+3_600_000, 3_600_000), wantRootHour...)
			assertLinks(t, when+": later hour", deps(t, s, laterHour+3_600_000, 3_600_000), wantLaterHour...)
		}
		std1 := []model.DependencyLink{link("backend", "db", 1, 1), link("frontend", "backend", 1, 0)}
		// b without its root: the client to backend and backend to db in the later hour.
		check("queued", std1, []model.DependencyLink{link("backend", "db", 1, 1), link("frontend", "backend", 1, 0)})
		if lag, err := s.DependencyLag(ctxT(t)); err != nil || lag < 0 {
			t.Fatalf("DependencyLag = %v, %v", lag, err)
		}
		if n, err := s.DrainDependencies(ctxT(t)); err != nil || n != 2 {
			t.Fatalf("DrainDependencies = %d, %v; want 2 writes", n, err)
		}
		if lag, err := s.DependencyLag(ctxT(t)); err != nil || lag != 0 {
			t.Fatalf("DependencyLag after a drain = %v, %v; want 0", lag, err)
		}
		check("drained", std1, []model.DependencyLink{link("backend", "db", 1, 1), link("frontend", "backend", 1, 0)})

		// The root arrives: b moves to the root's hour, counted once.
		accept(t, s, b.Root)
		std2 := []model.DependencyLink{link("backend", "db", 2, 2), link("frontend", "backend", 2, 0)}
		check("root queued", std2, nil)
		// A replay, drained by a Store opened later (a restart).
		accept(t, s, a.spans()...)
		s2 := h.store(t, pgstore.Options{DependencyDrainInterval: -1})
		if n, err := s2.DrainDependencies(ctxT(t)); err != nil || n != 2 {
			t.Fatalf("DrainDependencies after a restart = %d, %v; want 2 writes", n, err)
		}
		check("root drained", std2, nil)
		if n := tableCount(t, h, "zipkin_dependency_queue"); n != 0 {
			t.Errorf("zipkin_dependency_queue holds %d rows after a drain, want 0", n)
		}
		if n := tableCount(t, h, "zipkin_dependency_traces"); n != 2 {
			t.Errorf("zipkin_dependency_traces holds %d rows, want 2 (one per trace)", n)
		}
		if n := tableCount(t, h, "zipkin_dependency_hours"); n != 2 {
			t.Errorf("zipkin_dependency_hours holds %d rows, want 2 (the later hour's emptied rows deleted)", n)
		}
		if n, err := s2.DrainDependencies(ctxT(t)); err != nil || n != 0 {
			t.Fatalf("DrainDependencies on an empty queue = %d, %v", n, err)
		}
		if got := s.Stats().Drained + s2.Stats().Drained; got != 4 {
			t.Errorf("Stats().Drained = %d in all, want 4", got)
		}
	})
}

// TestDependencyDrainAfterWrites: Accept drains the queue itself once the
// drain interval has passed.
func TestDependencyDrainAfterWrites(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		h := newHarness(t, srv)
		s := h.store(t, pgstore.Options{DependencyDrainInterval: 1}) // every write
		tr := newStdTrace()
		accept(t, s, tr.spans()...)
		if n := tableCount(t, h, "zipkin_dependency_queue"); n != 0 {
			t.Errorf("zipkin_dependency_queue holds %d rows after Accept, want 0 (drained)", n)
		}
		assertLinks(t, "GetDependencies", deps(t, s, tr.EndTs(), day), link("backend", "db", 1, 1), link("frontend", "backend", 1, 0))
	})
}

// TestRetentionAllTables: DeleteBefore removes the old traces' fragments
// (with a fragment of theirs without timestamp), their dependency counts
// and records, and keeps the young ones'; Retention runs it on a clock.
func TestRetentionAllTables(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		h := newHarness(t, srv)
		s := h.store(t, pgstore.Options{DependencyDrainInterval: -1})
		old, young := newStdTrace(), newStdTrace()
		for _, sp := range []*model.Span{&old.Root, &old.Client, &old.Server, &old.DBCall} {
			sp.Timestamp -= micros(3 * day)
		}
		late := model.Span{TraceID: old.ID, ID: old.Root.ID, LocalEndpoint: frontend,
			Annotations: []model.Annotation{{Timestamp: old.Start + 1, Value: "late"}}}
		accept(t, s, append(old.spans(), late)...)
		if _, err := s.DrainDependencies(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		accept(t, s, young.spans()...) // queued, not drained
		std := []model.DependencyLink{link("backend", "db", 1, 1), link("frontend", "backend", 1, 0)}
		assertLinks(t, "old", deps(t, s, old.EndTs(), day), std...)
		// The clock stops Run when the second pass starts.
		ctx, cancel := context.WithCancel(ctxT(t))
		defer cancel()
		calls := 0
		r, err := s.NewRetention(pgstore.RetentionOptions{MaxAge: 24 * time.Hour, Interval: time.Millisecond,
			Now: func() time.Time {
				if calls++; calls == 2 {
					cancel()
				}
				return time.UnixMilli(today)
			}})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Run(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
		if st := r.Stats(); st.Passes != 1 || st.SpansDeleted != 5 || st.Errors != 0 {
			t.Fatalf("Retention.Stats = %+v, want 1 pass, 5 rows deleted", st)
		}
		assertTrace(t, s, old.ID, nil)
		assertTrace(t, s, young.ID, young.spans())
		assertLinks(t, "old", deps(t, s, old.EndTs(), day))
		assertLinks(t, "young", deps(t, s, young.EndTs(), day), std...)
		if _, err := s.DrainDependencies(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		assertLinks(t, "young drained", deps(t, s, young.EndTs(), day), std...)
		for table, want := range map[string]int{"zipkin_spans": 4, "zipkin_dependency_traces": 1, "zipkin_dependency_hours": 2, "zipkin_dependency_queue": 0} {
			if n := tableCount(t, h, table); n != want {
				t.Errorf("%s holds %d rows, want %d (the young trace's)", table, n, want)
			}
		}
		if _, err := s.NewRetention(pgstore.RetentionOptions{}); err == nil {
			t.Error("NewRetention without MaxAge = nil error")
		}
	})
}

// TestDependencyDrainsConcurrent: drains from two Stores at once (two
// processes on one database) count every trace once, and a drain that
// does not wait (Accept's) skips while another runs.
func TestDependencyDrainsConcurrent(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		h := newHarness(t, srv)
		s1 := h.store(t, pgstore.Options{DependencyDrainInterval: -1})
		s2 := h.store(t, pgstore.Options{DependencyDrainInterval: -1})
		const traces = 150
		var last stdTrace
		for range traces {
			last = newStdTrace()
			accept(t, s1, last.spans()...) // one write per trace: 150 queue rows, 3 drain transactions
		}
		errs := make(chan error, 2)
		for _, s := range []*pgstore.Store{s1, s2} {
			go func() { _, err := s.DrainDependencies(ctxT(t)); errs <- err }()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if got := s1.Stats().Drained + s2.Stats().Drained; got != traces {
			t.Errorf("drained %d writes in all, want %d", got, traces)
		}
		assertLinks(t, "GetDependencies", deps(t, s1, last.EndTs(), day),
			link("backend", "db", traces, traces), link("frontend", "backend", traces, 0))
	})
}
