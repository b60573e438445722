package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
)

var benchSeq atomic.Uint64

// BenchmarkAccept measures the write path on MariaDB (MYSQL_TEST_DSN): one goroutine writing
// batches of 10 or 100 spans (traces of 10 spans with tags, annotations and remote endpoints), on
// sqlpool (p.OpenDB(), statement cache on) and on plain database/sql (go-sql-driver, same
// connection limit). Each batch is a new set of traces, so the tables grow as the benchmark runs.
func BenchmarkAccept(b *testing.B) {
	if !mysqltest.IsMariaDB() {
		mysqltest.RequireMariaDB(b, "the write benchmarks measure MariaDB")
	}
	for _, mode := range []string{"pool", "sql"} {
		for _, size := range []int{10, 100} {
			b.Run(fmt.Sprintf("db=%s/batch=%d", mode, size), func(b *testing.B) {
				benchAccept(b, mode, size, mysqlstore.Options{})
			})
		}
	}
}

// BenchmarkAcceptDependencyAggregation is BenchmarkAccept on sqlpool with the dependency
// aggregator on (the default) and off: the write cost of keeping zipkin_dependencies current.
func BenchmarkAcceptDependencyAggregation(b *testing.B) {
	if !mysqltest.IsMariaDB() {
		mysqltest.RequireMariaDB(b, "the write benchmarks measure MariaDB")
	}
	for _, agg := range []string{"on", "off"} {
		for _, size := range []int{10, 100} {
			b.Run(fmt.Sprintf("aggregation=%s/batch=%d", agg, size), func(b *testing.B) {
				benchAccept(b, "pool", size, mysqlstore.Options{DisableDependencyAggregation: agg == "off"})
			})
		}
	}
}

func benchAccept(b *testing.B, mode string, size int, opts mysqlstore.Options) {
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(freshDatabaseB(b, mysqltest.DSN(b)))
	if err != nil {
		b.Fatal(err)
	}
	cfg.Logger = nopDriverLogger{}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var db *sql.DB
	var plans func() uint64 // release plans so far, for the pool
	switch mode {
	case "pool":
		p, err := pool.New(connector, pool.Config{Name: "bench", MaxConns: 4, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		db = p.OpenDB()
		plans = func() uint64 { return p.Stats().ReleasePlans }
		b.Cleanup(func() { db.Close(); p.Close() })
	default:
		db = sql.OpenDB(connector)
		db.SetMaxOpenConns(4)
		db.SetMaxIdleConns(4)
		b.Cleanup(func() { db.Close() })
	}
	if err := mysqlstore.CreateSchema(ctx, db); err != nil {
		b.Fatal(err)
	}
	opts.Logger = quietLogger
	s, err := mysqlstore.Open(ctx, db, opts)
	if err != nil {
		b.Fatal(err)
	}
	template := testSpans(5, size)
	batches := make([][]model.Span, 64)
	next := func() []model.Span {
		seq := benchSeq.Add(1)
		out := batches[seq%uint64(len(batches))][:0]
		for _, sp := range template {
			sp.TraceID.Low = sp.TraceID.Low ^ seq<<20
			out = append(out, sp)
		}
		batches[seq%uint64(len(batches))] = out
		return out
	}
	// Warm up: prepare the statements on the pool's connections.
	for i := 0; i < 4; i++ {
		if err := s.Accept(ctx, next()); err != nil {
			b.Fatal(err)
		}
	}
	var plans0 uint64
	if plans != nil {
		plans0 = plans()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Accept(ctx, next()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "spans/s")
	if plans != nil {
		// Release plans per batch: 0 — the span tables have no AUTO_INCREMENT, so the write
		// path never needs a LAST_INSERT_ID() reset (or any other).
		b.ReportMetric(float64(plans()-plans0)/float64(b.N), "plans/op")
	}
}

// freshDatabaseB is freshDatabase for benchmarks.
func freshDatabaseB(b *testing.B, dsn string) string {
	b.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		b.Fatal(err)
	}
	name := fmt.Sprintf("zipkin_bench_%d", benchSeq.Add(1)<<8^uint64(len(b.Name())))
	admin := openPlain(b, dsn)
	if _, err := admin.ExecContext(context.Background(), "CREATE DATABASE "+name); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name) })
	cfg.DBName = name
	return cfg.FormatDSN()
}
