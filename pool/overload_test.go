package pool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// An acquire refused because it cannot finish matches both ErrOverloaded and
// context.DeadlineExceeded; one shed under congestion matches ErrOverloaded only.
func TestOverloadErrorIs(t *testing.T) {
	cf := error(&overloadError{Pool: "p", CannotFinish: true, Left: time.Millisecond, Estimate: 5 * time.Millisecond})
	if !errors.Is(cf, ErrOverloaded) || !errors.Is(cf, context.DeadlineExceeded) {
		t.Errorf("cannot-finish error %q: Is(ErrOverloaded)=%v Is(DeadlineExceeded)=%v; want both", cf,
			errors.Is(cf, ErrOverloaded), errors.Is(cf, context.DeadlineExceeded))
	}
	shed := error(&overloadError{Pool: "p", Waited: 5 * time.Millisecond, Limit: 4})
	if !errors.Is(shed, ErrOverloaded) || errors.Is(shed, context.DeadlineExceeded) || errors.Is(shed, ErrAcquireTimeout) {
		t.Errorf("shed error %q: want ErrOverloaded only", shed)
	}
}

// A waiter whose context's deadline is nearer than the estimated borrow time fails at once,
// without waiting for its deadline.
func TestCannotFinishFailsAtOnce(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1, overloadInterval: time.Millisecond})
	held := mustConnect(t, p)
	defer held.Close()
	got, errs := make(chan string, 1), make(chan error, 1)
	qctx, qcancel := context.WithCancel(context.Background())
	defer qcancel()
	queueWaiter(t, p, qctx, "standing", got, errs)
	time.Sleep(5 * time.Millisecond)
	p.noteLoss()
	markReturning(p)
	p.ovl.holdEst.Store(int64(time.Hour)) // every borrow takes an hour now
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err := p.Connect(ctx)
	if !errors.Is(err, ErrOverloaded) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Connect = %v; want an error matching ErrOverloaded and context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("failed after %v; want at once", took)
	}
	if s := p.overloadStats(); s.CannotFinish != 1 {
		t.Errorf("overloadStats().CannotFinish = %d; want 1", s.CannotFinish)
	}
	qcancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("the standing waiter: %v; want its cancellation", err)
	}
	// Without a deadline nothing is refused: the acquire waits for the connection.
	done := make(chan error, 1)
	go func() {
		c, err := p.Connect(context.Background())
		if err == nil {
			_ = c.Close()
		}
		done <- err
	}()
	eventually(t, "the waiter without a deadline is queued", func() bool { return p.Stats().Waiting == 1 })
	_ = held.Close()
	if err := <-done; err != nil {
		t.Errorf("Connect without a deadline = %v; want the released connection", err)
	}
}

// queueWaiter starts an acquire and waits until it is queued; its result arrives on the
// returned channel (the connection is closed at once).
func queueWaiter(t *testing.T, p *Pool, ctx context.Context, name string, got chan<- string, errs chan<- error) {
	t.Helper()
	before := p.Stats().Waiting
	go func() {
		c, err := p.Connect(ctx)
		if err != nil {
			errs <- fmt.Errorf("%s: %w", name, err)
			return
		}
		got <- name
		_ = c.Close()
	}()
	eventually(t, name+" is queued", func() bool { return p.Stats().Waiting == before+1 })
}

// A standing queue whose waiters meet their deadlines is not congestion: waiters are served
// first come, first served however long the queue has not emptied (the saturated benchmark's
// guarantee).
func TestStandingQueueWithoutLossStaysFIFO(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1, overloadInterval: time.Millisecond, OverloadTarget: 5 * time.Millisecond})
	held := mustConnect(t, p)
	got, errs := make(chan string, 3), make(chan error, 3)
	queueWaiter(t, p, context.Background(), "first", got, errs)
	time.Sleep(5 * time.Millisecond) // the queue has not emptied for more than the congestion interval
	queueWaiter(t, p, context.Background(), "second", got, errs)
	queueWaiter(t, p, context.Background(), "third", got, errs)
	_ = held.Close()
	for _, want := range []string{"first", "second", "third"} {
		select {
		case name := <-got:
			if name != want {
				t.Fatalf("%s served; want %s (FIFO)", name, want)
			}
		case err := <-errs:
			t.Fatal(err)
		}
	}
	if p.overloadStats().Congested {
		t.Error("congested without any deadline loss")
	}
}

// Under congestion (the queue has not emptied for the congestion interval, and a borrower lost its
// deadline meanwhile) a freed connection goes to the newest waiter; and a waiter waits at most
// its shed bound, then fails with ErrOverloaded.
func TestCongestionServesNewestAndSheds(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1, overloadInterval: time.Millisecond, OverloadTarget: time.Hour})
	held := mustConnect(t, p)
	got, errs := make(chan string, 4), make(chan error, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	queueWaiter(t, p, ctx, "oldest", got, errs)
	time.Sleep(5 * time.Millisecond)
	p.noteLoss() // a borrower missed its deadline
	markReturning(p)
	queueWaiter(t, p, ctx, "middle", got, errs)
	queueWaiter(t, p, ctx, "newest", got, errs)
	if !p.overloadStats().Congested {
		t.Fatal("not congested after a loss and a queue standing for more than the congestion interval")
	}
	_ = held.Close() // each waiter served closes its connection at once: the next goes on
	for _, want := range []string{"newest", "middle", "oldest"} {
		select {
		case name := <-got:
			if name != want {
				t.Fatalf("%s served; want %s (newest first under congestion)", name, want)
			}
		case err := <-errs:
			t.Fatal(err)
		}
	}

	// The shed bound: a short target, and the estimate below it.
	p2, _ := newPool(t, Config{MaxConns: 1, overloadInterval: time.Millisecond, OverloadTarget: 20 * time.Millisecond})
	held2 := mustConnect(t, p2)
	defer held2.Close()
	got2, errs2 := make(chan string, 2), make(chan error, 2)
	queueWaiter(t, p2, context.Background(), "first", got2, errs2)
	time.Sleep(5 * time.Millisecond)
	p2.noteLoss()
	markReturning(p2)
	start := time.Now()
	go func() {
		_, err := p2.Connect(context.Background())
		errs2 <- err
	}()
	err := <-errs2
	if !errors.Is(err, ErrOverloaded) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a waiter under congestion: %v; want ErrOverloaded after its shed bound", err)
	}
	if took := time.Since(start); took < 20*time.Millisecond || took > 10*time.Second {
		t.Errorf("shed after %v; want about OverloadTarget (20ms)", took)
	}
	if s := p2.overloadStats(); s.Shed == 0 {
		t.Errorf("overloadStats = %+v; want Shed counted", s)
	}
}

// With overload control off the queue is first come, first served, congested or not.
func TestOverloadOffKeepsFIFO(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1, OverloadTarget: -1, overloadInterval: time.Millisecond})
	held := mustConnect(t, p)
	got, errs := make(chan string, 2), make(chan error, 2)
	queueWaiter(t, p, context.Background(), "first", got, errs)
	time.Sleep(5 * time.Millisecond)
	p.noteLoss()
	queueWaiter(t, p, context.Background(), "second", got, errs)
	_ = held.Close()
	if name := <-got; name != "first" {
		t.Fatalf("%s served first; want first (overload control off)", name)
	}
	if name := <-got; name != "second" {
		t.Fatalf("%s served second", name)
	}
	if s := p.overloadStats(); s.Congested || s.Limit != 1 {
		t.Errorf("overloadStats = %+v; want not congested, Limit = MaxConns", s)
	}
}

// The adaptive limit sets connections above it aside on release (open, idle, counted in
// Stats.Idle and overloadStats.Benched) and brings them back when it rises; Close closes them.
func TestAdaptiveLimitBenchesAndRestores(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 4, OverloadTarget: 5 * time.Millisecond})
	held := holdAll(t, p, 4)
	p.ovl.limit.Store(2) // engaged at 2
	for _, c := range held {
		_ = c.Close()
	}
	s := p.overloadStats()
	if s.Limit != 2 || s.Benched != 2 {
		t.Fatalf("after four releases with the limit at 2: %+v; want Limit 2, Benched 2", s)
	}
	if st := p.Stats(); st.Total != 4 || st.Idle != 4 {
		t.Fatalf("Stats = %v; want 4 open, all idle", st)
	}
	// Only two circulate: a third borrower waits.
	a, b := mustConnect(t, p), mustConnect(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := p.Connect(ctx)
	cancel()
	if err == nil {
		t.Fatal("a third borrow succeeded with the limit at 2")
	}
	// The limit rises: the benched come back into circulation.
	p.ovl.limit.Store(4)
	p.unbench(4)
	c, d := mustConnect(t, p), mustConnect(t, p)
	for _, x := range []*conn{a, b, c, d} {
		_ = x.Close()
	}
	if s := p.overloadStats(); s.Benched != 0 {
		t.Errorf("after the limit rose to MaxConns: %+v; want none benched", s)
	}
	// Close closes benched connections too.
	p.ovl.limit.Store(1)
	e1, e2 := mustConnect(t, p), mustConnect(t, p)
	_, _ = e1.Close(), e2.Close()
	if s := p.overloadStats(); s.Benched == 0 {
		t.Fatalf("%+v; want some benched", s)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Total != 0 {
		t.Errorf("after Close: %v; want no connection open", st)
	}
}

// The gradient step: latency far above the baseline brings the limit down towards the floor;
// latency at the baseline with waiters grows it; statements that ran into their deadlines halve
// it; back at MaxConns without congestion it disengages.
func TestAdaptiveLimitGradient(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 64, AdaptiveLimitFloor: 2, OverloadTarget: 5 * time.Millisecond})
	o := &p.ovl
	o.limit.Store(32)
	p.store.waiting.Add(1) // someone waits: demand beyond the limit
	o.mu.Lock()
	o.baseline = int64(time.Millisecond)
	for range 20 {
		p.adjustLimit(int64(40*time.Millisecond), 0) // 40× the baseline
	}
	low := o.limit.Load()
	o.mu.Unlock()
	if low > 12 || low < 2 {
		t.Errorf("limit after 20 windows at 40× the baseline = %d; want near the floor (2..12)", low)
	}
	// Nobody waits and the pool is not congested: however slow the statements, the limit does
	// not bind; it grows back and lets go.
	p.store.waiting.Add(-1)
	o.mu.Lock()
	for i := 0; i < 100 && o.limit.Load() != 0; i++ {
		p.adjustLimit(int64(40*time.Millisecond), 0)
	}
	o.mu.Unlock()
	if l := o.limit.Load(); l != 0 {
		t.Errorf("limit after 100 windows without waiters = %d; want disengaged (0: MaxConns)", l)
	}
	o.limit.Store(low)
	o.limitF = float64(low)
	p.store.waiting.Add(1)
	o.mu.Lock()
	for i := 0; i < 100 && o.limit.Load() != 0; i++ { // sampledRelease steps only while engaged
		p.adjustLimit(int64(time.Millisecond), 0)
	}
	o.mu.Unlock()
	p.store.waiting.Add(-1)
	if l := o.limit.Load(); l != 0 {
		t.Errorf("limit after 100 windows at the baseline with waiters = %d; want disengaged (0: MaxConns)", l)
	}
	o.limit.Store(40)
	o.limitF = 40
	o.mu.Lock()
	p.adjustLimit(int64(time.Millisecond), 3)
	o.mu.Unlock()
	if l := o.limit.Load(); l >= 40 || l == 0 {
		t.Errorf("limit after a window with deadline losses = %d; want it cut (from 40)", l)
	}
}

// The limit finds the database's knee: on a simulated database of k cores whose statements take
// 1 ms alone (a window's mean borrow time is max(1, limit/k) ms, ±10 % noise), starting where
// it engages (the floor) under a standing queue, the limit settles near k plus a queue of
// about √k: on one core at 3–5 (a limit of 11, where the gradient with a tolerance of 2
// settled, adds 7 ms to every statement for nothing), on 16 cores between 16 and 24 (no
// throughput lost below the knee), reaching 3/4 of the knee within 20 windows.
func TestAdaptiveLimitFindsTheKnee(t *testing.T) {
	for _, tc := range []struct {
		cores  float64
		lo, hi float64 // the limit's range over the last 100 windows (mean)
	}{{1, 3, 5}, {4, 5, 8.5}, {16, 16, 24}} {
		p, _ := newPool(t, Config{MaxConns: 64, OverloadTarget: 5 * time.Millisecond})
		o := &p.ovl
		o.limit.Store(int32(o.startLimit(p)))
		o.congested.Store(true)
		p.store.waiting.Add(1)
		rng := rand.New(rand.NewPCG(uint64(tc.cores), 1))
		var sum float64
		reached := -1 // the first window at 3/4 of the knee
		o.mu.Lock()
		o.baseline = 0
		for i := range 300 {
			l := float64(o.limit.Load())
			mean := int64(float64(time.Millisecond) * max(1, l/tc.cores) * (0.9 + 0.2*rng.Float64()))
			if o.baseline == 0 || mean < o.baseline {
				o.baseline = mean
			}
			p.adjustLimit(mean, 0)
			if reached < 0 && float64(o.limit.Load()) >= 0.75*tc.cores {
				reached = i
			}
			if i >= 200 {
				sum += float64(o.limit.Load())
			}
		}
		o.mu.Unlock()
		p.store.waiting.Add(-1)
		o.congested.Store(false)
		if avg := sum / 100; avg < tc.lo || avg > tc.hi {
			t.Errorf("%v cores: the limit averaged %.1f over the last 100 windows; want %.0f..%.1f", tc.cores, avg, tc.lo, tc.hi)
		}
		if reached < 0 || reached > 20 {
			t.Errorf("%v cores: the limit reached 3/4 of the knee after %d windows; want within 20 (2 s)", tc.cores, reached)
		}
	}
}

// Config: the overload settings' defaults and fix-ups.
func TestOverloadConfig(t *testing.T) {
	p0, _ := newPool(t, Config{MaxConns: 3, OverloadTarget: -1, AdaptiveLimitFloor: 2})
	if c := p0.Config(); p0.ovl.on || p0.ovl.adaptive || c.OverloadTarget != -1 {
		t.Errorf("OverloadTarget -1: overload control on=%v, adaptive on=%v, target %v; want off, off, -1",
			p0.ovl.on, p0.ovl.adaptive, c.OverloadTarget)
	}
	p, _ := newPool(t, Config{MaxConns: 3})
	c := p.Config()
	if c.OverloadTarget != defaultOverloadTarget || c.overloadInterval != defaultOverloadInterval || c.AdaptiveLimitFloor != defaultLimitFloor {
		t.Errorf("Config = target %v interval %v floor %d; want %v, %v, %d", c.OverloadTarget, c.overloadInterval,
			c.AdaptiveLimitFloor, defaultOverloadTarget, defaultOverloadInterval, defaultLimitFloor)
	}
	if !p.ovl.on || !p.ovl.adaptive {
		t.Errorf("defaults: overload control on=%v, adaptive limit on=%v; want on, on", p.ovl.on, p.ovl.adaptive)
	}
	if p2, _ := newPool(t, Config{MaxConns: 3, AdaptiveLimitFloor: -5}); !p2.ovl.on || p2.ovl.adaptive || p2.Config().AdaptiveLimitFloor != -1 {
		t.Errorf("AdaptiveLimitFloor -5: overload control on=%v, adaptive limit on=%v, floor %d; want on, off, -1",
			p2.ovl.on, p2.ovl.adaptive, p2.Config().AdaptiveLimitFloor)
	}
	p1, _ := newPool(t, Config{MaxConns: 3, AdaptiveLimitFloor: 9, OverloadTarget: 5 * time.Millisecond})
	if !p1.ovl.adaptive || p1.Config().AdaptiveLimitFloor != 3 {
		t.Errorf("AdaptiveLimitFloor 9 with MaxConns 3: adaptive=%v floor=%d; want on, 3", p1.ovl.adaptive, p1.Config().AdaptiveLimitFloor)
	}
	p2, _ := newPool(t, Config{OverloadTarget: -5, AdaptiveLimitFloor: 2})
	if p2.ovl.on || p2.ovl.adaptive || p2.Config().OverloadTarget != -1 {
		t.Errorf("OverloadTarget negative: on=%v adaptive=%v target=%v; want everything off", p2.ovl.on, p2.ovl.adaptive, p2.Config().OverloadTarget)
	}
}

// A waiter served after waiting longer than the time it has left counts as a loss for
// congestion (the queue eats deadlines), before any deadline passes; one with time to spare
// does not.
func TestNearMissCountsAsLoss(t *testing.T) {
	for _, tc := range []struct {
		deadline time.Duration
		want     bool
	}{{time.Hour, false}, {300 * time.Millisecond, true}} {
		p, _ := newPool(t, Config{MaxConns: 1, overloadInterval: time.Millisecond, OverloadTarget: 5 * time.Millisecond})
		held := mustConnect(t, p)
		ctx, cancel := context.WithTimeout(context.Background(), tc.deadline)
		done := make(chan error, 1)
		go func() {
			c, err := p.Connect(ctx)
			if err == nil {
				_ = c.Close()
			}
			done <- err
		}()
		eventually(t, "the waiter is queued", func() bool { return p.Stats().Waiting == 1 })
		time.Sleep(160 * time.Millisecond) // more than half the 300ms deadline
		_ = held.Close()
		err := <-done
		cancel()
		if err != nil {
			if tc.want {
				t.Skipf("the waiter missed its deadline on a slow machine: %v", err)
			}
			t.Fatal(err)
		}
		if got := p.ovl.lastLoss.Load() != 0; got != tc.want {
			t.Errorf("deadline %v: loss noted = %v; want %v", tc.deadline, got, tc.want)
		}
	}
}

// markReturning makes the pool's connections look as if they came back to waiters just now
// (congestion needs returns); the next return to a waiter stamps the real time again.
func markReturning(p *Pool) {
	p.store.mu.Lock()
	p.store.lastPut = math.MaxInt64 / 2
	p.store.mu.Unlock()
}

// A statement that ran into its deadline is no sign of congestion (a slow or stalled host, not
// a long queue): a standing queue with such losses, connections coming back, stays first come,
// first served.
func TestStatementLossIsNotCongestion(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1, overloadInterval: time.Millisecond, AdaptiveLimitFloor: 1})
	held := mustConnect(t, p)
	got, errs := make(chan string, 2), make(chan error, 2)
	queueWaiter(t, p, context.Background(), "first", got, errs)
	time.Sleep(5 * time.Millisecond)
	p.noteInterrupted(held.e, context.DeadlineExceeded) // its statement ran into its deadline
	markReturning(p)
	queueWaiter(t, p, context.Background(), "second", got, errs)
	if s := p.overloadStats(); s.Congested || p.ovl.lastLoss.Load() != 0 {
		t.Fatalf("congested=%v, loss noted=%v after a statement loss; want neither", s.Congested, p.ovl.lastLoss.Load() != 0)
	}
	_ = held.Close()
	for _, want := range []string{"first", "second"} {
		select {
		case name := <-got:
			if name != want {
				t.Fatalf("%s served; want %s (FIFO)", name, want)
			}
		case err := <-errs:
			t.Fatal(err)
		}
	}
}

// Congestion needs connections that come back. A standing queue losing deadlines while no
// connection is returned (a stalled host holds them all) is not congestion: no waiter is shed
// or failed as unable to finish; each gets its own deadline's error. And a congested pool
// whose connections stop coming back sheds nobody more: congestion ends.
func TestNoReturnsNoCongestion(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1, overloadInterval: 20 * time.Millisecond, OverloadTarget: 150 * time.Millisecond})
	held := mustConnect(t, p)
	defer held.Close()
	got, errs := make(chan string, 3), make(chan error, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	queueWaiter(t, p, ctx, "first", got, errs)
	time.Sleep(120 * time.Millisecond) // the queue stands, and nothing came back, for five intervals
	p.noteLoss()
	p.ovl.holdEst.Store(int64(time.Hour))
	queueWaiter(t, p, ctx, "stalled", got, errs)
	if p.overloadStats().Congested {
		t.Fatal("congested while no connection came back")
	}
	// Now congested (connections came back just now), then they stop: the shed bound (150 ms)
	// passes more than five intervals after the last return.
	p.store.mu.Lock()
	p.store.lastPut = p.nanotime()
	p.store.mu.Unlock()
	p.ovl.holdEst.Store(int64(time.Millisecond))
	queueWaiter(t, p, ctx, "then stalled", got, errs)
	if !p.overloadStats().Congested {
		t.Fatal("not congested: a standing queue, a loss and a return within the interval")
	}
	for range 3 {
		select {
		case name := <-got:
			t.Fatalf("%s served: the connection is held", name)
		case err := <-errs:
			if errors.Is(err, ErrOverloaded) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%v; want the context's deadline, not ErrOverloaded", err)
			}
		}
	}
	if s := p.overloadStats(); s.Congested || s.Shed != 0 || s.CannotFinish != 0 {
		t.Errorf("overloadStats = %+v; want not congested, nothing shed", s)
	}
}

// A stall lets the adaptive limit go: with the connections in circulation held (a stalled
// host) and nothing coming back, a waiter gets one the limit had set aside.
func TestStallReleasesBenched(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 4, overloadInterval: 10 * time.Millisecond})
	held := holdAll(t, p, 4)
	p.ovl.limit.Store(2) // engaged at 2
	for _, c := range held {
		_ = c.Close()
	}
	if s := p.overloadStats(); s.Benched != 2 {
		t.Fatalf("%+v; want 2 benched", s)
	}
	a, b := mustConnect(t, p), mustConnect(t, p) // the two in circulation, stalled
	defer a.Close()
	defer b.Close()
	time.Sleep(60 * time.Millisecond) // more than five intervals without a return
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := p.Connect(ctx)
	if err != nil {
		t.Fatalf("a borrow while the circulating connections stall: %v; want a benched one", err)
	}
	_ = c.Close()
	if s := p.overloadStats(); s.Limit != 4 {
		t.Errorf("%+v; want the limit let go (Limit = MaxConns)", s)
	}
}

// Connections above the limit coming back to the bench while someone waits are no stall: a limit
// engaged while many statements run (the database's own overload) keeps while the excess
// drains for longer than five intervals, instead of being let go and engaged again.
func TestDrainingExcessIsNoStall(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 8, overloadInterval: 20 * time.Millisecond})
	held := holdAll(t, p, 8)
	p.ovl.limit.Store(2) // engaged at 2 with eight running
	got, errs := make(chan string, 2), make(chan error, 2)
	queueWaiter(t, p, context.Background(), "first", got, errs)
	for _, c := range held[2:] { // the excess comes back over 240 ms, more than five intervals
		time.Sleep(40 * time.Millisecond)
		_ = c.Close()
	}
	if s := p.overloadStats(); s.Benched != 6 || s.Limit != 2 {
		t.Fatalf("after the excess came back: %+v; want 6 benched, Limit 2", s)
	}
	queueWaiter(t, p, context.Background(), "second", got, errs) // looks at congestion and stalls
	if s := p.overloadStats(); s.Limit != 2 {
		t.Errorf("after the excess drained for 240 ms with waiters: %+v; want the limit kept at 2 (no stall)", s)
	}
	_ = held[0].Close()
	_ = held[1].Close()
	for range 2 {
		select {
		case <-got:
		case err := <-errs:
			t.Fatal(err)
		}
	}
}

// Statements running into their deadlines engage the adaptive limit when they are many and a
// large share of the borrows (the database is overloaded: it queues the statements itself),
// not when they are a few among many quick borrows (a stalled host's connections).
func TestServerOverloadEngagesLimit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		handouts uint64
		losses   int
		want     bool
	}{{"many", 20, 12, true}, {"few among many", 10000, 12, false}, {"too few", 0, 4, false}} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newPool(t, Config{MaxConns: 8, overloadInterval: time.Millisecond})
			p.noteStmtLoss() // opens the window
			p.handouts.Add(tc.handouts)
			for range tc.losses - 2 {
				p.noteStmtLoss()
			}
			time.Sleep(5 * time.Millisecond) // the window is three intervals long
			p.noteStmtLoss()
			if got := p.ovl.limit.Load() != 0; got != tc.want {
				t.Errorf("%d losses among %d borrows: limit engaged = %v (limit %d); want %v", tc.losses, tc.handouts, got, p.ovl.limit.Load(), tc.want)
			}
			// Engaged by the database's overload, the losses count for congestion: the
			// standing queue the limit makes goes newest first without waiting for a waiter
			// to lose its deadline in it.
			if got := p.ovl.lastLoss.Load() != 0; got != tc.want {
				t.Errorf("%d losses among %d borrows: a loss noted for congestion = %v; want %v", tc.losses, tc.handouts, got, tc.want)
			}
		})
	}
}

// holdAll waits until p has n idle connections (MinConns) and borrows all of them.
func holdAll(t *testing.T, p *Pool, n int) []*conn {
	t.Helper()
	eventually(t, fmt.Sprint(n, " idle connections"), func() bool { return p.Stats().Idle == n })
	held := make([]*conn, 0, n)
	for range n {
		held = append(held, mustConnect(t, p))
	}
	return held
}
