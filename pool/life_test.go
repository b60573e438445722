package pool

import (
	"context"
	"database/sql/driver"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/fakedb"
)

// Issue 10, defect 2: a pool that failed once and recovered reports a later timeout as busy,
// not with the stale error, which it does not unwrap to (package retry's TestClassifyPoolAcquireTimeout
// checks that retry.Classify then calls it Permanent; retry imports pool).
func TestAcquireTimeoutAfterRecoveryIsBusy(t *testing.T) {
	fc := fakedb.New()
	// Before New: set after it, the creator's first dial may already have succeeded.
	fc.SetDialError(errors.New("dial tcp 10.0.0.1:3306: connect: connection refused"))
	p, _ := newPoolOver(t, fc, Config{Name: "orders", MaxConns: 1, InitializationFailTimeout: -1,
		AcquireTimeout: 300 * time.Millisecond})
	eventually(t, "a failed dial recorded", func() bool { return p.Stats().LastError != nil })
	fc.SetDialError(nil)
	held := mustConnect(t, p) // the creator recovered: a connection was opened
	defer held.Close()

	_, err := p.Connect(context.Background())
	var te *AcquireTimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("Connect = %v; want an *AcquireTimeoutError", err)
	}
	if te.Failing || te.LastErr != nil || errors.Unwrap(err) != nil {
		t.Errorf("busy pool reported as failing: Failing=%v LastErr=%v", te.Failing, te.LastErr)
	}
	if !strings.Contains(err.Error(), "pool busy") || strings.Contains(err.Error(), "refused") {
		t.Errorf("message %q should say the pool was busy and not name the old dial error", err)
	}
	if st := p.Stats(); st.LastError != nil {
		t.Errorf("Stats().LastError = %v after recovery; want nil", st.LastError)
	}
}

// Defect 2, the other half: while connections fail, the timeout says so and unwraps the
// cause (Transient for package retry); a probe that passes clears it.
func TestAcquireTimeoutWhileFailingThenProbeClears(t *testing.T) {
	p, fc := newPool(t, Config{MaxConns: 1, AliveBypassWindow: -1, AcquireTimeout: 300 * time.Millisecond})
	eventually(t, "the pool filled", func() bool { return p.Stats().Idle == 1 })
	fc.SetPingError(driver.ErrBadConn)
	_, err := p.Connect(context.Background())
	var te *AcquireTimeoutError
	if !errors.As(err, &te) || !te.Failing || !errors.Is(err, driver.ErrBadConn) {
		t.Fatalf("Connect = %v; want a failing-pool timeout wrapping the probe error", err)
	}
	if !strings.Contains(err.Error(), "pool failing") {
		t.Errorf("message %q should say the pool was failing", err)
	}
	fc.SetPingError(nil)
	// The creator is backing off (dead-on-arrival connections) for up to AcquireTimeout/2:
	// wait for its next connection rather than race it with a 300 ms acquire.
	eventually(t, "a new connection", func() bool { return p.Stats().Idle == 1 })
	c := mustConnect(t, p) // probed (AliveBypassWindow < 0) and passed
	defer c.Close()
	if st := p.Stats(); st.LastError != nil {
		t.Errorf("Stats().LastError = %v after a probe passed; want nil", st.LastError)
	}
}

// Defect 5: Stats.Acquires counts hand-outs only, not pops later closed for a failed probe
// or expiry.
func TestAcquiresCountOnlyHandOuts(t *testing.T) {
	clk := newFakeClock()
	p, fc := newPool(t, Config{MaxConns: 2, AliveBypassWindow: -1, AcquireTimeout: 300 * time.Millisecond,
		MaxLifetime: time.Hour, testClock: clk})
	eventually(t, "the pool filled", func() bool { return p.Stats().Idle == 2 })
	fc.SetPingError(driver.ErrBadConn)
	if _, err := p.Connect(context.Background()); !errors.Is(err, ErrAcquireTimeout) {
		t.Fatalf("Connect = %v; want ErrAcquireTimeout", err)
	}
	st := p.Stats()
	if st.ProbeFailures == 0 {
		t.Fatal("no probe failed; the test did not test anything")
	}
	if st.Acquires != 0 {
		t.Errorf("Stats().Acquires = %d after only failed probes; want 0", st.Acquires)
	}
	fc.SetPingError(nil)
	eventually(t, "the pool refilled", func() bool { return p.Stats().Idle == 2 })
	clk.Advance(2 * time.Hour) // both idle connections expire
	c := mustConnect(t, p)
	_ = c.Close()
	if st := p.Stats(); st.Acquires != 1 {
		t.Errorf("Stats().Acquires = %d after expired pops and one hand-out; want 1", st.Acquires)
	}
}

// Defect 5: when dials succeed but every probe fails, the creator backs off as after failed
// dials instead of dialling, probing and closing as fast as it can (64,000 connections in
// 0.5 s before the fix).
func TestDeadOnArrivalConnectionsBackOff(t *testing.T) {
	p, fc := newPool(t, Config{MaxConns: 4, AliveBypassWindow: -1, AcquireTimeout: time.Second,
		InitializationFailTimeout: -1})
	fc.SetPingError(driver.ErrBadConn)
	start := time.Now()
	_, err := p.Connect(context.Background())
	elapsed := time.Since(start)
	if !errors.Is(err, ErrAcquireTimeout) {
		t.Fatalf("Connect = %v; want ErrAcquireTimeout", err)
	}
	dials := fc.Dials.Load()
	t.Logf("%d dials in %v with failing probes (%.0f/s)", dials, elapsed, float64(dials)/elapsed.Seconds())
	// Backoff 10, 20, 40, … ms capped at AcquireTimeout/2: about a dozen dials in 1 s.
	if dials > 60 {
		t.Errorf("%d connections dialled in %v while every probe failed; want the creator to back off", dials, elapsed)
	}
	// Recovery: once probes pass the pool serves at once again.
	fc.SetPingError(nil)
	eventually(t, "a connection handed out after recovery", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := p.Connect(ctx)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	})
	if p.deadOnArrival.Load() != 0 {
		t.Error("the dead-on-arrival streak survived a passed probe")
	}
}

// A waiter whose handed connection fails validation keeps its place by arrival: it gets the
// next connection before waiters that came after it.
func TestWaiterKeepsPlaceAfterFailedValidation(t *testing.T) {
	p, fc := newPool(t, Config{MaxConns: 1, AliveBypassWindow: -1})
	held := mustConnect(t, p)
	first := make(chan error, 1)
	go func() {
		c, err := p.Connect(context.Background())
		if err == nil {
			defer c.Close()
			_, err = c.(*conn).ExecContext(context.Background(), "SELECT 'first'", nil)
		}
		first <- err
	}()
	eventually(t, "the first waiter queued", func() bool { return p.Stats().Waiting == 1 })
	second := make(chan error, 1)
	go func() {
		c, err := p.Connect(context.Background())
		if err == nil {
			defer c.Close()
			_, err = c.(*conn).ExecContext(context.Background(), "SELECT 'second'", nil)
		}
		second <- err
	}()
	eventually(t, "the second waiter queued", func() bool { return p.Stats().Waiting == 2 })
	// The held connection comes back and fails its probe when handed to the first waiter, which
	// closes it and must wait again for the creator's replacement — ahead of the second.
	fc.Conns()[0].FailNext(driver.ErrBadConn) // the next call on it: the probe's PING
	held.Close()
	// The replacement goes to the first waiter; the second gets it only when the first is done.
	var order []string
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		for _, ch := range []chan error{first, second} {
			if err := <-ch; err != nil {
				t.Errorf("waiter: %v", err)
			}
		}
		close(done)
	}()
	<-done
	for _, c := range fc.Conns() {
		for _, q := range c.Log() {
			if strings.Contains(q, "first") || strings.Contains(q, "second") {
				mu.Lock()
				order = append(order, q)
				mu.Unlock()
			}
		}
	}
	if want := []string{"SELECT 'first'", "SELECT 'second'"}; !slices.Equal(order, want) {
		t.Fatalf("served in order %q; want %q", order, want)
	}
}

// The queue keeps ticket order whatever the order of returns.
func TestRequeueKeepsArrivalOrder(t *testing.T) {
	var s store
	ws := make([]*waiter, 5)
	for i := range ws {
		ws[i] = &waiter{ch: make(chan *entry, 1), ticket: uint64(i + 1)}
	}
	s.mu.Lock()
	s.pushBackLocked(ws[2])
	s.pushBackLocked(ws[4])
	s.requeueLocked(ws[3])
	s.requeueLocked(ws[0])
	s.requeueLocked(ws[1])
	var got []uint64
	for w := s.head; w != nil; w = w.next {
		got = append(got, w.ticket)
	}
	var back []uint64
	for w := s.tail; w != nil; w = w.prev {
		back = append(back, w.ticket)
	}
	s.mu.Unlock()
	if !slices.Equal(got, []uint64{1, 2, 3, 4, 5}) || !slices.Equal(back, []uint64{5, 4, 3, 2, 1}) || s.nwait != 5 {
		t.Fatalf("queue %v (backwards %v, nwait %d); want tickets in order", got, back, s.nwait)
	}
}

// Acquires blocked by Suspend count as waiting, against MaxWaiters too.
func TestSuspendedAcquiresCountAgainstMaxWaiters(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1, MaxWaiters: 2})
	eventually(t, "the pool filled", func() bool { return p.Stats().Idle == 1 })
	p.Suspend()
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			c, err := p.Connect(context.Background())
			if err == nil {
				_ = c.Close()
			}
			errs <- err
		}()
	}
	eventually(t, "two acquires blocked by Suspend", func() bool { return p.Stats().Waiting == 2 })
	if _, err := p.Connect(context.Background()); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("third acquire while suspended with MaxWaiters 2 = %v; want ErrPoolExhausted", err)
	}
	if st := p.Stats(); st.Exhausted != 1 {
		t.Errorf("Stats().Exhausted = %d; want 1", st.Exhausted)
	}
	p.Resume()
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("blocked acquire after Resume: %v", err)
		}
	}
	if st := p.Stats(); st.Waiting != 0 {
		t.Errorf("Stats().Waiting = %d after Resume; want 0", st.Waiting)
	}
}

// Connect racing Close: every Connect either gets a connection (and returning it closes it)
// or ErrClosed; nothing leaks, Close returns, no goroutine is left.
func TestConnectRacingClose(t *testing.T) {
	for i := range 50 {
		fc := fakedb.New()
		p, err := New(fc, Config{MaxConns: 2, Logger: quiet, CloseTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 8 {
			wg.Go(func() {
				<-start
				for {
					c, err := p.Connect(context.Background())
					if err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("Connect during Close = %v; want ErrClosed", err)
						}
						return
					}
					_ = c.Close()
				}
			})
		}
		close(start)
		if i%2 == 1 {
			eventually(t, "some acquires", func() bool { return p.Stats().Acquires > 0 })
		}
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		wg.Wait()
		if n := fc.Open(); n != 0 {
			t.Fatalf("round %d: %d connections left open after Close", i, n)
		}
		if st := p.Stats(); st.Total != 0 {
			t.Fatalf("round %d: Stats().Total = %d after Close", i, st.Total)
		}
	}
}

// A DB from OpenDB must not get a MaxOpen (database/sql would queue borrowers itself, in
// random order, and could park a connection its background opener got for a waiter that gave
// up): housekeeping says so, once per DB, naming the fix.
func TestOpenDBWarnsAboutMaxOpen(t *testing.T) {
	var logs syncBuffer
	p, _ := newPool(t, Config{MaxConns: 2, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	good, bad := p.OpenDB(), p.OpenDB()
	defer good.Close()
	defer bad.Close()
	p.housekeep()
	if strings.Contains(logs.String(), "SetMaxOpenConns") {
		t.Fatalf("warned about DBs left as OpenDB made them: %s", logs.String())
	}
	bad.SetMaxOpenConns(2)
	p.housekeep()
	p.housekeep()
	if n := strings.Count(logs.String(), "SetMaxOpenConns was called on a DB from OpenDB"); n != 1 {
		t.Fatalf("%d warnings after SetMaxOpenConns on one DB and two passes; want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "SetMaxOpenConns(0)") || !strings.Contains(logs.String(), "max_open=2") {
		t.Errorf("the warning does not say what was set and how to undo it: %s", logs.String())
	}
}
