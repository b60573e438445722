package cluster_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/sqlpool/sqlpool/internal/leakcheck"
	_ "github.com/sqlpool/sqlpool/mysqldialect" // MySQL's pool.Dialect, registered on import

	"github.com/sqlpool/sqlpool/cluster"
	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/internal/testutil"
	"github.com/sqlpool/sqlpool/pool"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}

// logCapture is a slog.Handler that keeps every record's message.
type logCapture struct {
	mu    sync.Mutex
	msgs  []string
	times []time.Time
	attrs []string
}

func (l *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCapture) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	r.Attrs(func(a slog.Attr) bool {
		if k := a.Key; k == "host" || k == "error" || k == "hosts_up" || k == "down_for" || k == "moves" {
			fmt.Fprintf(&b, "%s=%.160v ", k, a.Value)
		}
		return true
	})
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Message)
	l.times = append(l.times, r.Time)
	l.attrs = append(l.attrs, b.String())
	l.mu.Unlock()
	return nil
}
func (l *logCapture) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCapture) WithGroup(string) slog.Handler      { return l }

// count returns how many messages start with prefix.
func (l *logCapture) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}

// eventually polls cond every 5 ms until it holds or a generous bound passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, what, cond)
}

type bed struct {
	fakes []*fakedb.Connector
	c     *cluster.Connector
	p     *pool.Pool
	log   *logCapture
}

// newBed builds a pool of maxConns over n fake hosts named h1..hn. prep may change the
// cluster config and the fakes before the pool opens its first connection.
func newBed(t *testing.T, n, maxConns int, s cluster.Strategy, prep func(*cluster.Config, []*fakedb.Connector)) *bed {
	t.Helper()
	b := &bed{log: &logCapture{}}
	cfg := cluster.Config{Strategy: s, ProbeInterval: 20 * time.Millisecond, MaxProbeInterval: 50 * time.Millisecond,
		RebalancePeriod: -1, HostTimeout: time.Second, Logger: slog.New(b.log)}
	for i := 0; i < n; i++ {
		f := fakedb.New()
		b.fakes = append(b.fakes, f)
		cfg.Hosts = append(cfg.Hosts, cluster.Host{Name: fmt.Sprintf("h%d", i+1), Connector: f})
	}
	if prep != nil {
		prep(&cfg, b.fakes)
	}
	c, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(c, pool.Config{MaxConns: maxConns, AcquireTimeout: 10 * time.Second,
		InitializationFailTimeout: -1, Logger: slog.New(b.log)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	b.c, b.p = c, p
	return b
}

func (b *bed) totals() map[string]int {
	m := map[string]int{}
	for _, h := range b.c.Hosts() {
		m[h.Name] = h.Conns.Total
	}
	return m
}

func (b *bed) waitFull(t *testing.T, n int) map[string]int {
	t.Helper()
	eventually(t, fmt.Sprintf("%d connections open", n), func() bool { return b.p.Stats().Total == n })
	return b.totals()
}

// execOnAll borrows n connections at once (so that every pooled connection is used despite the
// pool's LIFO order), runs a statement on each and returns them; it returns the errors.
func execOnAll(db *sql.DB, n int) []error {
	ctx := context.Background()
	var conns []*sql.Conn
	var errs []error
	for i := 0; i < n; i++ {
		c, err := db.Conn(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		if _, err := c.ExecContext(ctx, "DO 1"); err != nil {
			errs = append(errs, err)
		}
		c.Close()
	}
	return errs
}

func within1(t *testing.T, got map[string]int, hosts, total int) {
	t.Helper()
	even := float64(total) / float64(hosts)
	for i := 1; i <= hosts; i++ {
		n := got[fmt.Sprintf("h%d", i)]
		if float64(n) < even-1 || float64(n) > even+1 {
			t.Fatalf("connections per host %v: h%d has %d, not within ±1 of %.2f", got, i, n, even)
		}
	}
}

func TestRoundRobinSpreadsEvenly(t *testing.T) {
	b := newBed(t, 3, 10, cluster.RoundRobin, nil)
	within1(t, b.waitFull(t, 10), 3, 10)
}

func TestLeastConnectionsSpreadsEvenly(t *testing.T) {
	b := newBed(t, 3, 11, cluster.LeastConnections, nil)
	within1(t, b.waitFull(t, 11), 3, 11)
}

func TestSequentialUsesFirstHealthyHost(t *testing.T) {
	b := newBed(t, 3, 6, cluster.Sequential, nil)
	if got := b.waitFull(t, 6); got["h1"] != 6 {
		t.Fatalf("sequential: %v, want all 6 on h1", got)
	}
	b2 := newBed(t, 3, 6, cluster.Sequential, func(_ *cluster.Config, f []*fakedb.Connector) {
		f[0].SetDialError(syscall.ECONNREFUSED)
	})
	if got := b2.waitFull(t, 6); got["h2"] != 6 {
		t.Fatalf("sequential with h1 refusing: %v, want all 6 on h2", got)
	}
	if n := b2.log.count("sqlpool: host down"); n != 1 {
		t.Fatalf("%d host-down log lines, want 1", n)
	}
}

// A connection that reports the server gone makes only its host's connections be probed,
// and a host whose fresh connection works stays up.
func TestServerGoneIsPerHost(t *testing.T) {
	b := newBed(t, 2, 4, cluster.RoundRobin, nil)
	b.waitFull(t, 4)
	db := b.p.OpenDB()
	defer db.Close()
	pings1, pings2 := b.fakes[0].Pings.Load(), b.fakes[1].Pings.Load()
	// Fail one statement on h1 with a server-gone error.
	var once sync.Once
	b.fakes[0].SetExecError(func(string) error {
		var err error
		once.Do(func() { err = mysql.ErrInvalidConn })
		return err
	})
	errs := execOnAll(db, 4)
	b.fakes[0].SetExecError(nil)
	if len(errs) == 0 {
		t.Fatal("no statement reached h1")
	}
	// Borrow every connection once: h1's are probed, h2's are not.
	eventually(t, "pool refilled", func() bool { return b.p.Stats().Total == 4 })
	conns := make([]any, 0, 4)
	for i := 0; i < 4; i++ {
		c, err := b.p.Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		_ = c.(io.Closer).Close()
	}
	if d := b.fakes[1].Pings.Load() - pings2; d != 0 {
		t.Errorf("h2 got %d probes after h1 reported the server gone, want 0", d)
	}
	if d := b.fakes[0].Pings.Load() - pings1; d == 0 {
		t.Errorf("h1's connections were not probed after it reported the server gone")
	}
	if !b.c.Hosts()[0].Up {
		t.Errorf("h1 marked down though a fresh connection to it works")
	}
	if n := b.log.count("sqlpool: host down"); n != 0 {
		t.Errorf("%d host-down log lines, want 0", n)
	}
}

// A host that reports the server gone and refuses new connections is marked down once, its
// connections are closed and replaced on the other hosts.
func TestHostDownFailsOver(t *testing.T) {
	b := newBed(t, 3, 9, cluster.RoundRobin, nil)
	b.waitFull(t, 9)
	db := b.p.OpenDB()
	defer db.Close()
	b.fakes[1].SetDialError(syscall.ECONNREFUSED)
	b.fakes[1].SetExecError(func(string) error { return io.EOF })
	execOnAll(db, 9)
	eventually(t, "h2 down and its connections replaced", func() bool {
		t := b.totals()
		return !b.c.Hosts()[1].Up && t["h2"] == 0 && t["h1"]+t["h3"] == 9
	})
	if errs := execOnAll(db, 9); len(errs) > 0 {
		t.Fatalf("statements after failover: %v", errs)
	}
	if n := b.log.count("sqlpool: host down"); n != 1 {
		t.Fatalf("%d host-down log lines, want 1", n)
	}
	if b.log.count("sqlpool: all hosts down") != 0 {
		t.Fatal("all hosts down logged with two hosts up")
	}
}

// When every host is down, acquires fail fast with ErrAllHostsDown; the pool comes back by
// itself when a host answers again.
func TestAllHostsDownFailsFastAndRecovers(t *testing.T) {
	b := newBed(t, 2, 4, cluster.RoundRobin, nil)
	b.waitFull(t, 4)
	db := b.p.OpenDB()
	defer db.Close()
	for _, f := range b.fakes {
		f.SetDialError(syscall.ECONNREFUSED)
		f.SetExecError(func(string) error { return io.EOF })
	}
	// Eight callers, more than there are connections: those waiting when the last host goes
	// down are woken and fail too.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				_, _ = db.Exec("DO 1")
			}
		}()
	}
	wg.Wait()
	// The counter moves before the log lines are written: wait for both.
	eventually(t, "all hosts down", func() bool {
		return b.c.AllHostsDownEvents() == 1 && b.log.count("sqlpool: host down") >= 2 && b.log.count("sqlpool: all hosts down") >= 1
	})
	for i := 0; i < 5; i++ {
		start := time.Now()
		_, err := db.Exec("DO 1")
		if !errors.Is(err, cluster.ErrAllHostsDown) || !errors.Is(err, pool.ErrUnavailable) {
			t.Fatalf("exec with all hosts down: %v, want ErrAllHostsDown and pool.ErrUnavailable", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("exec with all hosts down took %v; it must fail fast", d)
		}
	}
	if n := b.log.count("sqlpool: all hosts down"); n != 1 {
		t.Fatalf("%d all-hosts-down log lines, want 1", n)
	}
	if n := b.log.count("sqlpool: host down"); n != 2 {
		t.Fatalf("%d host-down log lines, want 2", n)
	}
	b.fakes[0].SetExecError(nil)
	b.fakes[0].SetDialError(nil)
	eventually(t, "work resumes", func() bool { _, err := db.Exec("DO 1"); return err == nil })
	if n := b.log.count("sqlpool: host back"); n != 1 {
		t.Fatalf("%d host-back log lines, want 1", n)
	}
	if n := b.log.count("sqlpool: hosts available again"); n != 1 {
		t.Fatalf("%d hosts-available-again log lines, want 1", n)
	}
	if n := b.log.count("sqlpool: all hosts down"); n != 1 {
		t.Fatalf("%d all-hosts-down log lines after recovery, want 1", n)
	}
}

// A host that comes back gets its share again over RebalancePeriod, one connection at a time.
func TestRebalanceOverPeriod(t *testing.T) {
	for _, s := range []cluster.Strategy{cluster.RoundRobin, cluster.LeastConnections, cluster.Sequential} {
		t.Run(s.String(), func(t *testing.T) {
			const period = 600 * time.Millisecond
			b := newBed(t, 3, 9, s, func(cfg *cluster.Config, f []*fakedb.Connector) {
				cfg.RebalancePeriod = period
				f[0].SetDialError(syscall.ECONNREFUSED) // h1 is down from the start
			})
			b.waitFull(t, 9)
			if got := b.totals(); got["h1"] != 0 {
				t.Fatalf("h1 down but holds %d connections", got["h1"])
			}
			b.fakes[0].SetDialError(nil)
			eventually(t, "h1 back", func() bool { return b.c.Hosts()[0].Up })
			back := b.c.Hosts()[0].BackSince // when it came back, not when the poll saw it
			want := 3
			if s == cluster.Sequential {
				want = 9
			}
			var arrivals []time.Duration
			last := 0
			eventually(t, fmt.Sprintf("h1 holds %d connections", want), func() bool {
				n := b.totals()["h1"]
				for ; last < n; last++ {
					arrivals = append(arrivals, time.Since(back))
				}
				return n >= want
			})
			// The first move comes at a random point in the second half of its slot (period/want)
			// after the host came back; allow half of that again for scheduling.
			if earliest := period / (4 * time.Duration(want)); arrivals[0] < earliest {
				t.Errorf("first connection moved after %v, before %v: not spread", arrivals[0], earliest)
			}
			if span := arrivals[len(arrivals)-1] - arrivals[0]; span < period/4 {
				t.Errorf("moves spread over %v only (arrivals %v), want at least %v", span, arrivals, period/4)
			}
			if got := b.totals(); s != cluster.Sequential {
				within1(t, got, 3, 9)
			}
			t.Logf("%s: arrivals on h1 after it came back: %v (period %v)", s, arrivals, period)
		})
	}
}

// A goroutine already waiting for a connection when the last host goes down is woken and fails
// at once; it does not wait for AcquireTimeout.
func TestAllHostsDownWakesWaiters(t *testing.T) {
	b := newBed(t, 1, 1, cluster.Sequential, nil)
	b.waitFull(t, 1)
	held, err := b.p.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		err error
		d   time.Duration
	}
	done := make(chan result, 1)
	go func() {
		start := time.Now()
		c, err := b.p.Connect(context.Background()) // AcquireTimeout 10 s
		if c != nil {
			_ = c.(io.Closer).Close()
		}
		done <- result{err, time.Since(start)}
	}()
	eventually(t, "a waiter", func() bool { return b.p.Stats().Waiting == 1 })
	b.fakes[0].SetDialError(syscall.ECONNREFUSED)
	b.fakes[0].SetExecError(func(string) error { return io.EOF })
	if _, err := held.(driver.ExecerContext).ExecContext(context.Background(), "DO 1", nil); err == nil {
		t.Fatal("exec on the broken host succeeded")
	}
	r := <-done
	if !errors.Is(r.err, cluster.ErrAllHostsDown) {
		t.Fatalf("waiter got %v, want ErrAllHostsDown", r.err)
	}
	if r.d > 5*time.Second {
		t.Fatalf("waiter failed after %v; it must be woken when all hosts go down, not wait for AcquireTimeout", r.d)
	}
	_ = held.(io.Closer).Close()
}
