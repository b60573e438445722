package metrics_test

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sqlpool/sqlpool/metrics"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/stmtname"
)

func TestHandlers(t *testing.T) {
	m := newMetrics(t, metrics.Options{StatementBuckets: []float64{0.001, 0.01, 0.1}})
	for _, name := range []string{"a", "b"} {
		p, _ := newFakePool(t, pool.Config{Name: name, MaxConns: 2, Trace: m.Trace()})
		m.MustRegister(p)
	}
	// 100 statements on pool a: 50 at 0.5 ms, 49 at 5 ms, 1 at 50 ms.
	for i := 0; i < 100; i++ {
		d := 500 * time.Microsecond
		switch {
		case i == 99:
			d = 50 * time.Millisecond
		case i >= 50:
			d = 5 * time.Millisecond
		}
		m.StatementDone(stmtname.With(bg, "slow"), "a", "SELECT 1", d, nil)
	}
	m.StatementDone(bg, "a", "SELECT * FROM fast", time.Microsecond, nil)
	m.StatementDone(bg, "b", "SELECT * FROM other_pool", time.Microsecond, nil)

	srv := httptest.NewServer(m.AdminHandler())
	defer srv.Close()
	get := func(query string) metrics.Snapshot {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		var snap metrics.Snapshot
		if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
			t.Fatal(err)
		}
		return snap
	}
	snap := get("/")
	if len(snap.Pools) != 2 || snap.Pools[0].Name != "a" || snap.Pools[1].Name != "b" || snap.Pools[0].Total != 2 {
		t.Errorf("pools: %+v", snap.Pools)
	}
	if len(snap.Statements) != 3 || snap.Statements[0].Name != "slow" {
		t.Fatalf("statements: %+v", snap.Statements)
	}
	slow := snap.Statements[0]
	// p50 is the upper bound of the 1 ms bucket (rank 50 of 50 in it); p99 interpolates in
	// the 10 ms bucket: 1 ms + 9 ms × (99−50)/49 = 10 ms.
	if slow.Count != 100 || !near(slow.P50Seconds, 0.001) || !near(slow.P99Seconds, 0.01) ||
		!near(slow.MaxSeconds, 0.05) || !near(slow.SumSeconds, 0.025+0.245+0.05) {
		t.Errorf("slow: %+v", slow)
	}
	if s := get("/?pool=b"); len(s.Pools) != 1 || len(s.Statements) != 1 || s.Statements[0].Name != "select other_pool" {
		t.Errorf("pool=b: %+v", s)
	}
	if s := get("/?top=1"); len(s.Statements) != 1 || s.Statements[0].Name != "slow" {
		t.Errorf("top=1: %+v", s.Statements)
	}
	resp, err := srv.Client().Get(srv.URL + "/?top=x")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("top=x: status %d", resp.StatusCode)
	}

	prom := httptest.NewServer(m.Handler())
	defer prom.Close()
	resp, err = prom.Client().Get(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, want := range []string{`hikaricp_connections{pool="a"} 2`, `sqlpool_statement_seconds_count{pool="a",statement="slow"} 100`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// TestConcurrentUse borrows, runs statements and scrapes from many goroutines at once, for
// the race detector, and checks the counts add up.
func TestConcurrentUse(t *testing.T) {
	m := newMetrics(t, metrics.Options{MaxStatementNames: 20})
	p, _ := newFakePool(t, pool.Config{Name: "c", MaxConns: 4, Trace: m.Trace()})
	m.MustRegister(p)
	db := p.OpenDB()
	defer db.Close()
	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	scrapes := sync.WaitGroup{}
	scrapes.Add(1)
	go func() {
		defer scrapes.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := m.Registry().Gather(); err != nil {
				t.Error(err)
			}
			_ = m.Snapshot()
		}
	}()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				ctx := bg
				if i%2 == 0 {
					ctx = stmtname.With(bg, "n"+string(rune('a'+(w+i)%26)))
				}
				if _, err := db.ExecContext(ctx, "UPDATE t"+string(rune('a'+i%26))+" SET x = 1"); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	scrapes.Wait()
	var total uint64
	for _, s := range m.Snapshot().Statements {
		total += s.Count
	}
	if total != workers*rounds {
		t.Errorf("statements counted %d; want %d", total, workers*rounds)
	}
	if n := testutil.CollectAndCount(m, "sqlpool_statement_seconds"); n != 21 {
		t.Errorf("statement series %d; want 21", n)
	}
	if got := m.Snapshot().Pools[0].Acquire.Count; got != workers*rounds {
		t.Errorf("acquires observed %d; want %d", got, workers*rounds)
	}
}
