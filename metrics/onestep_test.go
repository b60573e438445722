package metrics_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sqlpool/sqlpool/metrics"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/retry"
)

// lazyFamilies are the families whose series appear with the first event of their label
// value, not before: a pool that never had a server-side cancel or a failed statement has none,
// and one without Config.Tenants no per-tenant series.
var lazyFamilies = map[string]bool{
	metrics.NameCancels:              true,
	metrics.NameStatementErrors:      true,
	metrics.NameTenantHeld:           true,
	metrics.NameTenantPending:        true,
	metrics.NameTenantAcquires:       true,
	metrics.NameTenantAcquiresFailed: true,
}

// The documented way to instrument a pool — m.Trace() in Config.Trace, and nothing else —
// serves every family of allNames (the list TestEveryMetricPresent checks against the
// descriptors and docs/metrics.md) for that pool, gauges and retry counters included, apart
// from lazyFamilies; the pool's retry observer counts under its name; the runtime collectors
// are served on request; closing the pool drops its gauges, and a new pool may take its name.
func TestOneStepInstrumentsEverything(t *testing.T) {
	m := newMetrics(t, metrics.Options{RuntimeCollectors: true})
	p, _ := newFakePool(t, pool.Config{Name: "shop", MaxConns: 2, Trace: m.Trace()}) // the one step
	db := p.OpenDB()
	defer db.Close()
	var one int
	if err := db.QueryRow("SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	// retry.Tx on the pool's DB, with no Observer in the Policy, counts through the pool's.
	if err := retry.Tx(bg, db, nil, retry.Policy{}, func(context.Context, *sql.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}

	body := scrape(t, m)
	served := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z_]+?)(?:_bucket|_sum|_count)?\{[^}]*pool="shop"`).FindAllStringSubmatch(body, -1) {
		served[m[1]] = true
	}
	// Every family m describes (its descriptor list), and every one of allNames.
	want := map[string]bool{}
	for name := range allNames {
		want[name] = true
	}
	descs := make(chan *prometheus.Desc, 256)
	m.Describe(descs)
	close(descs)
	fq := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for d := range descs {
		if sm := fq.FindStringSubmatch(d.String()); sm != nil {
			want[sm[1]] = true
		}
	}
	if len(want) < len(allNames) {
		t.Fatalf("%d families described; want at least %d", len(want), len(allNames))
	}
	for name := range want {
		if lazyFamilies[name] {
			continue
		}
		if !served[name] {
			t.Errorf("the documented way (Config.Trace: m.Trace()) serves no %s series for the pool", name)
		}
	}
	for _, want := range []string{`sqlpool_up{pool="shop"} 1`, `sqlpool_retry_calls_total{op="tx",pool="shop",result="ok"} 1`,
		`sqlpool_connect_errors_total{phase="dial",pool="shop"} 0`, "go_goroutines ", "process_"} {
		if want == "process_" && !processMetricsSupported() {
			continue
		}
		if !strings.Contains(body, want) {
			t.Errorf("the scrape has no %q", want)
		}
	}

	_ = db.Close()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if body := scrape(t, m); strings.Contains(body, `hikaricp_connections{pool="shop"}`) {
		t.Error("a closed pool's gauges are still served")
	}
	p2, _ := newFakePool(t, pool.Config{Name: "shop", MaxConns: 1, Trace: m.Trace()})
	if body := scrape(t, m); !strings.Contains(body, `hikaricp_connections_max{pool="shop"} 1`) {
		t.Errorf("a new pool named like a closed one has no gauges:\n%s", grep(body, "hikaricp_connections_max"))
	}
	_ = p2
}

// A pool that cannot connect reads sqlpool_up 0 and counts its failed attempts by phase.
func TestUpAndConnectErrors(t *testing.T) {
	m := newMetrics(t, metrics.Options{})
	p, fc := newFakePool(t, pool.Config{Name: "down", MaxConns: 1, Trace: m.Trace()})
	fc.SetDialError(errors.New("connection refused"))
	p.SoftEvict()
	ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel()
	if c, err := p.Connect(ctx); err == nil {
		_ = c.Close()
		t.Fatal("Connect succeeded against a database that refuses dials")
	}
	eventually(t, "the failed dial counted", func() bool { return !p.Stats().DownSince.IsZero() })
	body := scrape(t, m)
	for _, want := range []string{`sqlpool_up{pool="down"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape has no %q:\n%s", want, grep(body, "sqlpool_up|sqlpool_connect_errors"))
		}
	}
	if regexp.MustCompile(`sqlpool_connect_errors_total\{phase="handshake",pool="down"\} [1-9]`).FindString(body) == "" {
		t.Errorf("no handshake connect errors counted:\n%s", grep(body, "sqlpool_connect_errors"))
	}
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, err := io.ReadAll(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grep(body, pattern string) string {
	re := regexp.MustCompile(pattern)
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if re.MatchString(l) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// processMetricsSupported reports whether client_golang's process collector works here (it
// reads /proc on Linux).
func processMetricsSupported() bool {
	r := prometheus.NewRegistry()
	if err := r.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return false
	}
	mfs, err := r.Gather()
	return err == nil && len(mfs) > 0
}
