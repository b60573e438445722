package metrics_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/leakcheck"
	_ "github.com/sqlpool/sqlpool/mysqldialect" // MySQL's pool.Dialect, registered on import

	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/internal/testhook"
	"github.com/sqlpool/sqlpool/internal/testutil"
	"github.com/sqlpool/sqlpool/metrics"
	"github.com/sqlpool/sqlpool/pool"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}

// quiet drops the pool's log lines below errors.
var quiet = slog.New(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelError}))

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// testClock is a clock (testhook.Clock) that tests move by hand; it counts its reads so that a test can
// tell when a waiter has started its clock.
type testClock struct {
	mu    sync.Mutex
	now   time.Time
	reads int
}

func newTestClock() *testClock { return &testClock{now: time.Unix(1_700_000_000, 0)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return c.now
}

func (c *testClock) Reads() int { c.mu.Lock(); defer c.mu.Unlock(); return c.reads }

func (c *testClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// eventually polls cond for up to 10 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, what, cond)
}

// newFakePool returns a pool over fakedb with cfg, closed at the end of the test, once its
// connections (MinIdleConns, at least one) are all idle: tests that count connections must
// not race the creator.
func newFakePool(t testing.TB, cfg pool.Config) (*pool.Pool, *fakedb.Connector) {
	t.Helper()
	fc := fakedb.New()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	p, err := pool.New(fc, cfg)
	if err != nil {
		t.Fatalf("pool.New: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	eventually(t, "the pool filled", func() bool {
		st := p.Stats()
		return st.Idle == st.Total && st.Total >= max(p.Config().MinIdleConns, 1)
	})
	return p, fc
}

// metricsClock returns opts with the window clock set to clk.
func metricsClock(opts metrics.Options, clk testhook.Clock) metrics.Options {
	testhook.SetMetricsClock(&opts, clk)
	return opts
}

// poolClock returns cfg with the pool's clock set to clk.
func poolClock(cfg pool.Config, clk testhook.Clock) pool.Config {
	testhook.SetPoolClock(&cfg, clk)
	return cfg
}

func newMetrics(t testing.TB, opts metrics.Options) *metrics.Metrics {
	t.Helper()
	m, err := metrics.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var bg = context.Background()
