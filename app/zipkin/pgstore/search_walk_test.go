package pgstore

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/internal/pgtest"
	"github.com/sqlpool/sqlpool/pool"
)

// TestFrequentTermsWalk stores 3,000 spans whose http.method tag is GET on
// every one (a frequent term) and whose http.path takes 1,000 values (rare
// terms), analyzes the table, and checks that the store reads which terms
// are frequent from pg_stats, and that GetTraces answers the same whether a
// term is walked (checked on the service's or the window's newest
// fragments) or read through its GIN index.
func TestFrequentTermsWalk(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := pgx.ParseConfig(pgtest.Shared(t).DSN())
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	for _, q := range []string{"DROP SCHEMA IF EXISTS walk_terms CASCADE", "CREATE SCHEMA walk_terms"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	cfg.RuntimeParams["search_path"] = "walk_terms"
	p, err := pool.New(stdlib.GetConnector(*cfg), pool.Config{MaxConns: 2, MinIdleConns: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	db := p.OpenDB()
	defer func() { db.Close(); p.Close() }()
	if err := CreateSchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	open := func() *Store {
		s, err := Open(ctx, db, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	stats := open()
	if err := stats.Accept(ctx, makeSpans(rand.New(rand.NewPCG(5, 6)), 3000)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "ANALYZE zipkin_spans"); err != nil {
		t.Fatal(err)
	}
	get, path := valueTerm("http.method", "GET"), valueTerm("http.path", "/api/7")
	if !stats.frequentTerm(ctx, get) || stats.frequentTerm(ctx, path) {
		t.Fatalf("frequentTerm(http.method=GET, http.path=/api/7) = %v, %v; want true, false (pg_stats: %v)",
			stats.frequentTerm(ctx, get), stats.frequentTerm(ctx, path), stats.terms.frequent)
	}
	walk, gin := open(), open()
	walk.terms.all = true
	gin.terms.read, gin.terms.frequent = time.Now(), map[string]bool{} // every term rare for a minute
	now := time.Now().UnixMilli()
	for _, q := range []model.QueryRequest{
		{ServiceName: "service-3", AnnotationQuery: map[string]string{"http.method": "GET"}},
		{AnnotationQuery: map[string]string{"http.method": "GET"}},
		{ServiceName: "service-3", AnnotationQuery: map[string]string{"http.method": "GET", "http.path": "/api/7"}},
		{AnnotationQuery: map[string]string{"http.path": "/api/7"}},
		{ServiceName: "service-5", AnnotationQuery: map[string]string{"wire.send": ""}},
		{ServiceName: "service-5", SpanName: "get /api/3", AnnotationQuery: map[string]string{"http.method": "GET"}},
	} {
		for _, limit := range []int{1, 10, 1000} {
			q.EndTs, q.Lookback, q.Limit = now+1000, 120_000, limit
			var answers [][]model.TraceID
			for _, s := range []*Store{stats, walk, gin} {
				traces, err := s.GetTraces(ctx, q)
				if err != nil {
					t.Fatalf("GetTraces(%+v): %v", q, err)
				}
				ids := make([]model.TraceID, len(traces))
				for i, tr := range traces {
					ids[i] = tr[0].TraceID
				}
				answers = append(answers, ids)
			}
			if len(answers[0]) == 0 && limit == 10 && q.AnnotationQuery["http.path"] == "" {
				t.Errorf("GetTraces(%+v) found nothing", q)
			}
			if !slices.Equal(answers[0], answers[2]) || !slices.Equal(answers[1], answers[2]) {
				t.Errorf("GetTraces(%+v): by statistics %v, all walked %v, all through GIN %v", q, answers[0], answers[1], answers[2])
			}
		}
	}
}
