package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// With a spool, a drain that reaches its deadline leaves the spans not yet
// stored in the spool (Close returns nil and drops nothing), and the next
// server on the same directory replays and stores every one of them, once;
// the spool is then empty.
func TestSpoolKeepsWhatTheDrainLeaves(t *testing.T) {
	dir := t.TempDir()
	stuck := &fakeStore{}
	stuck.setHook(func(ctx context.Context, _ []model.Span) error { <-ctx.Done(); return ctx.Err() })
	s1, err := New(Config{Storage: stuck, SpoolDir: dir, Logger: discardLogger(), Writers: 2})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s1.Handler())
	const posts = 40
	for i := 0; i < posts; i++ {
		if r := post(t, hs.URL+"/api/v2/spans", listJSON(1+i*5, 5)); r.code != http.StatusAccepted {
			t.Fatalf("POST %d: %d %s", i, r.code, r.body)
		}
	}
	if st := s1.spool.Stats(); st.Records != posts || st.Fsyncs == 0 {
		t.Fatalf("spool after %d POSTs: %+v", posts, st)
	}
	// Each group commit's fdatasync is in the histogram, the slowest below +Inf.
	fsyncs := metric(t, hs.URL, "zipkin_spool_fsyncs_total{transport=\"http\"}")
	if n := metric(t, hs.URL, "zipkin_spool_fsync_seconds_count{transport=\"http\"}"); n != fsyncs || n == 0 {
		t.Fatalf("zipkin_spool_fsync_seconds_count = %v for %v group commits", n, fsyncs)
	}
	if n := metric(t, hs.URL, "zipkin_spool_fsync_seconds_bucket{transport=\"http\",le=\"+Inf\"}"); n != fsyncs {
		t.Fatalf("zipkin_spool_fsync_seconds_bucket{le=+Inf} = %v for %v group commits", n, fsyncs)
	}
	// v1 and proto3 bodies are replayed in their own format.
	if r := post(t, hs.URL+"/api/v1/spans", `[{"traceId":"a1","id":"fedcba987","name":"v1","timestamp":10,"annotations":[{"timestamp":10,"value":"sr","endpoint":{"serviceName":"v1svc"}}]}]`); r.code != 202 {
		t.Fatalf("v1 POST: %d %s", r.code, r.body)
	}
	hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s1.Close(ctx); err != nil {
		t.Fatalf("Close at the drain deadline with a spool: %v, want nil (nothing dropped)", err)
	}
	if n := len(stuck.Stored()); n != 0 {
		t.Fatalf("stuck store stored %d", n)
	}

	good := &fakeStore{}
	s2, hs2, _ := newTestServer(t, good, Config{SpoolDir: dir})
	waitFor(t, "the replayed spans to be stored", func() bool { return len(good.Stored()) >= posts*5+1 })
	waitDrained(t, hs2.URL)
	seen := map[model.ID]int{}
	for _, sp := range good.Stored() {
		seen[sp.ID]++
	}
	if len(seen) != posts*5+1 {
		t.Fatalf("replay stored %d distinct spans, want %d", len(seen), posts*5+1)
	}
	waitFor(t, "the spool to be empty", func() bool { return s2.spool.Stats().Records == 0 })
	if n := metric(t, hs2.URL, "zipkin_spool_replayed_total{transport=\"http\"}"); n != posts+1 {
		t.Fatalf("zipkin_spool_replayed_total = %v, want %d", n, posts+1)
	}
	if n := metric(t, hs2.URL, collector(NameSpansDropped)); n != 0 {
		t.Fatalf("spans dropped %v", n)
	}
}

// A full spool answers 503 with Retry-After and keeps nothing of the POST;
// a second server cannot open the same directory.
func TestSpoolFullAndLocked(t *testing.T) {
	dir := t.TempDir()
	stuck := &fakeStore{}
	back := make(chan struct{})
	stuck.setHook(func(ctx context.Context, _ []model.Span) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-back:
			return nil
		}
	})
	s, hs, _ := newTestServer(t, stuck, Config{SpoolDir: dir, SpoolMaxBytes: 4096, RetryDeadline: time.Hour})
	var full response
	for i := 0; i < 100; i++ {
		full = post(t, hs.URL+"/api/v2/spans", listJSON(1+i*3, 3))
		if full.code != http.StatusAccepted {
			break
		}
	}
	if full.code != http.StatusServiceUnavailable || full.header.Get("Retry-After") == "" || !strings.Contains(full.body, "spool is full") {
		t.Fatalf("POST into a full spool: %d %q Retry-After %q", full.code, full.body, full.header.Get("Retry-After"))
	}
	if b := s.spool.Stats().Bytes; b > 4096 {
		t.Fatalf("spool holds %d bytes, bound 4096", b)
	}
	if _, err := New(Config{Storage: stuck, SpoolDir: dir, Logger: discardLogger()}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second server on the same spool dir: %v, want the lock error", err)
	}
	close(back) // the database is back: the cleanup drains at once
}
