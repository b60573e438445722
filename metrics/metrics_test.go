package metrics_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/sqlpool/sqlpool/metrics"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/retry"
	"github.com/sqlpool/sqlpool/stmtname"
)

// expo builds the expected exposition of one metric family for GatherAndCompare: the HELP
// text is taken from what m exposes (it is prose), the TYPE and the sample lines are the
// test's.
func expo(t *testing.T, g prometheus.Gatherer, name, typ string, samples ...string) string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	help := ""
	for _, mf := range mfs {
		if mf.GetName() == name {
			help = mf.GetHelp()
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	for _, s := range samples {
		b.WriteString(name + s + "\n")
	}
	return b.String()
}

// hist gives the sample lines of a histogram with buckets (le, cumulative count) pairs.
func hist(labels string, sum float64, count int, buckets ...any) []string {
	var out []string
	for i := 0; i < len(buckets); i += 2 {
		out = append(out, fmt.Sprintf(`_bucket{%s,le="%v"} %d`, labels, buckets[i], buckets[i+1]))
	}
	out = append(out, fmt.Sprintf(`_bucket{%s,le="+Inf"} %d`, labels, count))
	out = append(out, fmt.Sprintf("_sum{%s} %v", labels, sum), fmt.Sprintf("_count{%s} %d", labels, count))
	return out
}

// TestScriptedSequence drives a pool of one fake connection through borrows, a wait, a
// timeout, a dirty release, a probe, a fatal error and an eviction on a hand-moved clock,
// and checks every value exactly.
func TestScriptedSequence(t *testing.T) {
	clk := newTestClock()
	m := newMetrics(t, metricsClock(metrics.Options{
		AcquireBuckets:   []float64{0.5, 1.5, 5},
		UsageBuckets:     []float64{0.5, 1.5, 5},
		CreationBuckets:  []float64{0.5},
		StatementBuckets: []float64{0.5},
	}, clk))
	p, fc := newFakePool(t, poolClock(pool.Config{Name: "main", MaxConns: 1, Trace: m.Trace(), AcquireTimeout: 250 * time.Millisecond}, clk))
	m.MustRegister(p)
	clk.Advance(time.Second) // pool time 0 is stored as 1 ns ("not set" is 0): start later
	reg := m.Registry()
	compare := func(step string, want ...string) {
		t.Helper()
		var names []string
		for _, w := range want {
			names = append(names, strings.Fields(w)[2]) // "# HELP name ..."
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(strings.Join(want, "")), names...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	gauges := func(total, active, idle, pending int) []string {
		return []string{
			expo(t, reg, "hikaricp_connections", "gauge", fmt.Sprintf(`{pool="main"} %d`, total)),
			expo(t, reg, "hikaricp_connections_active", "gauge", fmt.Sprintf(`{pool="main"} %d`, active)),
			expo(t, reg, "hikaricp_connections_idle", "gauge", fmt.Sprintf(`{pool="main"} %d`, idle)),
			expo(t, reg, "hikaricp_connections_pending", "gauge", fmt.Sprintf(`{pool="main"} %d`, pending)),
			expo(t, reg, "hikaricp_connections_max", "gauge", `{pool="main"} 1`),
			expo(t, reg, "hikaricp_connections_min", "gauge", `{pool="main"} 1`),
		}
	}
	closed := func(counts map[string]int) string {
		var lines []string
		for _, r := range []string{"driver_invalid", "evicted", "fatal_error", "idle_timeout", "keepalive_failed",
			"max_lifetime", "pool_closed", "reset_failed", "validation_failed"} {
			lines = append(lines, fmt.Sprintf(`{pool="main",reason="%s"} %d`, r, counts[r]))
		}
		return expo(t, reg, "sqlpool_connections_closed_total", "counter", lines...)
	}
	const pm = `pool="main"`

	// New opened one connection (before Register: the event was kept).
	compare("New", append(gauges(1, 0, 1, 0),
		expo(t, reg, "hikaricp_connections_creation_seconds", "histogram", hist(pm, 0, 1, 0.5, 1)...),
		expo(t, reg, "hikaricp_connections_acquire_seconds", "histogram", hist(pm, 0, 0, 0.5, 0, 1.5, 0, 5, 0)...),
		expo(t, reg, "hikaricp_connections_timeout_total", "counter", `{pool="main"} 0`),
		closed(nil),
	)...)

	// A borrow that finds the idle connection waits 0.
	c1 := connect(t, p)
	compare("first borrow", append(gauges(1, 1, 0, 0),
		expo(t, reg, "hikaricp_connections_acquire_seconds", "histogram", hist(pm, 0, 1, 0.5, 1, 1.5, 1, 5, 1)...),
	)...)

	// A second borrower waits 2 s (pool time) for the first to return the connection.
	got := make(chan driver.Conn)
	startWaiter(t, p, clk, func() { c, err := p.Connect(bg); check(t, err); got <- c })
	compare("waiting", gauges(1, 1, 0, 1)...)
	clk.Advance(2 * time.Second)
	check(t, c1.Close())
	c2 := <-got
	compare("handed over after 2 s", append(gauges(1, 1, 0, 0),
		expo(t, reg, "hikaricp_connections_acquire_seconds", "histogram", hist(pm, 2, 2, 0.5, 1, 1.5, 1, 5, 2)...),
		expo(t, reg, "hikaricp_connections_acquire_seconds_max", "gauge", `{pool="main"} 2`),
		expo(t, reg, "hikaricp_connections_usage_seconds", "histogram", hist(pm, 2, 1, 0.5, 0, 1.5, 0, 5, 1)...),
		expo(t, reg, "hikaricp_connections_usage_seconds_max", "gauge", `{pool="main"} 2`),
	)...)

	// A third borrower gives up after waiting 1 s: a timeout, also observed as an acquire.
	done := make(chan error)
	startWaiter(t, p, clk, func() { _, err := p.Connect(bg); done <- err })
	clk.Advance(time.Second)
	if err := <-done; !errors.Is(err, pool.ErrAcquireTimeout) {
		t.Fatalf("third borrower: %v; want a timeout", err)
	}
	compare("timeout", append(gauges(1, 1, 0, 0),
		expo(t, reg, "hikaricp_connections_timeout_total", "counter", `{pool="main"} 1`),
		expo(t, reg, "hikaricp_connections_acquire_seconds", "histogram", hist(pm, 3, 3, 0.5, 1, 1.5, 2, 5, 3)...),
		expo(t, reg, "hikaricp_connections_acquire_seconds_max", "gauge", `{pool="main"} 2`),
	)...)

	// The second borrower leaves a transaction open and a statement unclosed: the release
	// rolls back and closes the statement. Statements are named by the caller or parsed.
	exec(c2, bg, "BEGIN")
	if _, err := c2.(driver.ConnPrepareContext).PrepareContext(bg, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	exec(c2, stmtname.With(bg, "get_user"), "SELECT * FROM users WHERE id = 1")
	check(t, c2.Close())
	compare("dirty release", append(gauges(1, 0, 1, 0),
		expo(t, reg, "hikaricp_connections_usage_seconds", "histogram", hist(pm, 3, 2, 0.5, 0, 1.5, 1, 5, 2)...),
		expo(t, reg, "sqlpool_release_plans_total", "counter", `{pool="main",result="failed"} 0`, `{pool="main",result="ok"} 1`),
		expo(t, reg, "sqlpool_release_rollbacks_total", "counter", `{pool="main"} 1`),
		expo(t, reg, "sqlpool_release_resets_total", "counter", `{pool="main"} 0`),
		expo(t, reg, "sqlpool_leaked_statements_closed_total", "counter", `{pool="main"} 1`),
	)...)

	// After the bypass window the next borrow probes the connection; a fatal error on it
	// closes it at release, and the creator replaces it.
	clk.Advance(time.Second)
	c3 := connect(t, p)
	fc.Conns()[0].FailNext(driver.ErrBadConn)
	exec(c3, bg, "UPDATE users SET name = 'x' WHERE id = 2")
	check(t, c3.Close())
	eventually(t, "the replacement", func() bool { return fc.Opens.Load() == 2 && p.Stats().Idle == 1 })

	// SoftEvict closes the idle connection; the creator replaces it.
	p.SoftEvict()
	eventually(t, "the refill after SoftEvict", func() bool { return fc.Opens.Load() == 3 && p.Stats().Idle == 1 })

	compare("end", append(gauges(1, 0, 1, 0),
		expo(t, reg, "hikaricp_connections_timeout_total", "counter", `{pool="main"} 1`),
		expo(t, reg, "hikaricp_connections_acquire_seconds", "histogram", hist(pm, 3, 4, 0.5, 2, 1.5, 3, 5, 4)...),
		expo(t, reg, "hikaricp_connections_acquire_seconds_max", "gauge", `{pool="main"} 2`),
		expo(t, reg, "hikaricp_connections_usage_seconds", "histogram", hist(pm, 3, 3, 0.5, 1, 1.5, 2, 5, 3)...),
		expo(t, reg, "hikaricp_connections_usage_seconds_max", "gauge", `{pool="main"} 2`),
		expo(t, reg, "hikaricp_connections_creation_seconds", "histogram", hist(pm, 0, 3, 0.5, 3)...),
		expo(t, reg, "hikaricp_connections_creation_seconds_max", "gauge", `{pool="main"} 0`),
		closed(map[string]int{"fatal_error": 1, "evicted": 1}),
		// The first and third borrows came more than AliveBypassWindow after the connection's
		// last use and were probed; the second, handed over at once, was not.
		expo(t, reg, "sqlpool_validations_total", "counter", `{pool="main",result="alive"} 2`, `{pool="main",result="dead"} 0`),
		// Stats().Acquires 3 (the timeout is not one) minus 2 successful probes.
		expo(t, reg, "sqlpool_validations_bypassed_total", "counter", `{pool="main"} 1`),
		expo(t, reg, "sqlpool_acquires_exhausted_total", "counter", `{pool="main"} 0`),
		expo(t, reg, "sqlpool_statement_cache_full_total", "counter", `{pool="main"} 0`),
		expo(t, reg, "sqlpool_statement_seconds", "histogram", slices.Concat(
			hist(`pool="main",statement="begin"`, 0, 1, 0.5, 1),
			hist(`pool="main",statement="get_user"`, 0, 1, 0.5, 1),
			hist(`pool="main",statement="update users"`, 0, 1, 0.5, 1))...),
		expo(t, reg, "sqlpool_statement_seconds_max", "gauge",
			`{pool="main",statement="begin"} 0`, `{pool="main",statement="get_user"} 0`, `{pool="main",statement="update users"} 0`),
		expo(t, reg, "sqlpool_statement_errors_total", "counter", `{class="fatal",pool="main",statement="update users"} 1`),
	)...)

	// The admin snapshot tells the same story.
	snap := m.Snapshot()
	if len(snap.Pools) != 1 {
		t.Fatalf("snapshot pools: %+v", snap.Pools)
	}
	ps := snap.Pools[0]
	if !ps.Registered || ps.Acquires != 3 || ps.Timeouts != 1 || ps.Created != 3 || ps.Closed != 2 ||
		ps.Acquire.Count != 4 || ps.Acquire.SumSeconds != 3 || ps.Acquire.MaxSeconds != 2 ||
		ps.ClosedBy["fatal_error"] != 1 || ps.ClosedBy["evicted"] != 1 {
		t.Errorf("snapshot pool: %+v", ps)
	}
	if len(snap.Statements) != 3 {
		t.Errorf("snapshot statements: %+v", snap.Statements)
	}
	for _, s := range snap.Statements {
		if s.Count != 1 || (s.Name == "update users") != (s.Errors["fatal"] == 1) {
			t.Errorf("snapshot statement: %+v", s)
		}
	}
}

// startWaiter runs connect on a goroutine and returns once it waits in the pool and has read
// the pool clock (its wait started), so that a clock advance counts in its wait.
func startWaiter(t *testing.T, p *pool.Pool, clk *testClock, connect func()) {
	t.Helper()
	r0 := clk.Reads()
	go connect()
	eventually(t, "a waiter", func() bool { return p.Stats().Waiting == 1 && clk.Reads() > r0 })
}

func connect(t *testing.T, p *pool.Pool) driver.Conn {
	t.Helper()
	c, err := p.Connect(bg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func exec(c driver.Conn, ctx context.Context, query string) {
	_, _ = c.(driver.ExecerContext).ExecContext(ctx, query, nil)
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Error(err)
	}
}

// allNames are every metric family m exposes, with its type and variable labels.
var allNames = map[string]struct {
	typ    dto.MetricType
	labels []string
}{
	"hikaricp_connections":                       {dto.MetricType_GAUGE, []string{"pool"}},
	"hikaricp_connections_active":                {dto.MetricType_GAUGE, []string{"pool"}},
	"hikaricp_connections_idle":                  {dto.MetricType_GAUGE, []string{"pool"}},
	"hikaricp_connections_pending":               {dto.MetricType_GAUGE, []string{"pool"}},
	"hikaricp_connections_max":                   {dto.MetricType_GAUGE, []string{"pool"}},
	"hikaricp_connections_min":                   {dto.MetricType_GAUGE, []string{"pool"}},
	"hikaricp_connections_timeout_total":         {dto.MetricType_COUNTER, []string{"pool"}},
	"hikaricp_connections_acquire_seconds":       {dto.MetricType_HISTOGRAM, []string{"pool"}},
	"hikaricp_connections_acquire_seconds_max":   {dto.MetricType_GAUGE, []string{"pool"}},
	"hikaricp_connections_usage_seconds":         {dto.MetricType_HISTOGRAM, []string{"pool"}},
	"hikaricp_connections_usage_seconds_max":     {dto.MetricType_GAUGE, []string{"pool"}},
	"hikaricp_connections_creation_seconds":      {dto.MetricType_HISTOGRAM, []string{"pool"}},
	"hikaricp_connections_creation_seconds_max":  {dto.MetricType_GAUGE, []string{"pool"}},
	"sqlpool_connections_closed_total":           {dto.MetricType_COUNTER, []string{"pool", "reason"}},
	"sqlpool_acquires_exhausted_total":           {dto.MetricType_COUNTER, []string{"pool"}},
	"sqlpool_validations_total":                  {dto.MetricType_COUNTER, []string{"pool", "result"}},
	"sqlpool_validations_bypassed_total":         {dto.MetricType_COUNTER, []string{"pool"}},
	"sqlpool_release_plans_total":                {dto.MetricType_COUNTER, []string{"pool", "result"}},
	"sqlpool_release_rollbacks_total":            {dto.MetricType_COUNTER, []string{"pool"}},
	"sqlpool_release_resets_total":               {dto.MetricType_COUNTER, []string{"pool"}},
	"sqlpool_leaked_statements_closed_total":     {dto.MetricType_COUNTER, []string{"pool"}},
	"sqlpool_statement_cache_full_total":         {dto.MetricType_COUNTER, []string{"pool"}},
	"sqlpool_cancels_total":                      {dto.MetricType_COUNTER, []string{"pool", "outcome"}},
	"sqlpool_statement_seconds":                  {dto.MetricType_HISTOGRAM, []string{"pool", "statement"}},
	"sqlpool_statement_seconds_max":              {dto.MetricType_GAUGE, []string{"pool", "statement"}},
	"sqlpool_statement_errors_total":             {dto.MetricType_COUNTER, []string{"pool", "statement", "class"}},
	"sqlpool_retry_attempts_total":               {dto.MetricType_COUNTER, []string{"pool", "op"}},
	"sqlpool_retries_total":                      {dto.MetricType_COUNTER, []string{"pool", "op"}},
	"sqlpool_retry_budget_exhausted_total":       {dto.MetricType_COUNTER, []string{"pool", "op"}},
	"sqlpool_retry_ambiguous_total":              {dto.MetricType_COUNTER, []string{"pool", "op"}},
	"sqlpool_retry_calls_total":                  {dto.MetricType_COUNTER, []string{"pool", "op", "result"}},
	"sqlpool_up":                                 {dto.MetricType_GAUGE, []string{"pool"}},
	"sqlpool_connect_errors_total":               {dto.MetricType_COUNTER, []string{"pool", "phase"}},
	"sqlpool_tenant_connections_held":            {dto.MetricType_GAUGE, []string{"pool", "tenant"}},
	"sqlpool_tenant_pending":                     {dto.MetricType_GAUGE, []string{"pool", "tenant"}},
	"sqlpool_tenant_acquires_total":              {dto.MetricType_COUNTER, []string{"pool", "tenant"}},
	"sqlpool_tenant_acquires_failed_total":       {dto.MetricType_COUNTER, []string{"pool", "tenant"}},
	"sqlpool_congested":                          {dto.MetricType_GAUGE, []string{"pool"}},
	"sqlpool_connections_limit":                  {dto.MetricType_GAUGE, []string{"pool"}},
	"sqlpool_connections_limit_baseline_seconds": {dto.MetricType_GAUGE, []string{"pool"}},
	"sqlpool_connections_limit_changes_total":    {dto.MetricType_COUNTER, []string{"pool"}},
	"sqlpool_acquires_shed_total":                {dto.MetricType_COUNTER, []string{"pool"}},
}

// TestEveryMetricPresent exercises every event once and checks that every family in allNames
// (and no other) is exposed with its type and labels, that promlint finds nothing, and that
// docs/metrics.md documents each.
func TestEveryMetricPresent(t *testing.T) {
	m := newMetrics(t, metrics.Options{ConstLabels: prometheus.Labels{"service": "test"}})
	p, _ := newFakePool(t, pool.Config{Name: "all", MaxConns: 2, Trace: m.Trace(), Tenants: map[string]pool.Tenant{"a": {Weight: 2}}})
	m.MustRegister(p)
	m.StatementDone(bg, "all", "SELECT 1", time.Millisecond, &mysql.MySQLError{Number: 1213})
	m.ServerCancelled("all", pool.CancelEnded, time.Millisecond)
	obs := m.RetryObserver("all")
	obs.Attempt(retry.OpDo, 1)
	obs.Retry(retry.OpDo, 1, errors.New("x"), 0)
	obs.BudgetExhausted(retry.OpTx, 1, errors.New("x"))
	obs.Ambiguous(retry.OpTx, 1, errors.New("x"))
	obs.Done(retry.OpDo, 1, nil)

	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		want, ok := allNames[mf.GetName()]
		if !ok {
			t.Errorf("unexpected metric %s", mf.GetName())
			continue
		}
		seen[mf.GetName()] = true
		if mf.GetType() != want.typ {
			t.Errorf("%s: type %v; want %v", mf.GetName(), mf.GetType(), want.typ)
		}
		for _, mt := range mf.GetMetric() {
			var labels []string
			for _, lp := range mt.GetLabel() {
				if lp.GetName() == "service" {
					if lp.GetValue() != "test" {
						t.Errorf("%s: const label service=%q", mf.GetName(), lp.GetValue())
					}
					continue
				}
				labels = append(labels, lp.GetName())
			}
			slices.Sort(labels)
			wantLabels := slices.Sorted(slices.Values(want.labels))
			if !slices.Equal(labels, wantLabels) {
				t.Errorf("%s: labels %v; want %v", mf.GetName(), labels, wantLabels)
			}
		}
	}
	for name := range allNames {
		if !seen[name] {
			t.Errorf("metric %s missing", name)
		}
		if n := testutil.CollectAndCount(m, name); n == 0 {
			t.Errorf("CollectAndCount(%s) = 0", name)
		}
	}
	problems, err := testutil.CollectAndLint(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("lint: %s: %s", pr.Metric, pr.Text)
	}
	doc := readDoc(t)
	for name := range allNames {
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("docs/metrics.md does not document %s", name)
		}
	}
}

func TestRetryObserver(t *testing.T) {
	m := newMetrics(t, metrics.Options{})
	obs := m.RetryObserver("main")
	deadlock := &mysql.MySQLError{Number: 1213, Message: "Deadlock found"}
	fast := retry.Policy{MaxAttempts: 3, BaseDelay: -1, Observer: obs,
		Budget: retry.NewBudget(retry.BudgetConfig{MinRetriesPerSec: 100})}

	// Deadlock twice, then success: 3 attempts, 2 retries, one ok call.
	n := 0
	if err := retry.Do(bg, fast, func(context.Context) error {
		if n++; n < 3 {
			return deadlock
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Deadlock every time: 3 attempts, 2 retries, one transient call.
	_ = retry.Do(bg, fast, func(context.Context) error { return deadlock })
	// A budget that grants nothing: 1 attempt, budget exhausted.
	none := fast
	none.Budget = retry.NewBudget(retry.BudgetConfig{MinRetriesPerSec: -1, Ratio: -1})
	_ = retry.Do(bg, none, func(context.Context) error { return deadlock })
	// 1180: ambiguous, not retried.
	_ = retry.Do(bg, fast, func(context.Context) error { return &mysql.MySQLError{Number: 1180} })
	// A syntax error: permanent.
	_ = retry.Do(bg, fast, func(context.Context) error { return &mysql.MySQLError{Number: 1064} })

	reg := m.Registry()
	want := strings.Join([]string{
		expo(t, reg, "sqlpool_retry_attempts_total", "counter", `{op="do",pool="main"} 9`, `{op="tx",pool="main"} 0`),
		expo(t, reg, "sqlpool_retries_total", "counter", `{op="do",pool="main"} 4`, `{op="tx",pool="main"} 0`),
		expo(t, reg, "sqlpool_retry_budget_exhausted_total", "counter", `{op="do",pool="main"} 1`, `{op="tx",pool="main"} 0`),
		expo(t, reg, "sqlpool_retry_ambiguous_total", "counter", `{op="do",pool="main"} 1`, `{op="tx",pool="main"} 0`),
		expo(t, reg, "sqlpool_retry_calls_total", "counter",
			`{op="do",pool="main",result="ambiguous"} 1`, `{op="do",pool="main",result="budget_exhausted"} 1`,
			`{op="do",pool="main",result="canceled"} 0`, `{op="do",pool="main",result="ok"} 1`,
			`{op="do",pool="main",result="permanent"} 1`, `{op="do",pool="main",result="transient"} 1`,
			`{op="tx",pool="main",result="ambiguous"} 0`, `{op="tx",pool="main",result="budget_exhausted"} 0`,
			`{op="tx",pool="main",result="canceled"} 0`, `{op="tx",pool="main",result="ok"} 0`,
			`{op="tx",pool="main",result="permanent"} 0`, `{op="tx",pool="main",result="transient"} 0`),
	}, "")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sqlpool_retry_attempts_total", "sqlpool_retries_total",
		"sqlpool_retry_budget_exhausted_total", "sqlpool_retry_ambiguous_total", "sqlpool_retry_calls_total"); err != nil {
		t.Fatal(err)
	}
}

// TestMaxWindow checks the _max gauges' window: a rotation at most once per read and at
// least 40 s (MaxWindow/3) after the previous one; a value stays for two rotations and is
// dropped at the third, so a value recorded in the last 80 s is always reported.
func TestMaxWindow(t *testing.T) {
	clk := newTestClock()
	m := newMetrics(t, metricsClock(metrics.Options{}, clk))
	maxOf := func() float64 {
		return m.Snapshot().Pools[0].Usage.MaxSeconds
	}
	step := func(d time.Duration, want float64) {
		t.Helper()
		clk.Advance(d)
		if got := maxOf(); got != want {
			t.Fatalf("max %v; want %v", got, want)
		}
	}
	m.Released("w", 3*time.Second)
	step(0, 3)
	step(40*time.Second, 3) // rotation 1 at 40 s
	clk.Advance(time.Second)
	m.Released("w", time.Second) // at 41 s
	step(20*time.Second, 3)      // 61 s: no rotation, 40 s have not passed
	step(19*time.Second, 3)      // rotation 2 at 80 s
	step(40*time.Second, 1)      // rotation 3 at 120 s: 3 s (from 0 s) dropped, 1 s (41 s) kept
	step(40*time.Second, 0)      // rotation 4 at 160 s: 1 s (41 s) dropped
	// Ten minutes without a read: a value recorded just before the next read is reported.
	clk.Advance(10 * time.Minute)
	// That read rotates (rotation 5), so the value is in two slots: kept for 80 s.
	m.Released("w", 5*time.Second)
	step(0, 5)
	step(40*time.Second, 5) // rotation 6
	step(40*time.Second, 0) // rotation 7
}

func TestRegisterUnregister(t *testing.T) {
	m := newMetrics(t, metrics.Options{})
	p, _ := newFakePool(t, pool.Config{Name: "dup", MaxConns: 1, Trace: m.Trace()})
	m.MustRegister(p)
	m.MustRegister(p) // the same pool again is fine
	q, _ := newFakePool(t, pool.Config{Name: "dup", MaxConns: 1})
	if err := m.Register(q); err == nil {
		t.Fatal("a second pool with the same name registered")
	}
	if n := testutil.CollectAndCount(m, "hikaricp_connections"); n != 1 {
		t.Fatalf("hikaricp_connections: %d series", n)
	}
	m.Unregister("dup")
	for _, name := range []string{"hikaricp_connections", "hikaricp_connections_creation_seconds", "sqlpool_connections_closed_total"} {
		if n := testutil.CollectAndCount(m, name); n != 0 {
			t.Errorf("%s after Unregister: %d series", name, n)
		}
	}
	if err := m.Register(q); err != nil {
		t.Fatal(err)
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := metrics.New(metrics.Options{MaxWindow: -1}); err == nil {
		t.Error("negative MaxWindow accepted")
	}
	if _, err := metrics.New(metrics.Options{ConstLabels: prometheus.Labels{"pool": "x"}}); err == nil {
		t.Error("ConstLabels with pool accepted")
	}
}

func TestErrorClass(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{driver.ErrBadConn, "fatal"},
		{&mysql.MySQLError{Number: 1053}, "fatal"},
		{fmt.Errorf("wrapped: %w", &mysql.MySQLError{Number: 1213}), "deadlock"},
		{errors.Join(errors.New("a"), &mysql.MySQLError{Number: 1205}), "lock_wait_timeout"},
		{&mysql.MySQLError{Number: 1062}, "duplicate"},
		{&mysql.MySQLError{Number: 1452}, "constraint"},
		{&mysql.MySQLError{Number: 1064}, "syntax"},
		{&mysql.MySQLError{Number: 1969}, "timeout"},
		{context.Canceled, "canceled"},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), "deadline_exceeded"},
		{&mysql.MySQLError{Number: 1146}, "other"},
		{errors.New("boom"), "other"},
	} {
		if got := metrics.ErrorClass(tc.err); got != tc.want {
			t.Errorf("ErrorClass(%v) = %q; want %q", tc.err, got, tc.want)
		}
	}
}

// TestCloseReasonThroughDatabaseSQL: a connection evicted while borrowed through database/sql
// is closed with reason evicted, as it is through Connect — not fatal_error, although
// database/sql calls IsValid (which refuses it) before Close.
func TestCloseReasonThroughDatabaseSQL(t *testing.T) {
	m := newMetrics(t, metrics.Options{})
	p, _ := newFakePool(t, pool.Config{Name: "r", MaxConns: 1, Trace: m.Trace()})
	db := p.OpenDB()
	defer db.Close()
	c, err := db.Conn(bg)
	if err != nil {
		t.Fatal(err)
	}
	p.SoftEvict()
	check(t, c.Close())
	eventually(t, "the refill", func() bool { return p.Stats().Idle == 1 })
	if got := m.Snapshot().Pools[0].ClosedBy; got["evicted"] != 1 || len(got) != 1 {
		t.Errorf("closed by %v; want evicted 1", got)
	}
}
