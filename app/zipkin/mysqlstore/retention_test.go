package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// retentionTrace returns a trace of n spans starting at ts (µs), with a
// client/server pair, tags and annotations, so that every span has several
// annotation rows.
func retentionTrace(ts int64, n int) []model.Span {
	tid := randomTraceID()
	root := randomID()
	spans := make([]model.Span, n)
	for i := range spans {
		id := root
		var parent model.ID
		if i > 0 {
			id, parent = randomID(), root
		}
		spans[i] = model.Span{TraceID: tid, ID: id, ParentID: parent, Kind: model.KindClient,
			Name: fmt.Sprintf("op-%d", i), Timestamp: ts + int64(i), Duration: 100,
			LocalEndpoint: ep("frontend", "10.0.0.1", 8080), RemoteEndpoint: ep("backend", "10.0.0.2", 9000),
			Annotations: []model.Annotation{{Timestamp: ts + int64(i) + 10, Value: "retry"}},
			Tags:        map[string]string{"http.path": "/api", "i": fmt.Sprint(i)}}
	}
	return spans
}

const (
	selectOrphans = `SELECT COUNT(*) FROM zipkin_annotations a LEFT JOIN zipkin_spans s
		ON s.trace_id_high = a.trace_id_high AND s.trace_id = a.trace_id AND s.id = a.span_id WHERE s.id IS NULL`
	youngRows = `SELECT s.trace_id_high, s.trace_id, s.id, s.start_ts, a.a_key, a.a_type, a.a_timestamp
		FROM zipkin_spans s JOIN zipkin_annotations a
		ON s.trace_id_high = a.trace_id_high AND s.trace_id = a.trace_id AND s.id = a.span_id
		WHERE s.start_ts >= ? OR s.start_ts IS NULL ORDER BY 1, 2, 3, 5, 7`
)

func scalar(t *testing.T, db *sql.DB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// A retention pass deletes every span older than the cutoff with all its
// annotation rows, in batches, and leaves every row of younger spans, of
// spans exactly at the cutoff and of spans without a timestamp as it was.
func TestRetentionDeletesOnlyOlderThanCutoff(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		s, db := newStore(t, srv)
		ctx := ctxT(t)
		now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		cutoff := now.Add(-time.Hour)
		var spans []model.Span
		for i := 0; i < 4; i++ {
			spans = append(spans, retentionTrace(now.Add(-3*time.Hour).UnixMicro()+int64(i)*1000, 5)...)    // old
			spans = append(spans, retentionTrace(now.Add(-10*time.Minute).UnixMicro()+int64(i)*1000, 5)...) // young
		}
		atCut := retentionTrace(cutoff.UnixMicro(), 1)
		noTS := retentionTrace(0, 1)
		noTS[0].Timestamp, noTS[0].Duration = 0, 0
		spans = append(append(spans, atCut...), noTS...)
		if err := s.Accept(ctx, spans); err != nil {
			t.Fatalf("Accept: %v", err)
		}
		before := dump(t, db, youngRows, cutoff.UnixMicro())
		youngIndex := dump(t, db, "SELECT * FROM zipkin_service_spans WHERE start_ts >= ? ORDER BY 1, 2, 3, 4, 5", cutoff.UnixMicro())
		oldAnns := scalar(t, db, `SELECT COUNT(*) FROM zipkin_annotations a JOIN zipkin_spans s
			ON s.trace_id_high = a.trace_id_high AND s.trace_id = a.trace_id AND s.id = a.span_id WHERE s.start_ts < ?`, cutoff.UnixMicro())
		if len(before) == 0 || oldAnns == 0 {
			t.Fatalf("setup: %d young rows, %d old annotation rows", len(before), oldAnns)
		}

		r, err := s.NewRetention(mysqlstore.RetentionOptions{MaxAge: time.Hour, BatchSpans: 3, Pause: -1,
			Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		n, err := r.DeleteBefore(ctx, cutoff)
		if err != nil {
			t.Fatalf("DeleteBefore: %v", err)
		}
		if n != 20 {
			t.Errorf("deleted %d spans, want the 20 old ones", n)
		}
		if left := scalar(t, db, "SELECT COUNT(*) FROM zipkin_spans WHERE start_ts < ?", cutoff.UnixMicro()); left != 0 {
			t.Errorf("%d old spans left", left)
		}
		if o := scalar(t, db, selectOrphans); o != 0 {
			t.Errorf("%d orphaned annotation rows", o)
		}
		if left := scalar(t, db, "SELECT COUNT(*) FROM zipkin_service_spans WHERE start_ts < ?", cutoff.UnixMicro()); left != 0 {
			t.Errorf("%d old zipkin_service_spans rows left", left)
		}
		checkRows(t, "zipkin_service_spans rows at or after the cutoff",
			dump(t, db, "SELECT * FROM zipkin_service_spans WHERE start_ts >= ? ORDER BY 1, 2, 3, 4, 5", cutoff.UnixMicro()), youngIndex)
		after := dump(t, db, youngRows, cutoff.UnixMicro())
		checkRows(t, "rows of spans at or after the cutoff and without timestamp", after, before)
		st := r.Stats()
		if st.SpansDeleted != 20 || st.AnnotationsDeleted != oldAnns || st.IndexRowsDeleted != 20 || st.Batches < 7 || st.Passes != 1 || st.Errors != 0 {
			t.Errorf("stats %+v, want 20 spans and %d annotations in ≥ 7 batches of ≤ 3, one pass", st, oldAnns)
		}
		// A second pass finds nothing.
		if n, err := r.DeleteBefore(ctx, cutoff); n != 0 || err != nil {
			t.Errorf("second pass: %d, %v", n, err)
		}
	})
}

// A pass ends even when every batch is followed by the arrival of more
// expired spans than a batch deletes: spans stored behind the pass's
// position are left for the next pass, which deletes them.
func TestRetentionPassEndsWhileExpiredSpansArrive(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		s, db := newStore(t, srv)
		ctx := ctxT(t)
		now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		cutoff := now.Add(-time.Hour)
		var old []model.Span
		for i := 0; i < 3; i++ {
			old = append(old, retentionTrace(now.Add(-2*time.Hour).UnixMicro()+int64(i)*1000, 2)...)
		}
		if err := s.Accept(ctx, old); err != nil {
			t.Fatalf("Accept: %v", err)
		}
		r, err := s.NewRetention(mysqlstore.RetentionOptions{MaxAge: time.Hour, BatchSpans: 2, Pause: -1,
			Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		// After each batch, three spans older than any so far arrive: more
		// than a batch deletes, and all behind the pass's position.
		passCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		batches, late := 0, 0
		mysqlstore.SetAfterBatch(r, func() {
			batches++
			if batches > 50 {
				cancel() // the pass would not end
				return
			}
			late += 3
			if err := s.Accept(ctx, retentionTrace(now.Add(-3*time.Hour).UnixMicro()-int64(batches)*1000, 3)); err != nil {
				t.Errorf("Accept during the pass: %v", err)
			}
		})
		n, err := r.DeleteBefore(passCtx, cutoff)
		if err != nil {
			t.Fatalf("DeleteBefore with expired spans arriving after each batch: %v after %d batches", err, batches)
		}
		if n != 6 {
			t.Errorf("the pass deleted %d spans, want the 6 stored before it started", n)
		}
		// The next pass deletes what arrived during the first.
		mysqlstore.SetAfterBatch(r, nil)
		if n, err := r.DeleteBefore(ctx, cutoff); err != nil || n != int64(late) {
			t.Errorf("second pass: deleted %d, %v; want the %d late spans", n, err, late)
		}
		if left := scalar(t, db, "SELECT COUNT(*) FROM zipkin_spans WHERE start_ts < ?", cutoff.UnixMicro()); left != 0 {
			t.Errorf("%d expired spans left after the second pass", left)
		}
	})
}

func TestNewRetentionRejectsNonPositiveMaxAge(t *testing.T) {
	s, _ := newStore(t, server{"embedded", mysqltest.EmbeddedDSN(t)})
	for _, d := range []time.Duration{0, -time.Hour} {
		if _, err := s.NewRetention(mysqlstore.RetentionOptions{MaxAge: d}); err == nil {
			t.Errorf("MaxAge %s accepted", d)
		}
	}
}

// Run stops when its context ends.
func TestRetentionRunStopsWithContext(t *testing.T) {
	s, _ := newStore(t, server{"embedded", mysqltest.EmbeddedDSN(t)})
	r, err := s.NewRetention(mysqlstore.RetentionOptions{MaxAge: time.Hour, Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for r.Stats().Passes < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	if r.Stats().Passes < 2 {
		t.Fatalf("passes %d within a minute", r.Stats().Passes)
	}
}

// Retention deleting old spans while four writers store young spans and
// late old spans of the same traces through the pool (InnoDB): afterwards
// every young span is stored with its annotations, no annotation lost its
// span, and a final pass leaves no old span.
func TestRetentionDuringIngest(t *testing.T) {
	if !mysqltest.IsMariaDB() {
		mysqltest.RequireMariaDB(t, "retention during ingest needs InnoDB's row locks")
		return
	}
	h := newHarness(t, server{"mariadb", mysqltest.DSN(t)})
	s := h.store(t, mysqlstore.Options{})
	ctx := ctxT(t)
	now := time.Now()
	cutoff := now.Add(-time.Hour)
	// Old data to delete while the writers run.
	for i := 0; i < 20; i++ {
		var batch []model.Span
		for j := 0; j < 10; j++ {
			batch = append(batch, retentionTrace(now.Add(-2*time.Hour).UnixMicro()+int64(i*10+j), 5)...)
		}
		if err := s.Accept(ctx, batch); err != nil {
			t.Fatalf("Accept old: %v", err)
		}
	}
	r, err := s.NewRetention(mysqlstore.RetentionOptions{MaxAge: time.Hour, BatchSpans: 50, Pause: -1})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var young int
	var writeErr error
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// Young traces, and late-arriving old spans.
				batch := retentionTrace(now.UnixMicro()+int64(w*1_000_000+i), 5)
				batch = append(batch, retentionTrace(now.Add(-90*time.Minute).UnixMicro(), 3)...)
				if err := s.Accept(ctx, batch); err != nil {
					mu.Lock()
					writeErr = err
					mu.Unlock()
					return
				}
				mu.Lock()
				young += 5
				mu.Unlock()
			}
		}(w)
	}
	passes := 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) || passes < 3; passes++ {
		if _, err := r.DeleteBefore(ctx, cutoff); err != nil {
			t.Errorf("DeleteBefore during ingest: %v", err)
			break
		}
	}
	close(stop)
	wg.Wait()
	if writeErr != nil {
		t.Fatalf("a writer failed: %v", writeErr)
	}
	if _, err := r.DeleteBefore(ctx, cutoff); err != nil {
		t.Fatalf("final pass: %v", err)
	}
	if left := scalar(t, h.db, "SELECT COUNT(*) FROM zipkin_spans WHERE start_ts < ?", cutoff.UnixMicro()); left != 0 {
		t.Errorf("%d old spans left after the final pass", left)
	}
	if got := scalar(t, h.db, "SELECT COUNT(*) FROM zipkin_spans WHERE start_ts >= ?", cutoff.UnixMicro()); got != int64(young) {
		t.Errorf("%d young spans stored, want %d", got, young)
	}
	// Each young span has its rows: cs, cr, the annotation, 2 tags, sa.
	if got := scalar(t, h.db, `SELECT COUNT(*) FROM zipkin_annotations a JOIN zipkin_spans s
		ON s.trace_id_high = a.trace_id_high AND s.trace_id = a.trace_id AND s.id = a.span_id WHERE s.start_ts >= ?`,
		cutoff.UnixMicro()); got != int64(young*6) {
		t.Errorf("%d annotation rows of young spans, want %d", got, young*6)
	}
	if o := scalar(t, h.db, selectOrphans); o != 0 {
		t.Errorf("%d orphaned annotation rows", o)
	}
	st := r.Stats()
	t.Logf("%d passes; stats %+v; %d young spans written", passes, st, young)
	if st.SpansDeleted < 1000 || st.Errors != 0 {
		t.Errorf("stats %+v: want at least the 1000 preloaded old spans deleted, no errors", st)
	}
}

// tagRowsOfSpans lists the zipkin_tags rows whose span is stored and
// matches cond (on zipkin_spans s); orphanTags counts those whose span is
// not.
const (
	tagRowsOfSpans = `SELECT t.* FROM zipkin_tags t JOIN zipkin_spans s
		ON s.trace_id_high = t.trace_id_high AND s.trace_id = t.trace_id AND s.id = t.span_id
		WHERE s.start_ts >= ? OR s.start_ts IS NULL ORDER BY 1, 2, 3, 4, 5, 6, 7, 8`
	orphanTags = `SELECT COUNT(*) FROM zipkin_tags t LEFT JOIN zipkin_spans s
		ON s.trace_id_high = t.trace_id_high AND s.trace_id = t.trace_id AND s.id = t.span_id WHERE s.id IS NULL`
)

// straddlingSpans returns spans whose sides lie on both sides of cut (µs):
// span IDs reported by a client and a server (shared) with their own
// timestamps and tags, a server side without a timestamp, and a local span
// with timeline annotations only. The span row keeps the client's
// timestamp, so the first, third and fourth span IDs expire and the
// second stays.
func straddlingSpans(cut int64) []model.Span {
	tid := model.TraceID{High: 7, Low: 0x5157_4add1e}
	spans := []model.Span{
		{TraceID: tid, ID: 1, Kind: model.KindClient, Name: "get /a", Timestamp: cut - 5, Duration: 20,
			LocalEndpoint: ep("frontend", "", 0), RemoteEndpoint: ep("backend", "", 0),
			Tags: map[string]string{"http.method": "GET", "straddle": "client expired"}},
		{TraceID: tid, ID: 1, Kind: model.KindServer, Shared: true, Name: "handle", Timestamp: cut + 5, Duration: 10,
			LocalEndpoint: ep("backend", "", 0), Tags: map[string]string{"http.path": "/straddle", "straddle": "server after the cutoff"},
			Annotations: []model.Annotation{{Timestamp: cut + 7, Value: "straddle.annotation"}}},
		{TraceID: tid, ID: 2, ParentID: 1, Kind: model.KindClient, Name: "get /b", Timestamp: cut + 5, Duration: 20,
			LocalEndpoint: ep("frontend", "", 0), Tags: map[string]string{"straddle": "client kept"}},
		{TraceID: tid, ID: 2, ParentID: 1, Kind: model.KindServer, Shared: true, Name: "handle", Timestamp: cut - 5, Duration: 10,
			LocalEndpoint: ep("backend", "", 0), Tags: map[string]string{"error": "server before the cutoff"},
			Annotations: []model.Annotation{{Timestamp: cut - 3, Value: "straddle.kept"}}},
		{TraceID: tid, ID: 3, ParentID: 1, Kind: model.KindClient, Name: "get /c", Timestamp: cut - 50, Duration: 20,
			LocalEndpoint: ep("frontend", "", 0), Tags: map[string]string{"straddle": "client of a server without timestamp"}},
		{TraceID: tid, ID: 3, ParentID: 1, Kind: model.KindServer, Shared: true, Name: "handle",
			LocalEndpoint: ep("backend", "", 0), Tags: map[string]string{"straddle": "server without timestamp"},
			Annotations: []model.Annotation{{Timestamp: cut - 40, Value: "straddle.untimed"}}},
		{TraceID: tid, ID: 4, ParentID: 1, Name: "local", Timestamp: cut - 100, Duration: 5, LocalEndpoint: ep("backend", "", 0),
			Annotations: []model.Annotation{{Timestamp: cut - 99, Value: "straddle.local"}, {Timestamp: cut - 98, Value: "error"}}},
	}
	for i := range spans {
		spans[i].Normalize()
	}
	return spans
}

// Retention deletes the zipkin_tags rows of the spans it deletes — every
// side's, whatever its timestamp — and leaves those of the spans it keeps,
// also a side's whose timestamp is older than the cutoff: afterwards no row
// refers to a deleted span, the rows of kept spans are as they were, and
// the tag search and autocomplete values answer as Zipkin's queries do on
// the same spans without zipkin_tags.
func TestRetentionDeletesTagRowsOfDeletedSpans(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		ctx := ctxT(t)
		base := time.Now().Truncate(time.Millisecond)
		cutoff := base.Add(-20 * time.Minute)
		spans := append(tagWorkload(3, base), straddlingSpans(cutoff.UnixMicro())...)
		_, withDB := newStore(t, srv)
		legacyTagLayout(t, withDB) // zipkin_tags holds every tag
		with := openStore(t, withDB)
		plainDB := zipkinOnly(t, srv)
		plain := openStore(t, plainDB)
		if !with.Additions().Tags || plain.Additions().Tags {
			t.Fatalf("Additions() = %+v with, %+v without", with.Additions(), plain.Additions())
		}
		for i := 0; i < len(spans); i += 50 {
			for _, s := range []*mysqlstore.Store{with, plain} {
				if err := s.Accept(ctx, spans[i:min(i+50, len(spans))]); err != nil {
					t.Fatalf("Accept: %v", err)
				}
			}
		}
		kept := dump(t, withDB, tagRowsOfSpans, cutoff.UnixMicro())
		rowsBefore := scalar(t, withDB, "SELECT COUNT(*) FROM zipkin_tags")
		if o := scalar(t, withDB, orphanTags); o != 0 || len(kept) == 0 || int64(len(kept)) == rowsBefore {
			t.Fatalf("setup: %d zipkin_tags rows, %d of kept spans, %d orphaned", rowsBefore, len(kept), o)
		}
		// A side of a kept span older than the cutoff has rows there.
		if n := scalar(t, withDB, "SELECT COUNT(*) FROM zipkin_tags WHERE a_key = 'error' AND a_value = 'server before the cutoff' AND start_ts < ?",
			cutoff.UnixMicro()); n != 1 {
			t.Fatalf("setup: %d rows of the kept span's server side before the cutoff, want 1", n)
		}

		var deleted int64
		for _, db := range []*sql.DB{withDB, plainDB} {
			s := openStore(t, db)
			r, err := s.NewRetention(mysqlstore.RetentionOptions{MaxAge: 20 * time.Minute, BatchSpans: 7, Pause: -1})
			if err != nil {
				t.Fatal(err)
			}
			n, err := r.DeleteBefore(ctx, cutoff)
			if err != nil {
				t.Fatalf("DeleteBefore: %v", err)
			}
			if n == 0 {
				t.Fatal("retention deleted no span")
			}
			if db == withDB {
				deleted = r.Stats().TagRowsDeleted
			} else if st := r.Stats(); st.TagRowsDeleted != 0 {
				t.Errorf("without zipkin_tags: stats %+v, want no tag rows deleted", st)
			}
		}
		if o := scalar(t, withDB, orphanTags); o != 0 {
			t.Errorf("%d zipkin_tags rows refer to a deleted span", o)
		}
		checkRows(t, "zipkin_tags rows of kept spans", dump(t, withDB, tagRowsOfSpans, cutoff.UnixMicro()), kept)
		if rowsAfter := scalar(t, withDB, "SELECT COUNT(*) FROM zipkin_tags"); deleted != rowsBefore-rowsAfter {
			t.Errorf("TagRowsDeleted %d, want %d (%d rows before, %d after)", deleted, rowsBefore-rowsAfter, rowsBefore, rowsAfter)
		}
		compareTagLookups(t, tagLookups(t, with, base), tagLookups(t, plain, base))
		compareTagLookups(t, valueLookups(t, withDB), valueLookups(t, plainDB))
	})
}
