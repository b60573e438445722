package pgstore

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/internal/pgtest"
	"github.com/sqlpool/sqlpool/pool"
)

// TestMeasureQueries loads PGSTORE_MEASURE_SPANS spans (default 200,000;
// makeSpans' shape, timestamps over the last minute) through Accept into a
// fresh schema of the shared test server (PG_TEST_DSN's, or a private one)
// and times each read of the query API 100 times. It runs only with
// PGSTORE_MEASURE=1.
func TestMeasureQueries(t *testing.T) {
	if os.Getenv("PGSTORE_MEASURE") != "1" {
		t.Skip("set PGSTORE_MEASURE=1")
	}
	ctx := context.Background()
	n := envN("PGSTORE_MEASURE_SPANS", 200_000)
	cfg, err := pgx.ParseConfig(pgtest.Shared(t).DSN())
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, q := range []string{"DROP SCHEMA IF EXISTS measure_q CASCADE", "CREATE SCHEMA measure_q"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	cfg.RuntimeParams["search_path"] = "measure_q"
	p, err := pool.New(stdlib.GetConnector(*cfg), pool.Config{MaxConns: 4, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	db := p.OpenDB()
	defer func() { db.Close(); p.Close() }()
	if err := CreateSchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, db, Options{AutocompleteKeys: []string{"http.method"}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	batches := make(chan []model.Span)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				if err := s.Accept(ctx, b); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var sample model.TraceID
	for i := 0; i < n; i += 1000 {
		b := makeSpans(rng, 1000)
		sample = b[0].TraceID
		batches <- b
	}
	close(batches)
	wg.Wait()
	if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded %d spans in %v", n, time.Since(t0).Round(time.Millisecond))
	now := time.Now().UnixMilli()
	// Dependencies while writes are still queued (what the inline drains
	// left: the answer relinks those traces), then drained, as the server's
	// timer leaves them.
	lag, err := s.DependencyLag(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var queued int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+tableDepQueue).Scan(&queued); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	if _, err := s.GetDependencies(ctx, now, 3_600_000); err != nil {
		t.Fatal(err)
	}
	t.Logf("dependencies with %d writes queued (lag %v): %v", queued, lag.Round(time.Millisecond), time.Since(t1).Round(10*time.Microsecond))
	t1 = time.Now()
	drained, err := s.DrainDependencies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("drained %d writes in %v", drained, time.Since(t1).Round(time.Millisecond))
	// A backlog of PGSTORE_MEASURE_BACKLOG spans (default 10,000: 3 s of
	// writes at 3,300 spans/s) written without draining: what a read pays
	// to be exact while the drain lags.
	if nb := envN("PGSTORE_MEASURE_BACKLOG", 10_000); nb > 0 {
		s2, err := Open(ctx, db, Options{DependencyDrainInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < nb; i += 1000 {
			if err := s2.Accept(ctx, makeSpans(rng, 1000)); err != nil {
				t.Fatal(err)
			}
		}
		var d []time.Duration
		for range 50 {
			t1 := time.Now()
			if _, err := s2.GetDependencies(ctx, time.Now().UnixMilli(), 3_600_000); err != nil {
				t.Fatal(err)
			}
			d = append(d, time.Since(t1))
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		t.Logf("dependencies (1 h) with %d spans queued: p50 %v  p99 %v  (%d runs)", nb, d[len(d)/2].Round(10*time.Microsecond),
			d[len(d)*99/100].Round(10*time.Microsecond), len(d))
		t1 = time.Now()
		if _, err := s2.DrainDependencies(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("drained the backlog in %v", time.Since(t1).Round(time.Millisecond))
	}
	req := func(f func(*model.QueryRequest)) model.QueryRequest {
		q := model.QueryRequest{EndTs: now, Lookback: 3_600_000, Limit: 10}
		f(&q)
		return q
	}
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"traces (any, limit 10)", func() error { _, err := s.GetTraces(ctx, req(func(*model.QueryRequest) {})); return err }},
		{"traces service", func() error {
			_, err := s.GetTraces(ctx, req(func(q *model.QueryRequest) { q.ServiceName = "service-3" }))
			return err
		}},
		{"traces service+span name", func() error {
			_, err := s.GetTraces(ctx, req(func(q *model.QueryRequest) { q.ServiceName, q.SpanName = "service-3", "get /api/7" }))
			return err
		}},
		{"traces tag http.path=/api/17", func() error {
			_, err := s.GetTraces(ctx, req(func(q *model.QueryRequest) { q.AnnotationQuery = map[string]string{"http.path": "/api/17"} }))
			return err
		}},
		{"traces minDuration 99000", func() error {
			_, err := s.GetTraces(ctx, req(func(q *model.QueryRequest) { q.MinDuration = 99_000 }))
			return err
		}},
		{"trace by ID", func() error { _, err := s.GetTrace(ctx, sample); return err }},
		{"services", func() error { _, err := s.GetServiceNames(ctx); return err }},
		{"span names", func() error { _, err := s.GetSpanNames(ctx, "service-3"); return err }},
		{"autocomplete values", func() error { _, err := s.GetValues(ctx, "http.method"); return err }},
		{"dependencies (1 h)", func() error { _, err := s.GetDependencies(ctx, now, 3_600_000); return err }},
	} {
		var d []time.Duration
		for range 100 {
			t1 := time.Now()
			if err := c.run(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			d = append(d, time.Since(t1))
			if time.Since(t1) > 5*time.Second {
				break
			}
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		t.Logf("%-30s p50 %8v  p99 %8v  max %8v  (%d runs)", c.name, d[len(d)/2].Round(10*time.Microsecond),
			d[len(d)*99/100].Round(10*time.Microsecond), d[len(d)-1].Round(10*time.Microsecond), len(d))
	}
}
