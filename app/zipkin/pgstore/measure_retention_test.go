package pgstore

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/pool"
)

// TestMeasureRetention compares, on PG_TEST_DSN's server, what retention
// costs against what ingest costs for the same spans: it writes
// PGSTORE_MEASURE_SPANS spans (default 200,000; makeSpans' shape) through
// Accept from 4 writers, drains the dependency queue, then deletes them all
// with DeleteBefore (the batched DELETE retention runs) and VACUUMs the
// tables (what autovacuum does after it; autovacuum is off on them), timing each step and the
// server's CPU time (its processes' utime+stime in /proc, when the server
// runs on this machine). It runs only with PGSTORE_MEASURE=1.
func TestMeasureRetention(t *testing.T) {
	if os.Getenv("PGSTORE_MEASURE") != "1" || os.Getenv("PG_TEST_DSN") == "" {
		t.Skip("set PGSTORE_MEASURE=1 and PG_TEST_DSN (a server with the settings to measure)")
	}
	ctx := context.Background()
	n := envN("PGSTORE_MEASURE_SPANS", 200_000)
	cfg, err := pgx.ParseConfig(os.Getenv("PG_TEST_DSN"))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, q := range []string{"DROP SCHEMA IF EXISTS measure_r CASCADE", "CREATE SCHEMA measure_r"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	cfg.RuntimeParams["search_path"] = "measure_r"
	p, err := pool.New(stdlib.GetConnector(*cfg), pool.Config{MaxConns: 4, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	db := p.OpenDB()
	defer func() { db.Close(); p.Close() }()
	if err := CreateSchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	// Autovacuum off on the measured tables, so that the server's CPU of
	// each step is that step's (VACUUM is a step of its own).
	for _, tb := range []string{tableSpans, tableDepQueue, tableDepTraces, tableDepHours} {
		if _, err := db.ExecContext(ctx, "ALTER TABLE "+tb+" SET (autovacuum_enabled = false)"); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(ctx, db, Options{DependencyDrainInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	batches := make(chan int)
	done := make(chan error, 4)
	step := func(name string, f func() error) {
		t.Helper()
		cpu0 := serverCPU(t)
		t0 := time.Now()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		el, cpu := time.Since(t0), serverCPU(t)-cpu0
		t.Logf("%-32s %8v wall, %8.1f µs/span wall, server CPU %8.1f µs/span", name, el.Round(time.Millisecond),
			float64(el.Microseconds())/float64(n), float64(cpu.Microseconds())/float64(n))
	}
	all := make([][]model.Span, 0, n/1000)
	for i := 0; i < n; i += 1000 {
		all = append(all, makeSpans(rng, 1000))
	}
	step("write (Accept, 4 writers)", func() error {
		for range 4 {
			go func() {
				for i := range batches {
					if err := s.Accept(ctx, all[i]); err != nil {
						done <- err
						for range batches {
						}
						return
					}
				}
				done <- nil
			}()
		}
		for i := range all {
			batches <- i
		}
		close(batches)
		var first error
		for range 4 {
			if err := <-done; err != nil && first == nil {
				first = err
			}
		}
		return first
	})
	step("drain dependencies", func() error { _, err := s.DrainDependencies(ctx); return err })
	step("VACUUM after writes", func() error { _, err := db.ExecContext(ctx, "VACUUM "+tableSpans); return err })
	step("DeleteBefore (all)", func() error {
		got, err := s.DeleteBefore(ctx, time.Now().Add(time.Hour))
		if err == nil && got != int64(n) {
			t.Errorf("DeleteBefore deleted %d rows, want %d", got, n)
		}
		return err
	})
	step("VACUUM after DeleteBefore", func() error { _, err := db.ExecContext(ctx, "VACUUM "+tableSpans); return err })
	step("TRUNCATE (a partition drop)", func() error { _, err := db.ExecContext(ctx, "TRUNCATE "+tableSpans); return err })
}

// serverCPU is the CPU time of PG_TEST_DSN's server: its postmaster's
// children (and their reaped children) when it runs on this machine, else
// 0.
func serverCPU(t *testing.T) time.Duration {
	t.Helper()
	c, err := pgx.Connect(context.Background(), os.Getenv("PG_TEST_DSN"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var pid int
	if err := c.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	stat := func(pid int) []string {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return nil
		}
		s := string(b)
		return strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	}
	f := stat(pid)
	if f == nil {
		return 0
	}
	post, _ := strconv.Atoi(f[1]) // ppid
	ticks := func(f []string, reaped bool) int64 {
		var n int64
		idx := []int{11, 12} // utime, stime (fields 14, 15)
		if reaped {
			idx = append(idx, 13, 14) // cutime, cstime
		}
		for _, i := range idx {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			n += v
		}
		return n
	}
	total := int64(0)
	if pf := stat(post); pf != nil {
		total += ticks(pf, true)
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := stat(p); f != nil && f[1] == strconv.Itoa(post) {
			total += ticks(f, true)
		}
	}
	return time.Duration(total) * 10 * time.Millisecond // USER_HZ 100
}
