package metrics_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/metrics"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/stmtname"
)

// TestAcquireReleaseAddsNoAllocation: a borrow and return on the fake driver allocates
// exactly as much with metrics on as with them off.
func TestAcquireReleaseAddsNoAllocation(t *testing.T) {
	allocs := func(events *pool.Trace) float64 {
		p, _ := newFakePool(t, pool.Config{Name: "allocs", MaxConns: 2, Trace: events})
		cycle := func() {
			c, err := p.Connect(bg)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		}
		cycle() // the first event of the pool sets up its handles
		return testing.AllocsPerRun(1000, cycle)
	}
	off := allocs(nil)
	on := allocs(newMetrics(t, metrics.Options{}).Trace())
	t.Logf("allocs per acquire+release: off %v, on %v", off, on)
	if on != off {
		t.Errorf("metrics add %v allocations per acquire+release (off %v, on %v)", on-off, off, on)
	}
}

// TestEventsAllocateNothing: every event method (pool.Trace), the statement timer on its three paths
// (named, parsed and cached, beyond the name cap) and the retry observer allocate nothing
// once a pool and a name have been seen.
func TestEventsAllocateNothing(t *testing.T) {
	m := newMetrics(t, metrics.Options{MaxStatementNames: 2})
	named := stmtname.With(bg, "get_user")
	deadlock := &mysql.MySQLError{Number: 1213}
	obs := m.RetryObserver("p")
	texts := make([]string, 100)
	for i := range texts {
		texts[i] = fmt.Sprintf("SELECT * FROM t%d", i) // 100 names, over the cap of 2
	}
	// More distinct texts than the per-pool text cache holds (4096): the last ones are parsed
	// on every execution, which must not allocate either.
	literals := make([]string, 6000)
	for i := range literals {
		literals[i] = fmt.Sprintf("SELECT * FROM users WHERE id = %d", i)
	}
	i := 0
	run := func() {
		m.Acquired("p", time.Millisecond)
		m.AcquireTimedOut("p", time.Second)
		m.Released("p", time.Millisecond)
		m.Created("p", time.Millisecond)
		m.Closed("p", pool.CloseFatalError)
		m.Validated(bg, "p", time.Millisecond, true)
		m.ReleasePlanRun("p", true, 3, true)
		m.LeakedStatementClosed("p")
		m.StatementDone(named, "p", "SELECT 1", time.Millisecond, nil)
		m.StatementDone(bg, "p", "SELECT * FROM users WHERE id = ?", time.Millisecond, deadlock)
		m.StatementDone(bg, "p", texts[i%len(texts)], time.Millisecond, nil)
		m.StatementDone(bg, "p", literals[len(literals)-1-i%1000], time.Millisecond, nil)
		obs.Attempt(0, 1)
		obs.Retry(0, 1, deadlock, 0)
		obs.Done(0, 1, nil)
		i++
	}
	for range texts {
		run() // warm up: every text seen once
	}
	for _, q := range literals {
		m.StatementDone(bg, "p", q, time.Millisecond, nil) // fill the text cache
	}
	if n := testing.AllocsPerRun(1000, run); n != 0 {
		t.Errorf("events allocate %v times per round", n)
	}
}

// TestStatementCardinality: 10,000 distinct SQL texts, through a pool, produce a bounded
// number of series, and no label holds SQL text or values.
func TestStatementCardinality(t *testing.T) {
	const limit = 50
	m := newMetrics(t, metrics.Options{MaxStatementNames: limit})
	p, _ := newFakePool(t, pool.Config{Name: "card", MaxConns: 2, Trace: m.Trace(), Logger: quiet})
	db := p.OpenDB()
	defer db.Close()
	for i := 0; i < 10000; i++ {
		for _, q := range []string{
			fmt.Sprintf("SELECT * FROM users WHERE id = %d AND name = 'n%d'", i, i),
			fmt.Sprintf("INSERT INTO t%d VALUES (%d)", i, i),
		} {
			if _, err := db.ExecContext(bg, q); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.ExecContext(stmtname.With(bg, fmt.Sprintf("name_%d", i)), "SELECT 1"); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"sqlpool_statement_seconds", "sqlpool_statement_seconds_max"} {
		if n := countSeries(t, m, name); n != limit+1 {
			t.Errorf("%s: %d series; want %d (the cap and \"other\")", name, n, limit+1)
		}
	}
	snap := m.Snapshot()
	total := uint64(0)
	for _, s := range snap.Statements {
		total += s.Count
		if len(s.Name) > metrics.MaxStatementNameLen || strings.ContainsAny(s.Name, "='()") || strings.Contains(s.Name, "WHERE") {
			t.Errorf("label %q holds SQL text", s.Name)
		}
	}
	if total != 30000 {
		t.Errorf("statements counted: %d; want 30000", total)
	}
	// The first texts got their own names: "select users" and the first tables.
	found := map[string]bool{}
	for _, s := range snap.Statements {
		found[s.Name] = true
	}
	for _, want := range []string{"select users", "insert t0", "name_0", "other"} {
		if !found[want] {
			t.Errorf("no series %q", want)
		}
	}
}

func countSeries(t *testing.T, m *metrics.Metrics, name string) int {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}
