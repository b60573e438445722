package main

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/pgtest"
)

// TestPgBulkLoadStoresEveryTrace loads about 3,000 spans with pgBulkLoad
// into a private PostgreSQL and finds every span of every generated trace
// stored once, and the names read back through the store.
func TestPgBulkLoadStoresEveryTrace(t *testing.T) {
	pg := pgtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, closeStore, err := openPgStore(ctx, pg.DSN(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	g := pgBenchGen(time.Now(), 3000)
	want := 0
	for i := 0; i < g.Traces; i++ {
		want += len(g.trace(i, nil))
	}
	res, err := pgBulkLoad(ctx, st, g, 2, 500, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Spans != int64(want) || res.Batches < 2 {
		t.Errorf("loaded %d spans in %d batches, want %d spans in several batches", res.Spans, res.Batches, want)
	}
	db, err := sql.Open("pgx", pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, traces int
	if err := db.QueryRowContext(ctx, "SELECT count(*), count(DISTINCT (trace_id, trace_id_high)) FROM zipkin_spans").Scan(&rows, &traces); err != nil {
		t.Fatal(err)
	}
	if rows != want || traces != g.Traces {
		t.Errorf("zipkin_spans holds %d rows of %d traces, want %d of %d", rows, traces, want, g.Traces)
	}
	svcs, err := st.GetServiceNames(ctx)
	if err != nil || len(svcs) < NumServices {
		t.Errorf("GetServiceNames = %d names (%v), want at least %d", len(svcs), err, NumServices)
	}
	if v, err := st.GetValues(ctx, "http.method"); err != nil || len(v) == 0 {
		t.Errorf("GetValues(http.method) = %v, %v; want the generated methods", v, err)
	}
}

// TestStatPPID reads the parent of a /proc stat line whose command has spaces and parentheses,
// and finds this process among its parent's children.
func TestStatPPID(t *testing.T) {
	if n, ok := statPPID("42 (postgres: a (b) c) S 7 42 42 0 -1"); !ok || n != 7 {
		t.Errorf("statPPID = %d, %v; want 7", n, ok)
	}
	// Fields 3 to 17 after the command: cutime 300, cstime 200 ticks.
	if d := statReapedCPU("42 (x y) S 7 42 42 0 -1 0 0 0 0 0 10 20 300 200 20 0"); d != 5*time.Second {
		t.Errorf("statReapedCPU = %v, want 5s", d)
	}
	if _, ok := statPPID("garbage"); ok {
		t.Error("statPPID accepted a line without a command")
	}
	self, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if tree := treeCPU(os.Getppid()); tree < self {
		t.Errorf("treeCPU(parent) = %v, less than this child's own %v", tree, self)
	}
}
