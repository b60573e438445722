package pool_test

import (
	"context"
	"database/sql/driver"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
)

// countingConnector counts dials and records when the first dial after a mark succeeded (a
// dial that succeeds while the server is still starting, before its readiness is seen, counts
// as 0 after ready).
type countingConnector struct {
	driver.Connector
	dials atomic.Int64
	mu    sync.Mutex
	since time.Time // a mark; firstOK is the first successful dial after it
	first time.Time
}

func (c *countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c.dials.Add(1)
	dc, err := c.Connector.Connect(ctx)
	if err == nil {
		now := time.Now()
		c.mu.Lock()
		if !c.since.IsZero() && c.first.IsZero() {
			c.first = now
		}
		c.mu.Unlock()
	}
	return dc, err
}

func (c *countingConnector) mark(t time.Time) {
	c.mu.Lock()
	c.since, c.first = t, time.Time{}
	c.mu.Unlock()
}

func (c *countingConnector) firstOK() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first
}

// A restart of the database under load, 10 times: the pool's first new connection comes
// within 1 s of the server being ready again (the creator's backoff, grown while the server
// was down, ends within 100 ms while acquires wait), in every run, and while the server is
// down the pool dials at most about 10 times a second (it does not hammer it). The figures are
// logged per run.
func TestRecoveryAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: restarts a private mariadbd 10 times")
	}
	m := mysqltest.StartMariaDB(t)
	cc := &countingConnector{Connector: mysqlConnector(t, m.DSN())}
	p, err := pool.New(cc, pool.Config{Name: "restart", MaxConns: 4, AcquireTimeout: 30 * time.Second, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	db := p.OpenDB()
	defer db.Close()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				var n int
				_ = db.QueryRowContext(ctx, "SELECT 1").Scan(&n)
				cancel()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	const runs, down = 10, 2 * time.Second
	var lat []time.Duration
	for run := 1; run <= runs; run++ {
		waitFor(t, "the pool is serving", func() bool { return p.Stats().Total > 0 })
		m.Stop(t)
		stopped := time.Now()
		d0 := cc.dials.Load()
		time.Sleep(down) // the server stays down this long: nothing to wait for
		dialsDown := cc.dials.Load() - d0
		cc.mark(time.Now())
		m.Start(t) // returns once the server answers a ping: "ready"
		ready := time.Now()
		waitFor(t, "a new connection after the restart", func() bool { return !cc.firstOK().IsZero() })
		took := max(cc.firstOK().Sub(ready), 0)
		lat = append(lat, took)
		rate := float64(dialsDown) / down.Seconds()
		t.Logf("run %d: %d dials in the %v the server was down (%.1f/s); ready %v after the stop; first new connection %v after ready",
			run, dialsDown, down, rate, ready.Sub(stopped).Round(time.Millisecond), took.Round(time.Millisecond))
		if took > time.Second {
			t.Errorf("run %d: first new connection %v after the server was ready, want ≤ 1s", run, took)
		}
		if rate > 15 {
			t.Errorf("run %d: %.1f dials/s while the server was down: the pool hammers a database that is down", run, rate)
		}
	}
	slices.Sort(lat)
	t.Logf("first new connection after ready over %d runs: median %v, max %v", runs,
		lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
}
