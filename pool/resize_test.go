package pool

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestSetterValidation(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 4, MinIdleConns: -1})
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"SetMaxConns(0)", p.SetMaxConns(0)},
		{"SetMinIdleConns(5) above MaxConns 4", p.SetMinIdleConns(5)},
		{"SetMaxLifetime(1s)", p.SetMaxLifetime(time.Second)},
		{"SetIdleTimeout(1s)", p.SetIdleTimeout(time.Second)},
		{"SetIdleTimeout(MaxLifetime)", p.SetIdleTimeout(p.Config().MaxLifetime)},
	} {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if err := p.SetAcquireTimeout(0); err != nil || p.Config().AcquireTimeout != DefaultAcquireTimeout {
		t.Errorf("SetAcquireTimeout(0): %v, %v", err, p.Config().AcquireTimeout)
	}
	if err := p.SetMaxLifetime(time.Hour); err != nil || p.Config().MaxLifetime != time.Hour {
		t.Errorf("SetMaxLifetime(1h): %v, %v", err, p.Config().MaxLifetime)
	}
	if err := p.SetIdleTimeout(time.Minute); err != nil || p.Config().IdleTimeout != time.Minute {
		t.Errorf("SetIdleTimeout(1m): %v, %v", err, p.Config().IdleTimeout)
	}
	_ = p.Close()
	if err := p.SetMaxConns(3); err != ErrClosed {
		t.Errorf("SetMaxConns after Close = %v, want ErrClosed", err)
	}
}

// Shrinking closes idle connections at once, oldest return first, and borrowed ones when they
// come back; a fixed-size pool stays fixed-size; MaxLifetime applies to new connections.
func TestShrinkClosesIdleFirstBorrowedOnReturn(t *testing.T) {
	var ev closeEvents
	p, _ := newPool(t, Config{MaxConns: 6, Trace: ev.trace()})
	eventually(t, "six idle connections", func() bool { return p.Stats().Idle == 6 })
	held := []*conn{mustConnect(t, p), mustConnect(t, p), mustConnect(t, p)}
	if err := p.SetMaxConns(2); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.MaxConns != 2 || st.Idle != 0 || st.Total != 3 || st.Active != 3 {
		t.Fatalf("after SetMaxConns(2) with 3 borrowed: %v; want the 3 idle closed, the 3 borrowed kept", st)
	}
	if p.Config().MinIdleConns != 2 {
		t.Fatalf("MinIdleConns %d; a fixed-size pool stays fixed-size", p.Config().MinIdleConns)
	}
	_ = held[0].Close()
	if st := p.Stats(); st.Total != 2 || st.Idle != 0 {
		t.Fatalf("after one return: %v; want it closed", st)
	}
	_ = held[1].Close()
	_ = held[2].Close()
	if st := p.Stats(); st.Total != 2 || st.Idle != 2 {
		t.Fatalf("after all returns: %v; want 2 idle", st)
	}
	n := 0
	for _, r := range ev.reasons() {
		if r == CloseResized {
			n++
		}
	}
	if n != 4 {
		t.Fatalf("%d connections closed as resized, want 4 (%v)", n, ev.reasons())
	}
	if err := p.SetMaxConns(5); err != nil {
		t.Fatal(err)
	}
	eventually(t, "five idle after growing", func() bool { return p.Stats().Idle == 5 })
}

// Waiters keep their places through shrinks and grows and are served in arrival order.
func TestResizeServesWaitersInOrder(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 2, AcquireTimeout: -1})
	eventually(t, "two idle", func() bool { return p.Stats().Idle == 2 })
	a, b := mustConnect(t, p), mustConnect(t, p)
	const n = 6
	var mu sync.Mutex
	served := map[int]*conn{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dc, err := p.Connect(ctx)
			if err != nil {
				return
			}
			mu.Lock()
			served[i] = dc.(*conn)
			mu.Unlock()
		}()
		eventually(t, "waiter queued", func() bool { return p.Stats().Waiting == i+1 })
	}
	servedSet := func(k int) {
		t.Helper()
		eventually(t, fmt.Sprintf("%d served", k), func() bool { mu.Lock(); defer mu.Unlock(); return len(served) >= k })
		mu.Lock()
		defer mu.Unlock()
		if len(served) != k {
			t.Fatalf("%d served, want %d", len(served), k)
		}
		for i := range k {
			if served[i] == nil {
				t.Fatalf("served %v; want exactly the first %d waiters", keys(served), k)
			}
		}
	}
	if err := p.SetMaxConns(1); err != nil {
		t.Fatal(err)
	}
	_ = a.Close() // over the limit: closed, no one served
	if st := p.Stats(); st.Total != 1 || st.Waiting != n {
		t.Fatalf("after a return over the limit: %v", st)
	}
	if err := p.SetMaxConns(4); err != nil {
		t.Fatal(err)
	}
	servedSet(3) // the creator's three new connections go to the first three, in order
	_ = b.Close()
	servedSet(4)
	if err := p.SetMaxConns(2); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	for i := range 3 {
		_ = served[i].Close() // 4 out, limit 2: the first two returns close, the third serves waiter 4
	}
	mu.Unlock()
	servedSet(5)
	if err := p.SetMaxConns(3); err != nil {
		t.Fatal(err)
	}
	servedSet(6)
	mu.Lock()
	for i := 3; i < n; i++ {
		_ = served[i].Close()
	}
	mu.Unlock()
	wg.Wait()
	if st := p.Stats(); st.Total > 3 || st.Active != 0 {
		t.Fatalf("at the end: %v", st)
	}
}

func keys(m map[int]*conn) []int {
	var ks []int
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// Random resizes of every live setting under 64 borrowing goroutines: no borrower error other
// than its own timeout, the Stats invariants after every resize, and at the end the pool within
// its last limit. The CI form runs 150 resizes; SQLPOOL_RESIZE_SOAK=1 runs the bar's 1,000 in
// 60 s (go test -race -run TestResizeUnderLoad -timeout 5m ./pool).
func TestResizeUnderLoad(t *testing.T) {
	resizes, span := 150, 3*time.Second
	if os.Getenv("SQLPOOL_RESIZE_SOAK") == "1" {
		resizes, span = 1000, 60*time.Second
	}
	if testing.Short() {
		resizes, span = 50, time.Second
	}
	p, fc := newPool(t, Config{MaxConns: 8, MinIdleConns: 2, AcquireTimeout: 2 * time.Second, MaxWaiters: 0})
	db := p.OpenDB()
	defer db.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ops, timeouts atomic.Int64
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if g%4 == 0 { // a quarter through database/sql (ResetSession/IsValid and parking)
					err = dbBorrow(db, r)
				} else {
					err = connectBorrow(p, r)
				}
				switch {
				case err == nil:
					ops.Add(1)
				case isTimeout(err):
					timeouts.Add(1)
				default:
					select {
					case errs <- fmt.Errorf("goroutine %d: %w", g, err):
					default:
					}
					return
				}
			}
		}()
	}
	// The waiters' queue stays in arrival order through every resize (a release serves its
	// head, so this is what serves waiters in order): sampled while the resizes run.
	var queued atomic.Int64
	sampled := make(chan error, 1)
	go func() {
		defer close(sampled)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			s := &p.store
			s.mu.Lock()
			n, last := 0, uint64(0)
			var bad error
			for w := s.head; w != nil; w = w.next {
				if w.ticket <= last {
					bad = fmt.Errorf("waiter queue out of arrival order: ticket %d after %d", w.ticket, last)
				}
				last = w.ticket
				n++
			}
			if n != s.nwait {
				bad = fmt.Errorf("waiter queue holds %d, nwait says %d", n, s.nwait)
			}
			s.mu.Unlock()
			if bad != nil {
				sampled <- bad
				return
			}
			if n > 1 {
				queued.Add(1)
			}
		}
	}()
	r := rand.New(rand.NewPCG(42, 7))
	gap := span / time.Duration(resizes)
	began := time.Now()
	maxConns := 8
	for i := range resizes {
		time.Sleep(gap)
		var err error
		switch r.IntN(5) {
		case 0, 1:
			maxConns = 1 + r.IntN(16)
			err = p.SetMaxConns(maxConns)
		case 2:
			err = p.SetMinIdleConns(r.IntN(maxConns+2) - 1)
		case 3:
			err = p.SetAcquireTimeout(time.Duration(500+r.IntN(2000)) * time.Millisecond)
		case 4:
			if r.IntN(2) == 0 {
				err = p.SetMaxLifetime(time.Duration(31+r.IntN(3600)) * time.Second)
			} else {
				err = p.SetIdleTimeout(time.Duration(10+r.IntN(20)) * time.Second)
			}
		}
		if err != nil { // the draws stay within every setter's range
			t.Fatalf("resize %d: %v", i, err)
		}
		st := p.Stats()
		if st.MaxConns != maxConns || st.Idle > maxConns || st.Total != st.Active+st.Idle ||
			st.Active < 0 || st.Idle < 0 || st.Waiting < 0 || p.Config().MinIdleConns > maxConns {
			t.Fatalf("resize %d: inconsistent stats %v (MaxConns set %d, MinIdle %d)", i, st, maxConns, p.Config().MinIdleConns)
		}
	}
	close(stop)
	wg.Wait()
	if err := <-sampled; err != nil {
		t.Error(err)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	_ = db.Close()
	eventually(t, "every connection back", func() bool { return p.Stats().Active == 0 })
	st := p.Stats()
	if st.Total > maxConns || int64(st.Total) != fc.Open() || st.Created-st.Closed != uint64(st.Total) {
		t.Fatalf("at the end: %v, driver connections open %d, MaxConns %d", st, fc.Open(), maxConns)
	}
	t.Logf("%d resizes paced over %v, done in %v; %d borrows, %d timeouts; %d samples of a queue of 2+ waiters, all in arrival order; load: %s",
		resizes, span, time.Since(began).Round(time.Millisecond), ops.Load(), timeouts.Load(), queued.Load(), loadavg())
	if ops.Load() < int64(resizes) {
		t.Fatalf("only %d borrows", ops.Load())
	}
}

func isTimeout(err error) bool {
	_, ok := err.(*AcquireTimeoutError)
	return ok || err == context.DeadlineExceeded
}

func connectBorrow(p *Pool, r *rand.Rand) error {
	c, err := p.Connect(context.Background())
	if err != nil {
		return err
	}
	if r.IntN(8) == 0 {
		time.Sleep(time.Duration(r.IntN(500)) * time.Microsecond)
	}
	if _, err := c.(*conn).ExecContext(context.Background(), "SELECT 1", nil); err != nil {
		_ = c.Close()
		return err
	}
	return c.Close()
}

func dbBorrow(db *sql.DB, r *rand.Rand) error {
	c, err := db.Conn(context.Background())
	if err != nil {
		if ae, ok := err.(*AcquireTimeoutError); ok {
			return ae
		}
		return err
	}
	if r.IntN(8) == 0 {
		time.Sleep(time.Duration(r.IntN(500)) * time.Microsecond)
	}
	_, err = c.ExecContext(context.Background(), "SELECT 1")
	_ = c.Close()
	return err
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strconv.Quote(string(b[:len(b)-1]))
}
