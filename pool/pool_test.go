package pool

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/internal/testutil"
)

// fakeClock is a clock (Config.testClock) that tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// quiet is a logger that drops everything below errors.
var quiet = slog.New(slog.NewTextHandler(ioDiscard{}, &slog.HandlerOptions{Level: slog.LevelError}))

type ioDiscard struct{}

func (ioDiscard) Write(b []byte) (int, error) { return len(b), nil }

// newPool returns a pool over a fake connector, closed at the end of the test.
func newPool(t testing.TB, cfg Config) (*Pool, *fakedb.Connector) {
	t.Helper()
	return newPoolOver(t, fakedb.New(), cfg)
}

// newPoolOver is newPool over fc, for tests that must set up faults before the creator's
// first dial (setting them after New races it).
func newPoolOver(t testing.TB, fc *fakedb.Connector, cfg Config) (*Pool, *fakedb.Connector) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	p, err := New(fc, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, fc
}

// eventually polls cond until it holds or 5 s pass. It is used only for background work (the
// creator) that has no event to wait on.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, what, cond)
}

func mustConnect(t testing.TB, p *Pool) *conn {
	t.Helper()
	c, err := p.Connect(context.Background())
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	return c.(*conn)
}

func TestNewRejectsNilConnector(t *testing.T) {
	p, err := New(nil, Config{})
	if err == nil || p != nil {
		t.Fatalf("New(nil) = %v, %v; want an error", p, err)
	}
	if !strings.Contains(err.Error(), "nil") {
		t.Errorf("error %q does not say the connector is nil", err)
	}
}

func TestConfigRules(t *testing.T) {
	h := time.Hour
	cases := []struct {
		name    string
		in      Config
		check   func(c Config) bool
		wantErr string
	}{
		{"zero value gives defaults", Config{}, func(c Config) bool {
			return c.MaxConns == 10 && c.MinIdleConns == 10 && c.AcquireTimeout == 30*time.Second &&
				c.ConnectTimeout == 30*time.Second && c.ValidationTimeout == 5*time.Second &&
				c.AliveBypassWindow == 500*time.Millisecond && c.IdleTimeout == 10*time.Minute &&
				c.MaxLifetime == 30*time.Minute && c.KeepaliveTime < 0 && c.LeakDetectionThreshold < 0 &&
				c.InitializationFailTimeout == time.Millisecond && c.housekeepingPeriod == 30*time.Second &&
				c.MaxWaiters == 0 && strings.HasPrefix(c.Name, "pool-") && c.Logger != nil && c.testClock != nil
		}, ""},
		{"zero LoginBackoffMax is 30s", Config{}, func(c Config) bool { return c.LoginBackoffMax == DefaultLoginBackoffMax }, ""},
		{"negative LoginBackoffMax is off", Config{LoginBackoffMax: -5}, func(c Config) bool { return c.LoginBackoffMax == -1 }, ""},
		{"negative MaxConns is an error", Config{MaxConns: -1}, nil, "MaxConns"},
		{"negative ValidationTimeout is an error", Config{ValidationTimeout: -1}, nil, "ValidationTimeout"},
		{"negative housekeepingPeriod is an error", Config{housekeepingPeriod: -1}, nil, "housekeepingPeriod"},
		{"MinIdleConns above MaxConns is lowered", Config{MaxConns: 4, MinIdleConns: 9}, func(c Config) bool { return c.MinIdleConns == 4 }, ""},
		{"negative MinIdleConns means none", Config{MinIdleConns: -1}, func(c Config) bool { return c.MinIdleConns == 0 }, ""},
		{"AcquireTimeout below 250ms is kept; the derived timeouts have floors", Config{AcquireTimeout: 100 * time.Millisecond}, func(c Config) bool {
			return c.AcquireTimeout == 100*time.Millisecond && c.ConnectTimeout == 250*time.Millisecond && c.ValidationTimeout == 125*time.Millisecond
		}, ""},
		{"AcquireTimeout of 1ns is kept", Config{AcquireTimeout: time.Nanosecond}, func(c Config) bool {
			return c.AcquireTimeout == time.Nanosecond && c.ConnectTimeout == 250*time.Millisecond && c.ValidationTimeout == 125*time.Millisecond
		}, ""},
		{"ValidationTimeout follows a short AcquireTimeout", Config{AcquireTimeout: 300 * time.Millisecond}, func(c Config) bool {
			return c.ConnectTimeout == 300*time.Millisecond && c.ValidationTimeout == 150*time.Millisecond
		}, ""},
		{"negative AcquireTimeout means ctx only", Config{AcquireTimeout: -1}, func(c Config) bool { return c.AcquireTimeout < 0 && c.ConnectTimeout == 30*time.Second }, ""},
		{"ConnectTimeout follows AcquireTimeout", Config{AcquireTimeout: 2 * time.Second}, func(c Config) bool { return c.ConnectTimeout == 2*time.Second }, ""},
		{"ValidationTimeout below floor is reset", Config{ValidationTimeout: time.Millisecond}, func(c Config) bool { return c.ValidationTimeout == 5*time.Second }, ""},
		{"ValidationTimeout not below AcquireTimeout is lowered", Config{AcquireTimeout: time.Second, ValidationTimeout: 2 * time.Second}, func(c Config) bool { return c.ValidationTimeout == 500*time.Millisecond }, ""},
		{"negative AliveBypassWindow validates always", Config{AliveBypassWindow: -1}, func(c Config) bool { return c.AliveBypassWindow < 0 }, ""},
		{"MaxLifetime below 30s is reset", Config{MaxLifetime: time.Second}, func(c Config) bool { return c.MaxLifetime == 30*time.Minute }, ""},
		{"negative MaxLifetime is unlimited", Config{MaxLifetime: -1}, func(c Config) bool { return c.MaxLifetime < 0 }, ""},
		{"IdleTimeout below 10s is reset when it applies", Config{MinIdleConns: -1, IdleTimeout: time.Second}, func(c Config) bool { return c.IdleTimeout == 10*time.Minute }, ""},
		{"IdleTimeout near MaxLifetime is off", Config{MinIdleConns: -1, IdleTimeout: h, MaxLifetime: h}, func(c Config) bool { return c.IdleTimeout < 0 }, ""},
		{"KeepaliveTime below 30s is off", Config{KeepaliveTime: time.Second}, func(c Config) bool { return c.KeepaliveTime < 0 }, ""},
		{"KeepaliveTime not below MaxLifetime is off", Config{KeepaliveTime: h, MaxLifetime: h}, func(c Config) bool { return c.KeepaliveTime < 0 }, ""},
		{"KeepaliveTime in range is kept", Config{KeepaliveTime: time.Minute}, func(c Config) bool { return c.KeepaliveTime == time.Minute }, ""},
		{"LeakDetectionThreshold below 2s is off", Config{LeakDetectionThreshold: time.Second}, func(c Config) bool { return c.LeakDetectionThreshold < 0 }, ""},
		{"LeakDetectionThreshold above MaxLifetime is off", Config{LeakDetectionThreshold: h, MaxLifetime: time.Minute}, func(c Config) bool { return c.LeakDetectionThreshold < 0 }, ""},
		{"negative InitializationFailTimeout skips the check", Config{InitializationFailTimeout: -1}, func(c Config) bool { return c.InitializationFailTimeout < 0 }, ""},
		{"negative CloseTimeout does not wait", Config{CloseTimeout: -1}, func(c Config) bool { return c.CloseTimeout == 0 }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			tc.in.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			got, err := tc.in.resolved()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("resolved() error = %v; want one naming %s", err, tc.wantErr)
				}
				_, nerr := New(fakedb.New(), tc.in)
				if nerr == nil {
					t.Fatalf("New accepted %+v", tc.in)
				}
				return
			}
			if err != nil {
				t.Fatalf("resolved() error = %v", err)
			}
			if !tc.check(got) {
				t.Fatalf("resolved() = %+v", got)
			}
		})
	}
}

// An AcquireTimeout below HikariCP's 250 ms floor is honoured: a wait ends after it, not after
// the 30 s HikariCP would put in its place, and New logs no fix-up for it.
func TestShortAcquireTimeoutHonoured(t *testing.T) {
	const short = 50 * time.Millisecond
	var logs syncBuffer
	p, _ := newPool(t, Config{MaxConns: 1, AcquireTimeout: short, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if got := p.Config().AcquireTimeout; got != short {
		t.Fatalf("Config().AcquireTimeout = %v, want %v", got, short)
	}
	held := mustConnect(t, p)
	defer held.Close()
	start := time.Now()
	_, err := p.Connect(context.Background())
	elapsed := time.Since(start)
	var te *AcquireTimeoutError
	if !errors.As(err, &te) || te.CtxDeadline {
		t.Fatalf("Connect with the only connection held = %v; want an *AcquireTimeoutError from AcquireTimeout", err)
	}
	if te.Waited < short || elapsed > 10*time.Second {
		t.Fatalf("the wait ended after %v (Waited %v); want %v", elapsed, te.Waited, short)
	}
	if strings.Contains(logs.String(), "field=AcquireTimeout") {
		t.Fatalf("New fixed up the AcquireTimeout: %s", logs.String())
	}
}

// A short AcquireTimeout does not turn the creator's backoff into a dial storm: the cap on its
// backoff (half of AcquireTimeout) does not go below 125 ms.
func TestShortAcquireTimeoutBackoffFloor(t *testing.T) {
	fc := fakedb.New()
	fc.SetDialError(errors.New("connection refused"))
	newPoolOver(t, fc, Config{MaxConns: 1, AcquireTimeout: time.Millisecond, InitializationFailTimeout: -1})
	// The window is what is measured: 10+20+40+80 ms, then 125 ms apart, is 8 dials in 600 ms;
	// a cap of half the AcquireTimeout (0.5 ms) would be hundreds.
	time.Sleep(600 * time.Millisecond)
	if n := fc.Dials.Load(); n < 2 || n > 20 {
		t.Fatalf("%d dials in 600 ms against a refusing server; want the backoff (8 or so)", n)
	}
}

func TestConfigFixUpIsLogged(t *testing.T) {
	var logs bytes.Buffer
	_, err := Config{MaxLifetime: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))}.resolved()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "field=MaxLifetime") {
		t.Fatalf("no warning naming MaxLifetime in %q", logs.String())
	}
}

func TestClosedPoolReturnsErrClosed(t *testing.T) {
	p, fc := newPool(t, Config{MaxConns: 2})
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := p.Connect(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Connect after Close = %v; want ErrClosed", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close = %v; want nil", err)
	}
	if n := fc.Open(); n != 0 {
		t.Fatalf("%d fake connections still open after Close", n)
	}
}

// Invariant 4: total never exceeds MaxConns, under churn with evictions and slow dials.
func TestTotalNeverExceedsMaxConns(t *testing.T) {
	const max = 4
	p, fc := newPool(t, Config{MaxConns: max, MinIdleConns: -1, AcquireTimeout: 5 * time.Second})
	fc.SetDialDelay(200 * time.Microsecond)
	stop := make(chan struct{})
	var peak atomic.Int64
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			n := fc.Open()
			if n > peak.Load() {
				peak.Store(n)
			}
			if s := p.Stats(); s.Total > max {
				t.Errorf("Stats().Total = %d > MaxConns %d", s.Total, max)
			}
		}
	}()
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				c, err := p.Connect(context.Background())
				if err != nil {
					t.Errorf("Connect: %v", err)
					return
				}
				if i%17 == g%17 {
					c.(*conn).e.conn.(*fakedb.Conn).Break()
				}
				_ = c.Close()
			}
		}(g)
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	if peak.Load() > max {
		t.Fatalf("peak open connections %d > MaxConns %d", peak.Load(), max)
	}
}

// Invariant 4: waiters are served in arrival order.
func TestWaitersServedInArrivalOrder(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1})
	held := mustConnect(t, p)
	const n = 5
	order := make(chan int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := p.Connect(context.Background())
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			order <- i
			_ = c.Close()
		}(i)
		eventually(t, fmt.Sprintf("waiter %d is queued", i), func() bool { return p.Stats().Waiting == i+1 })
	}
	_ = held.Close()
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Fatalf("waiter %d served before waiter %d", got, want)
		}
		want++
	}
}

// Invariant 4: an acquire fails at its deadline with ErrAcquireTimeout naming the pool, the
// counts and the last connection error.
func TestAcquireTimeout(t *testing.T) {
	p, fc := newPool(t, Config{Name: "orders", MaxConns: 1, AcquireTimeout: 300 * time.Millisecond})
	held := mustConnect(t, p)
	defer held.Close()
	fc.SetDialError(errors.New("dial tcp 10.0.0.1:3306: connect: connection refused"))
	p.setLastError(errors.New("dial tcp 10.0.0.1:3306: connect: connection refused"))

	start := time.Now()
	_, err := p.Connect(context.Background())
	waited := time.Since(start)
	if !errors.Is(err, ErrAcquireTimeout) {
		t.Fatalf("Connect = %v; want ErrAcquireTimeout", err)
	}
	if waited < 300*time.Millisecond || waited > 3*time.Second {
		t.Errorf("failed after %v; want at AcquireTimeout (300ms), loosely", waited)
	}
	for _, want := range []string{"orders", "total=1", "active=1", "idle=0", "waiting=1", "connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	var te *AcquireTimeoutError
	if !errors.As(err, &te) || te.LastErr == nil {
		t.Errorf("error is not an *AcquireTimeoutError with LastErr: %#v", err)
	}
	if p.Stats().Timeouts != 1 {
		t.Errorf("Stats().Timeouts = %d; want 1", p.Stats().Timeouts)
	}
}

func TestAcquireCtxDeadlineAndCancel(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1})
	held := mustConnect(t, p)
	defer held.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := p.Connect(ctx)
	if !errors.Is(err, ErrAcquireTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Connect with expiring ctx = %v; want ErrAcquireTimeout and DeadlineExceeded", err)
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() {
		eventually(t, "the waiter is queued", func() bool { return p.Stats().Waiting == 1 })
		cancel2()
	}()
	_, err = p.Connect(ctx2)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrAcquireTimeout) {
		t.Fatalf("Connect with cancelled ctx = %v; want context.Canceled only", err)
	}
	if s := p.Stats(); s.Waiting != 0 {
		t.Fatalf("Waiting = %d after the waiters left", s.Waiting)
	}
	// The held connection still goes to the next borrower.
	_ = held.Close()
	c := mustConnect(t, p)
	_ = c.Close()
}

func TestMaxWaitersGivesErrPoolExhausted(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1, MaxWaiters: 1})
	held := mustConnect(t, p)
	defer held.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := p.Connect(ctx); done <- err }()
	eventually(t, "one waiter is queued", func() bool { return p.Stats().Waiting == 1 })
	start := time.Now()
	if _, err := p.Connect(context.Background()); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("second waiter: %v; want ErrPoolExhausted", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("ErrPoolExhausted took %v; want at once", d)
	}
	cancel()
	<-done

	p2, _ := newPool(t, Config{MaxConns: 1, MaxWaiters: -1})
	h2 := mustConnect(t, p2)
	defer h2.Close()
	if _, err := p2.Connect(context.Background()); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("MaxWaiters<0: %v; want ErrPoolExhausted", err)
	}
}

// Invariant 3: a connection that saw a fatal error is never handed out again.
func TestFatalErrorEvicts(t *testing.T) {
	fatalErrs := []error{
		driver.ErrBadConn,
		&net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")},
		fmt.Errorf("wrapped: %w", driver.ErrBadConn),
	}
	for _, ferr := range fatalErrs {
		t.Run(ferr.Error(), func(t *testing.T) {
			p, _ := newPool(t, Config{MaxConns: 1})
			c := mustConnect(t, p)
			first := c.e.conn.(*fakedb.Conn)
			first.FailNext(ferr)
			if _, err := c.ExecContext(context.Background(), "SELECT 1", nil); err == nil {
				t.Fatal("ExecContext succeeded; the fake should have failed it")
			}
			_ = c.Close()
			if !first.Closed() {
				t.Fatal("connection that saw a fatal error was not closed on release")
			}
			c2 := mustConnect(t, p)
			defer c2.Close()
			if c2.e.conn == driver.Conn(first) {
				t.Fatal("connection that saw a fatal error was handed out again")
			}
		})
	}
}

func TestNonFatalErrorKeepsConnection(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1})
	c := mustConnect(t, p)
	first := c.e.conn.(*fakedb.Conn)
	first.FailNext(errors.New("Error 1062 (23000): Duplicate entry"))
	_, _ = c.ExecContext(context.Background(), "INSERT INTO t VALUES (1)", nil)
	_ = c.Close()
	c2 := mustConnect(t, p)
	defer c2.Close()
	if c2.e.conn != driver.Conn(first) {
		t.Fatal("a non-fatal error evicted the connection")
	}
}

// vetoDialect is MySQL's dialect with driver.ErrBadConn classified not fatal: how a program
// vetoes (or adds to) a dialect's decision that an error is fatal.
type vetoDialect struct{ Dialect }

func (d vetoDialect) Classify(err error, s ErrorContext) ErrorClass {
	if errors.Is(err, driver.ErrBadConn) {
		return ErrorClass{}
	}
	return d.Dialect.Classify(err, s)
}

func TestClassifyOverrideVetoes(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1, Dialect: vetoDialect{mysqlDialect(t)}})
	c := mustConnect(t, p)
	first := c.e.conn.(*fakedb.Conn)
	first.FailNext(driver.ErrBadConn)
	_, _ = c.ExecContext(context.Background(), "SELECT 1", nil)
	_ = c.Close()
	if first.Closed() {
		t.Fatal("Classify vetoed the eviction, but the connection was closed")
	}
}

func TestBypassWindowAndValidation(t *testing.T) {
	clk := newFakeClock()
	p, fc := newPool(t, Config{MaxConns: 1, testClock: clk})
	c := mustConnect(t, p)
	_ = c.Close()
	pings := fc.Pings.Load()

	clk.Advance(100 * time.Millisecond)
	c = mustConnect(t, p)
	_ = c.Close()
	if fc.Pings.Load() != pings {
		t.Fatal("a connection returned 100ms ago was probed; the bypass window is 500ms")
	}

	clk.Advance(600 * time.Millisecond)
	c = mustConnect(t, p)
	_ = c.Close()
	if fc.Pings.Load() != pings+1 {
		t.Fatalf("pings = %d; want one probe for a connection idle 600ms", fc.Pings.Load()-pings)
	}
	if s := p.Stats(); s.Validations != 1 {
		t.Fatalf("Stats().Validations = %d; want 1", s.Validations)
	}
}

func TestDeadConnectionReplacedWithinDeadline(t *testing.T) {
	clk := newFakeClock()
	p, fc := newPool(t, Config{MaxConns: 2, testClock: clk, AcquireTimeout: 2 * time.Second})
	eventually(t, "two idle connections", func() bool { return p.Stats().Idle == 2 })
	// Both idle connections are now dead and past the bypass window; new ones are fresh.
	fc.SetPingError(driver.ErrBadConn)
	clk.Advance(time.Second)
	c, err := p.Connect(context.Background())
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer c.Close()
	if id := c.(*conn).e.conn.(*fakedb.Conn).ID; id <= 2 {
		t.Fatalf("got connection %d, one that failed its probe", id)
	}
	if s := p.Stats(); s.ProbeFailures < 1 || s.LastError == nil || !errors.Is(s.LastError, driver.ErrBadConn) {
		t.Fatalf("stats after a dead connection: %+v", s)
	}
}

func TestValidationTimeoutBoundsProbe(t *testing.T) {
	clk := newFakeClock()
	p, fc := newPool(t, Config{MaxConns: 1, testClock: clk, AcquireTimeout: time.Second, ValidationTimeout: 300 * time.Millisecond})
	eventually(t, "one idle connection", func() bool { return p.Stats().Idle == 1 })
	fc.SetPingBlock(true)
	fc.SetDialError(errors.New("connection refused"))
	clk.Advance(time.Second)
	start := time.Now()
	c, err := p.Connect(context.Background())
	if !errors.Is(err, ErrAcquireTimeout) {
		if c != nil {
			_ = c.Close()
		}
		t.Fatalf("Connect = %v; want ErrAcquireTimeout", err)
	}
	if d := time.Since(start); d < time.Second || d > 5*time.Second {
		t.Fatalf("acquire with hanging probes ended after %v; want ~AcquireTimeout (1s)", d)
	}
}

// Invariant 5.
func TestCloseWaitsForInUseAndNamesThem(t *testing.T) {
	fc := fakedb.New()
	p, err := New(fc, Config{MaxConns: 3, CloseTimeout: 200 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "pool filled", func() bool { return p.Stats().Idle == 3 })
	held := mustConnect(t, p)
	start := time.Now()
	err = p.Close()
	if err == nil || !strings.Contains(err.Error(), "1 connection(s) still in use") {
		t.Fatalf("Close = %v; want an error naming the connection still out", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("Close returned after %v; want it to wait CloseTimeout", d)
	}
	if n := fc.Open(); n != 1 {
		t.Fatalf("%d connections open after Close; want only the one in use", n)
	}
	_ = held.Close()
	if n := fc.Open(); n != 0 {
		t.Fatalf("connection returned after Close was not closed (%d open)", n)
	}
}

func TestCloseReturnsWhenLastConnectionComesBack(t *testing.T) {
	fc := fakedb.New()
	p, err := New(fc, Config{MaxConns: 2, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	held := mustConnect(t, p)
	go func() { // no t.Fatal here: a failure shows as p.Close not returning
		for !p.closed.Load() {
			time.Sleep(time.Millisecond)
		}
		_ = held.Close()
	}()
	if err := p.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if n := fc.Open(); n != 0 {
		t.Fatalf("%d connections open after Close", n)
	}
}

func TestCloseWakesWaiters(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1, CloseTimeout: -1})
	held := mustConnect(t, p)
	done := make(chan error, 1)
	go func() { _, err := p.Connect(context.Background()); done <- err }()
	eventually(t, "waiter queued", func() bool { return p.Stats().Waiting == 1 })
	_ = p.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("waiter got %v; want ErrClosed", err)
	}
	_ = held.Close()
}

func TestSuspendResume(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1, AcquireTimeout: 300 * time.Millisecond})
	p.Suspend()
	start := time.Now()
	if _, err := p.Connect(context.Background()); !errors.Is(err, ErrAcquireTimeout) {
		t.Fatalf("suspended Connect = %v; want ErrAcquireTimeout at its deadline", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("suspended Connect ended after %v; before its deadline", d)
	}
	got := make(chan error, 1)
	go func() {
		c, err := p.Connect(context.Background())
		if err == nil {
			_ = c.Close()
		}
		got <- err
	}()
	p.Resume()
	if err := <-got; err != nil {
		t.Fatalf("Connect after Resume = %v", err)
	}
}

func TestSoftEvict(t *testing.T) {
	p, fc := newPool(t, Config{MaxConns: 2})
	eventually(t, "pool filled", func() bool { return p.Stats().Idle == 2 })
	held := mustConnect(t, p)
	heldConn := held.e.conn.(*fakedb.Conn)
	p.SoftEvict()
	if got := fc.Closes.Load(); got != 1 {
		t.Fatalf("SoftEvict closed %d connections; want the idle one", got)
	}
	if heldConn.Closed() {
		t.Fatal("SoftEvict closed a connection in use")
	}
	_ = held.Close()
	if !heldConn.Closed() {
		t.Fatal("an evicted connection was not closed on return")
	}
	eventually(t, "the creator refilled", func() bool { return p.Stats().Idle == 2 })
}

func TestMinIdleFillAndIdleTimeout(t *testing.T) {
	clk := newFakeClock()
	p, fc := newPool(t, Config{MaxConns: 4, MinIdleConns: 2, testClock: clk, IdleTimeout: time.Minute})
	eventually(t, "MinIdleConns filled", func() bool { return p.Stats().Idle == 2 })
	// Borrow four, so the pool grows to MaxConns, then return them.
	var cs []*conn
	for i := 0; i < 4; i++ {
		cs = append(cs, mustConnect(t, p))
	}
	for _, c := range cs {
		_ = c.Close()
	}
	if s := p.Stats(); s.Total != 4 || s.Idle != 4 {
		t.Fatalf("stats %+v; want 4 idle", s)
	}
	clk.Advance(30 * time.Second)
	p.housekeep()
	if p.Stats().Total != 4 {
		t.Fatal("connections idle 30s retired with IdleTimeout 1m")
	}
	clk.Advance(31 * time.Second)
	p.housekeep()
	if s := p.Stats(); s.Total != 2 || fc.Open() != 2 {
		t.Fatalf("after IdleTimeout: %+v, %d open; want MinIdleConns (2) kept", s, fc.Open())
	}
}

func TestMaxLifetimeWithJitter(t *testing.T) {
	clk := newFakeClock()
	p, fc := newPool(t, Config{MaxConns: 2, testClock: clk, MaxLifetime: time.Minute})
	eventually(t, "pool filled", func() bool { return p.Stats().Idle == 2 })
	held := mustConnect(t, p)
	for _, e := range p.snapshot() {
		life := time.Duration(e.expiresAt - e.createdAt)
		if life > time.Minute || life < time.Minute-time.Minute/40 {
			t.Fatalf("lifetime %v; want MaxLifetime minus at most 2.5%%", life)
		}
	}
	clk.Advance(58 * time.Second)
	p.housekeep()
	if fc.Closes.Load() != 0 {
		t.Fatal("connection closed before 97.5% of MaxLifetime")
	}
	clk.Advance(3 * time.Second)
	p.housekeep()
	if fc.Closes.Load() != 1 {
		t.Fatalf("closes = %d; want the expired idle connection closed", fc.Closes.Load())
	}
	_ = held.Close()
	if fc.Closes.Load() != 2 {
		t.Fatal("an expired connection in use was not closed on return")
	}
}

func TestKeepalive(t *testing.T) {
	clk := newFakeClock()
	p, fc := newPool(t, Config{MaxConns: 1, testClock: clk, KeepaliveTime: time.Minute})
	eventually(t, "pool filled", func() bool { return p.Stats().Idle == 1 })
	clk.Advance(30 * time.Second)
	p.housekeep()
	if fc.Pings.Load() != 0 {
		t.Fatal("keepalive ping before KeepaliveTime")
	}
	clk.Advance(31 * time.Second)
	p.housekeep()
	if fc.Pings.Load() != 1 {
		t.Fatalf("pings = %d; want one keepalive", fc.Pings.Load())
	}
	if p.Stats().Idle != 1 {
		t.Fatal("keepalive did not put the connection back")
	}
	fc.SetPingError(driver.ErrBadConn)
	clk.Advance(61 * time.Second)
	p.housekeep()
	if fc.Closes.Load() != 1 {
		t.Fatal("a connection that failed keepalive was not closed")
	}
}

func TestLeakDetection(t *testing.T) {
	var logs syncBuffer
	p, _ := newPool(t, Config{MaxConns: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	p.cfg.LeakDetectionThreshold = 20 * time.Millisecond // below the floor, for the test only
	c := mustConnect(t, p)
	eventually(t, "leak warning", func() bool { return strings.Contains(logs.String(), "leak detection triggered") })
	if !strings.Contains(logs.String(), "TestLeakDetection") {
		t.Errorf("leak warning has no borrower stack: %s", logs.String())
	}
	_ = c.Close()
	if !strings.Contains(logs.String(), "previously reported leaked connection was returned") {
		t.Errorf("no info line when the leaked connection came back: %s", logs.String())
	}
	if n := strings.Count(logs.String(), "leak detection triggered"); n != 1 {
		t.Errorf("%d leak warnings; want 1", n)
	}
}

// syncBuffer collects log output safely.
type syncBuffer = testutil.Buffer

func TestInitializationFailTimeout(t *testing.T) {
	fc := fakedb.New()
	fc.SetDialError(errors.New("connection refused"))
	if _, err := New(fc, Config{Logger: quiet}); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("New with an unreachable database = %v; want the dial error", err)
	}
	p, err := New(fc, Config{Logger: quiet, InitializationFailTimeout: -1})
	if err != nil {
		t.Fatalf("New with InitializationFailTimeout<0 = %v; want a pool", err)
	}
	fc.SetDialError(nil)
	c := mustConnect(t, p)
	_ = c.Close()
	_ = p.Close()

	initErr := errors.New("SET sql_mode failed")
	fc2 := fakedb.New()
	start := time.Now()
	_, err = New(fc2, Config{Logger: quiet, InitializationFailTimeout: time.Minute,
		Hooks: Hooks{AfterConnect: func(context.Context, HookConn) error { return initErr }}})
	if !errors.Is(err, initErr) || time.Since(start) > 10*time.Second {
		t.Fatalf("New with a failing AfterConnect = %v after %v; want that error at once", err, time.Since(start))
	}
	if fc2.Open() != 0 {
		t.Fatal("a connection whose AfterConnect failed was left open")
	}
}

func TestCreatorBacksOffAndRecovers(t *testing.T) {
	fc := fakedb.New()
	fc.SetDialError(errors.New("connection refused")) // before New: the creator dials at once
	p, _ := newPoolOver(t, fc, Config{MaxConns: 1, InitializationFailTimeout: -1, AcquireTimeout: 5 * time.Second})
	eventually(t, "a few failed dials", func() bool { return fc.Dials.Load() >= 3 })
	eventually(t, "the dial error recorded", func() bool { return p.Stats().LastError != nil })
	if err := p.Stats().LastError; !strings.Contains(err.Error(), "refused") {
		t.Fatalf("LastError = %v", err)
	}
	fc.SetDialError(nil)
	c := mustConnect(t, p)
	_ = c.Close()
	// A connection was opened since: the pool is no longer failing (as HikariCP).
	if err := p.Stats().LastError; err != nil {
		t.Fatalf("LastError = %v after a successful dial; want nil", err)
	}
}

// Invariant 6 and the Raw path.
func TestUnwrapReachesDriverConnAndForcesReset(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1})
	db := p.OpenDB()
	defer db.Close()
	ctx := context.Background()
	sc, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got driver.Conn
	err = sc.Raw(func(dc any) error {
		got = Unwrap(dc)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.(*fakedb.Conn); !ok {
		t.Fatalf("Unwrap gave %T; want the driver's *fakedb.Conn", got)
	}
	_ = sc.Close()
	if p.Stats().ReleasePlans != 1 {
		t.Fatalf("ReleasePlans = %d; Raw use must force a reset on release", p.Stats().ReleasePlans)
	}
}

// The database/sql round trip through both ways in: p.OpenDB() and sql.OpenDB(p).
func TestDBRoundTrip(t *testing.T) {
	for _, way := range []string{"sql.OpenDB", "OpenDB"} {
		t.Run(way, func(t *testing.T) {
			p, fc := newPool(t, Config{MaxConns: 2})
			var db *sql.DB
			if way == "sql.OpenDB" {
				db = sql.OpenDB(p)
			} else {
				db = p.OpenDB()
			}
			ctx := context.Background()
			for i := 0; i < 20; i++ {
				var n int
				if err := db.QueryRowContext(ctx, "SELECT ?", i).Scan(&n); err != nil || n != i {
					t.Fatalf("query %d: %d, %v", i, n, err)
				}
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tx.ExecContext(ctx, "INSERT INTO t VALUES (1)"); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			if s := p.Stats(); s.Total > 2 || s.ReleasePlans != 0 {
				t.Fatalf("stats %+v; want at most 2 connections and no release plans", s)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if way == "sql.OpenDB" {
				if !p.closed.Load() {
					t.Fatal("closing sql.OpenDB(p) did not close the pool")
				}
			} else if p.closed.Load() {
				t.Fatal("closing p.OpenDB() closed the pool")
			}
			_ = p.Close()
			if fc.Open() != 0 {
				t.Fatalf("%d connections open after closing DB and pool", fc.Open())
			}
		})
	}
}

// A connection parked in the idle list of a DB from OpenDB that the pool marks is not used
// again: ResetSession refuses it, and database/sql closes it and takes a new one.
func TestParkedConnHonoursEviction(t *testing.T) {
	p, fc := newPool(t, Config{MaxConns: 1})
	db := p.OpenDB()
	defer db.Close()
	ctx := context.Background()
	if err := db.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Idle != 1 || s.Active != 0 {
		t.Fatalf("a connection parked in database/sql should count as idle: %+v", s)
	}
	first := fc.Conns()[0]
	p.SoftEvict()
	if err := db.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	if !first.Closed() {
		t.Fatal("a marked connection parked in database/sql was reused")
	}
	if s := p.Stats(); s.Total != 1 {
		t.Fatalf("stats %+v; want the replacement only", s)
	}
}

func TestOpenTransactionRolledBackOnRelease(t *testing.T) {
	p, fc := newPool(t, Config{MaxConns: 1})
	db := p.OpenDB()
	defer db.Close()
	ctx := context.Background()
	sc, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.ExecContext(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	_ = sc.Close()
	log := fc.Conns()[0].Log()
	if last := log[len(log)-1]; !strings.EqualFold(last, "ROLLBACK") {
		t.Fatalf("last statement on release = %q; want ROLLBACK (log %q)", last, log)
	}
	// A clean cycle afterwards sends nothing.
	n := len(log)
	sc, _ = db.Conn(ctx)
	_ = sc.Close()
	if got := len(fc.Conns()[0].Log()); got != n {
		t.Fatalf("a clean cycle sent %d statements", got-n)
	}
}

func (p *Pool) snapshot() []*entry {
	var es []*entry
	for _, e := range p.reg.entries() {
		if e.state.Load() != stateRemoved {
			es = append(es, e)
		}
	}
	return es
}

// The coarse clock never trusts a connection past AliveBypassWindow: one tick is subtracted.
func TestCoarseClockBypassBound(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1})
	if p.clk.exact || p.clk.tick != 50*time.Millisecond {
		t.Fatalf("system clock: exact=%v tick=%v; want coarse with a 50ms tick for a 500ms window", p.clk.exact, p.clk.tick)
	}
	ms := int64(time.Millisecond)
	if !p.trusted(450*ms, 0) {
		t.Error("a connection returned 450ms (coarse) ago should be trusted")
	}
	if p.trusted(451*ms, 0) {
		t.Error("a connection returned 451ms (coarse) ago may be 501ms old and must be probed")
	}
}

// A coarse clock left behind by a starved refresher (the process got no CPU, then the
// borrower ran before the refresh) must not extend the bypass window: the exact clock
// confirms every coarse "trusted".
func TestStaleCoarseClockDoesNotExtendBypass(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1, AliveBypassWindow: 20 * time.Millisecond})
	alive := p.nanotime()
	for p.nanotime()-alive <= int64(25*time.Millisecond) {
		time.Sleep(5 * time.Millisecond) // real time must pass: this is what is measured
	}
	staleNow := alive + int64(time.Millisecond) // the coarse clock, one refresh after alive
	if p.trusted(staleNow, alive) {
		t.Fatal("a connection returned more than AliveBypassWindow ago was trusted because the coarse clock was stale")
	}
	if !p.trusted(p.nanotime(), p.nanotime()) {
		t.Fatal("a connection returned just now was not trusted")
	}
}

func TestCoarseClockProbesIdleConnection(t *testing.T) {
	p, fc := newPool(t, Config{MaxConns: 1, AliveBypassWindow: 20 * time.Millisecond})
	c := mustConnect(t, p)
	_ = c.Close()
	base := fc.Pings.Load()
	time.Sleep(60 * time.Millisecond) // the time passing is what is tested
	c = mustConnect(t, p)
	_ = c.Close()
	if fc.Pings.Load() != base+1 {
		t.Fatalf("a connection idle 60ms with a 20ms window was not probed (pings %d)", fc.Pings.Load()-base)
	}
}

// Invariant 6: whatever optional interfaces the driver has or lacks, database/sql over the pool
// sends the driver exactly the calls it sends without the pool.
func TestOptionalInterfacesPreserved(t *testing.T) {
	workload := func(t *testing.T, db *sql.DB) []string {
		ctx := context.Background()
		var errs []string
		note := func(err error) {
			if err != nil {
				errs = append(errs, err.Error())
			}
		}
		sc, err := db.Conn(ctx) // one connection, so the driver log is one sequence
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		_, err = sc.ExecContext(ctx, "INSERT INTO t VALUES (?)", 1)
		note(err)
		var n int
		note(sc.QueryRowContext(ctx, "SELECT ?", 7).Scan(&n))
		note(sc.PingContext(ctx))
		tx, err := sc.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelSerializable})
		note(err)
		if tx != nil {
			note(tx.Rollback())
		}
		tx, err = sc.BeginTx(ctx, nil)
		note(err)
		if tx != nil {
			_, err = tx.ExecContext(ctx, "UPDATE t SET a = 1")
			note(err)
			note(tx.Commit())
		}
		st, err := sc.PrepareContext(ctx, "SELECT a FROM t WHERE id = ?")
		note(err)
		if st != nil {
			note(st.QueryRowContext(ctx, 3).Scan(&n))
			_ = st.Close()
		}
		return errs
	}
	for _, minimal := range []bool{false, true} {
		t.Run(fmt.Sprintf("minimal=%v", minimal), func(t *testing.T) {
			open := func(pooled bool) (*sql.DB, *fakedb.Connector) {
				fc := fakedb.New()
				var c driver.Connector = fc
				if minimal {
					c = fakedb.MinimalConnector{Connector: fc}
				}
				if !pooled {
					return sql.OpenDB(c), fc
				}
				p, err := New(c, Config{MaxConns: 1, Logger: quiet})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = p.Close() })
				return p.OpenDB(), fc
			}
			plainDB, plainFC := open(false)
			defer plainDB.Close()
			pooledDB, pooledFC := open(true)
			defer pooledDB.Close()
			plainErrs := workload(t, plainDB)
			pooledErrs := workload(t, pooledDB)
			if fmt.Sprint(plainErrs) != fmt.Sprint(pooledErrs) {
				t.Errorf("errors differ:\n plain  %q\n pooled %q", plainErrs, pooledErrs)
			}
			strip := func(log []string) []string {
				var out []string
				for _, l := range log {
					if !strings.Contains(l, "@@autocommit") { // the pool's baseline query at connect (and its PREPARE)
						out = append(out, l)
					}
				}
				return out
			}
			plainLog := strip(plainFC.Conns()[0].Log())
			pooledLog := strip(pooledFC.Conns()[0].Log())
			if fmt.Sprint(plainLog) != fmt.Sprint(pooledLog) {
				t.Errorf("driver calls differ:\n plain  %q\n pooled %q", plainLog, pooledLog)
			}
		})
	}
}

// recorder records the events of a Trace.
type recorder struct {
	mu  sync.Mutex
	log []string
}

func (r *recorder) add(s string) { r.mu.Lock(); r.log = append(r.log, s); r.mu.Unlock() }
func (r *recorder) Acquired(_ string, wait time.Duration) {
	r.add(fmt.Sprintf("acquired wait>0=%v", wait > 0))
}
func (r *recorder) AcquireTimedOut(_ string, wait time.Duration) {
	r.add("timeout") // the durations follow the (fake) Clock
}
func (r *recorder) Released(string, time.Duration)   { r.add("released") }
func (r *recorder) Created(string, time.Duration)    { r.add("created") }
func (r *recorder) Closed(_ string, why CloseReason) { r.add("closed " + string(why)) }
func (r *recorder) Validated(_ context.Context, _ string, _ time.Duration, alive bool) {
	r.add(fmt.Sprintf("validated %v", alive))
}
func (r *recorder) LeakedStatementClosed(string) { r.add("leaked") }
func (r *recorder) ReleasePlanRun(_ string, rb bool, n int, ok bool) {
	r.add(fmt.Sprintf("plan rollback=%v n=%d ok=%v", rb, n, ok))
}
func (r *recorder) trace() *Trace {
	return &Trace{Acquired: r.Acquired, AcquireTimedOut: r.AcquireTimedOut, Released: r.Released,
		Created: r.Created, Closed: r.Closed, Validated: r.Validated,
		LeakedStatementClosed: r.LeakedStatementClosed, ReleasePlanRun: r.ReleasePlanRun}
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.log
	r.log = nil
	return l
}

func TestEventsFollowAScriptedSequence(t *testing.T) {
	clk := newFakeClock()
	rec := &recorder{}
	p, fc := newPool(t, Config{MaxConns: 1, testClock: clk, Trace: rec.trace(), AcquireTimeout: 250 * time.Millisecond})
	eventually(t, "the first connection", func() bool { return p.Stats().Idle == 1 })
	want := func(step string, w ...string) {
		t.Helper()
		if got := rec.take(); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Fatalf("%s: events %q; want %q", step, got, w)
		}
	}
	want("New", "created")

	c := mustConnect(t, p)
	want("acquire", "acquired wait>0=false")
	if _, err := p.Connect(context.Background()); !errors.Is(err, ErrAcquireTimeout) {
		t.Fatal(err)
	}
	want("timeout", "timeout")
	_, _ = c.ExecContext(context.Background(), "BEGIN", nil)
	_, _ = c.PrepareContext(context.Background(), "SELECT 1")
	_ = c.Close()
	want("release of a dirty connection with a leaked statement", "leaked", "released", "plan rollback=true n=1 ok=true")

	clk.Advance(time.Second)
	c = mustConnect(t, p)
	want("acquire after the bypass window", "validated true", "acquired wait>0=false")
	c.e.conn.(*fakedb.Conn).FailNext(driver.ErrBadConn)
	_, _ = c.ExecContext(context.Background(), "SELECT 1", nil)
	_ = c.Close()
	eventually(t, "the replacement", func() bool { return fc.Opens.Load() == 2 && p.Stats().Idle == 1 })
	want("release after a fatal error, and the refill", "released", "closed fatal_error", "created")
	p.SoftEvict()
	eventually(t, "the refill after SoftEvict", func() bool { return fc.Opens.Load() == 3 && p.Stats().Idle == 1 })
	want("SoftEvict", "closed evicted", "created")
}

func BenchmarkAcquireReleaseWithEvents(b *testing.B) {
	p, _ := newPool(b, Config{MaxConns: 32, Trace: &Trace{ // as cheap as a Trace can be on this path
		Acquired: func(string, time.Duration) {}, Released: func(string, time.Duration) {}}})
	eventually(b, "pool filled", func() bool { return p.Stats().Idle == 32 })
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		e, err := p.acquire(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		p.release(e, nil)
	}
}

// A waiter that loses one race to a barging goroutine gets the next connection handed to it
// directly, so it cannot lose twice.
func TestBargedWaiterGetsDirectHandOff(t *testing.T) {
	var s store
	e1, e2 := &entry{id: 1}, &entry{id: 2}
	for _, e := range []*entry{e1, e2} {
		e.state.Store(stateInUse)
	}
	w := &waiter{ch: make(chan *entry, 1)}
	s.waiting.Add(1) // as wait does
	s.mu.Lock()
	s.pushBackLocked(w)
	s.mu.Unlock()

	s.put(e1) // wakes w; e1 becomes idle
	if got := s.get(); got != e1 {
		t.Fatalf("a running goroutine should barge and take e1, got %v", got)
	}
	if v := <-w.ch; v != nil {
		t.Fatalf("the first wake-up carries no connection, got %v", v)
	}
	// w wakes, finds nothing idle, and goes back to the head of the queue, marked.
	s.mu.Lock()
	if s.popLocked() != nil {
		t.Fatal("nothing should be idle")
	}
	w.barged = true
	s.requeueLocked(w)
	s.mu.Unlock()

	s.put(e2)
	if got := s.get(); got != nil {
		t.Fatalf("a barging goroutine took %v from a waiter that already lost once", got)
	}
	if v := <-w.ch; v != e2 {
		t.Fatalf("the barged waiter got %v; want e2 handed off directly", v)
	}
}

func TestConnectTimeoutBoundsDial(t *testing.T) {
	fc := fakedb.New()
	fc.SetDialBlock(true)
	p, err := New(fc, Config{MaxConns: 1, InitializationFailTimeout: -1, ConnectTimeout: 100 * time.Millisecond,
		AcquireTimeout: time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.Connect(context.Background())
	if !errors.Is(err, ErrAcquireTimeout) || !strings.Contains(err.Error(), "ConnectTimeout") {
		t.Fatalf("Connect = %v; want ErrAcquireTimeout naming the ConnectTimeout of the last dial", err)
	}
	if n := fc.Dials.Load(); n < 2 {
		t.Fatalf("%d dials in 1s with a 100ms ConnectTimeout; the creator should have retried", n)
	}
}

// A waiter that a barging goroutine beat to a freshly created connection must make the creator
// go on: the pool is below MaxConns, so it must not time out (found in review).
func TestBargedWaiterBelowMaxConnsIsNotStranded(t *testing.T) {
	for i := 0; i < 10; i++ {
		p, fc := newPool(t, Config{MaxConns: 3, MinIdleConns: -1, InitializationFailTimeout: -1, AcquireTimeout: time.Second})
		c1 := mustConnect(t, p)
		fc.SetDialDelay(20 * time.Millisecond)
		stolen := make(chan *entry, 1)
		go func() { // a running goroutine that barges for the next connection the creator makes
			d := time.Now().Add(2 * time.Second)
			for time.Now().Before(d) {
				if e := p.store.get(); e != nil {
					stolen <- e
					return
				}
			}
			stolen <- nil
		}()
		c, err := p.Connect(context.Background())
		if err != nil {
			t.Fatalf("run %d: a waiter timed out with the pool below MaxConns: %v", i, err)
		}
		_ = c.Close()
		if e := <-stolen; e != nil {
			_ = (&conn{p: p, e: e}).Close()
		}
		_ = c1.Close()
		_ = p.Close()
	}
}

// A statement the driver answered with driver.ErrSkip did not run; if database/sql's prepare of
// it then fails, the session must not be believed changed by it (found in review).
func TestErrSkipStatementIsNotRecordedAsRun(t *testing.T) {
	p, fc := newPool(t, Config{MaxConns: 1, StatementCacheSize: -1})
	db := p.OpenDB()
	defer db.Close()
	ctx := context.Background()
	sc, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = sc.ExecContext(ctx, "SET autocommit=0")
	_, _ = sc.ExecContext(ctx, "INSERT INTO t VALUES (1)")
	const q = "SET autocommit = 1, @v = ?"
	fc.SetExecError(func(s string) error {
		if s == q {
			fc.Conns()[0].FailNext(errors.New("Error 1461: Can't create more than max_prepared_stmt_count statements"))
			return driver.ErrSkip
		}
		return nil
	})
	if _, err := sc.ExecContext(ctx, q, 1); err == nil {
		t.Fatal("the prepare should have failed")
	}
	fc.SetExecError(nil)
	_ = sc.Close()
	if fc.Conns()[0].Closed() {
		return // discarded: also safe
	}
	log := strings.Join(fc.Conns()[0].Log(), "; ")
	if !strings.Contains(log, "SET autocommit=1") {
		t.Fatalf("the connection went back with autocommit=0; release plan ran only: %s", log)
	}
}
