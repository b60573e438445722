package pool

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/fakedb"
)

// tenantOf returns the stats of key ("" the others) from s.
func tenantOf(s Stats, key string) TenantStats {
	for _, ts := range s.Tenants {
		if ts.Key == key {
			return ts
		}
	}
	return TenantStats{Key: "missing " + key}
}

// Waiters of two tenants with equal weights are served alternately, each tenant's in arrival
// order, however many of one tenant queued first.
func TestTenantsAlternateAndFIFOWithin(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1, Tenants: map[string]Tenant{"loud": {}, "quiet": {}}})
	held := mustConnect(t, p)
	got, errs := make(chan string, 16), make(chan error, 16)
	loud, quiet := WithTenant(context.Background(), "loud"), WithTenant(context.Background(), "quiet")
	for i := range 5 {
		queueWaiter(t, p, loud, fmt.Sprint("L", i), got, errs)
	}
	for i := range 3 {
		queueWaiter(t, p, quiet, fmt.Sprint("Q", i), got, errs)
	}
	if ts := tenantOf(p.Stats(), "loud"); ts.Waiting != 5 {
		t.Errorf("Stats.Tenants[loud].Waiting = %d; want 5", ts.Waiting)
	}
	_ = held.Close()
	var order []string
	for range 8 {
		select {
		case name := <-got:
			order = append(order, name)
		case err := <-errs:
			t.Fatal(err)
		}
	}
	want := []string{"L0", "Q0", "L1", "Q1", "L2", "Q2", "L3", "L4"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("served %v; want %v (alternating tenants, FIFO within one)", order, want)
	}
	eventually(t, "the connection is back", func() bool { return tenantOf(p.Stats(), "loud").Held == 0 })
	st := p.Stats()
	if l, q := tenantOf(st, "loud"), tenantOf(st, "quiet"); l.Acquires != 5 || q.Acquires != 3 || l.Held != 0 || q.Held != 0 {
		t.Errorf("Stats.Tenants = %+v; want loud 5 acquires, quiet 3, none held", st.Tenants)
	}
}

// A tenant of weight 3 gets three hand-outs for each of a weight-1 tenant's while both wait.
func TestTenantsWeights(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1, Tenants: map[string]Tenant{"a": {Weight: 3}, "b": {Weight: 1}}})
	held := mustConnect(t, p)
	got, errs := make(chan string, 16), make(chan error, 16)
	for i := range 8 {
		queueWaiter(t, p, WithTenant(context.Background(), "b"), fmt.Sprint("b", i), got, errs)
	}
	for i := range 8 {
		queueWaiter(t, p, WithTenant(context.Background(), "a"), fmt.Sprint("a", i), got, errs)
	}
	_ = held.Close()
	na := 0
	for range 8 {
		select {
		case name := <-got:
			if name[0] == 'a' {
				na++
			}
		case err := <-errs:
			t.Fatal(err)
		}
	}
	// Of the first 8 hand-outs, a (weight 3 of 4) gets 6, b 2 (±1 for the order of ties).
	if na < 5 || na > 7 {
		t.Errorf("tenant a got %d of the first 8 hand-outs; want 6 (weight 3 against 1)", na)
	}
	for range 8 {
		select {
		case <-got:
		case err := <-errs:
			t.Fatal(err)
		}
	}
}

// Without keys, a pool with Tenants serves its waiters first come, first served (one class).
func TestTenantsNoKeyIsFIFO(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1, Tenants: map[string]Tenant{"x": {Weight: 5}}})
	held := mustConnect(t, p)
	got, errs := make(chan string, 8), make(chan error, 8)
	for i := range 4 {
		queueWaiter(t, p, WithTenant(context.Background(), fmt.Sprint("unlisted", i)), fmt.Sprint(i), got, errs)
	}
	_ = held.Close()
	for i := range 4 {
		select {
		case name := <-got:
			if name != fmt.Sprint(i) {
				t.Fatalf("waiter %s served as number %d; want arrival order", name, i)
			}
		case err := <-errs:
			t.Fatal(err)
		}
	}
	if o := tenantOf(p.Stats(), ""); o.Acquires != 5 { // with the held one, which had no key
		t.Errorf(`Stats.Tenants[""].Acquires = %d; want 5`, o.Acquires)
	}
}

// A tenant at its Cap waits although connections are idle; other tenants still take them; the
// capped waiter is served when one of its tenant's connections comes back.
func TestTenantCap(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 4, Tenants: map[string]Tenant{"a": {Cap: 2}}})
	eventually(t, "the pool is full", func() bool { return p.Stats().Idle == 4 })
	a := WithTenant(context.Background(), "a")
	var hold []*conn
	for range 2 {
		c, err := p.Connect(a)
		if err != nil {
			t.Fatal(err)
		}
		hold = append(hold, c.(*conn))
	}
	short, cancel := context.WithTimeout(a, 300*time.Millisecond)
	defer cancel()
	if _, err := p.Connect(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third Connect of tenant a (Cap 2) = %v; want it to wait until its deadline", err)
	}
	b, err := p.Connect(WithTenant(context.Background(), "b"))
	if err != nil {
		t.Fatalf("tenant b while a is at its cap: %v", err)
	}
	defer b.Close()
	got, errs := make(chan string, 1), make(chan error, 1)
	queueWaiter(t, p, a, "a3", got, errs)
	if ts := tenantOf(p.Stats(), "a"); ts.Held != 2 || ts.Waiting != 1 || ts.Failed != 1 {
		t.Errorf("Stats.Tenants[a] = %+v; want 2 held, 1 waiting, 1 failed", ts)
	}
	_ = hold[0].Close()
	select {
	case <-got:
	case err := <-errs:
		t.Fatal(err)
	}
	_ = hold[1].Close()
	eventually(t, "tenant a holds nothing", func() bool { return tenantOf(p.Stats(), "a").Held == 0 })
	if st := p.Stats(); st.Closed != 0 {
		t.Errorf("Stats.Closed = %d; want 0: waiting at a cap closes nothing", st.Closed)
	}
}

// Through p.OpenDB(), a tenant at its cap is refused a connection parked in database/sql's idle
// list without closing it: it waits in the pool until one of its own comes back.
func TestTenantCapThroughDB(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 3, Tenants: map[string]Tenant{"a": {Cap: 1}}})
	db := p.OpenDB()
	defer db.Close()
	a, b := WithTenant(context.Background(), "a"), WithTenant(context.Background(), "b")
	ca, err := db.Conn(a)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := db.Conn(b)
	if err != nil {
		t.Fatal(err)
	}
	_ = cb.Close() // parked in database/sql's idle list
	got := make(chan *sql.Conn, 1)
	go func() {
		c, err := db.Conn(a)
		if err != nil {
			t.Errorf("second db.Conn of tenant a: %v", err)
		}
		got <- c
	}()
	eventually(t, "tenant a's second borrow waits in the pool", func() bool { return tenantOf(p.Stats(), "a").Waiting == 1 })
	if ts := tenantOf(p.Stats(), "a"); ts.Held != 1 {
		t.Errorf("Stats.Tenants[a].Held = %d; want 1 (Cap)", ts.Held)
	}
	_ = ca.Close()
	if c := <-got; c != nil {
		_ = c.Close()
	}
	if st := p.Stats(); st.Closed != 0 {
		t.Errorf("Stats.Closed = %d; want 0: a refused parked connection goes back to the pool", st.Closed)
	}
}

func TestTenantsConfigRejected(t *testing.T) {
	for _, tc := range []Tenant{{Weight: -1}, {Cap: -1}, {Weight: maxTenantWeight + 1}} {
		_, err := New(fakedb.New(), Config{Logger: quiet, Tenants: map[string]Tenant{"t": tc}})
		if err == nil {
			t.Errorf("New with Tenants[t] = %+v succeeded; want an error", tc)
		}
	}
}

// A loud tenant with ten goroutines borrowing back to back does not make a quiet tenant wait
// behind its queue: while a quiet acquire waits, at most about one loud hand-out per connection
// happens (first come, first served would serve all ten loud waiters first).
func TestTenantQuietNotBehindLoud(t *testing.T) {
	for _, tenants := range []bool{true, false} {
		t.Run(fmt.Sprint("tenants=", tenants), func(t *testing.T) {
			cfg := Config{MaxConns: 2}
			if tenants {
				cfg.Tenants = map[string]Tenant{"loud": {}, "quiet": {}}
			}
			p, _ := newPool(t, cfg)
			var loudN atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			loud := WithTenant(context.Background(), "loud")
			for range 10 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						c, err := p.Connect(loud)
						if err != nil {
							t.Error(err)
							return
						}
						loudN.Add(1)
						time.Sleep(200 * time.Microsecond) // the statement
						_ = c.Close()
					}
				}()
			}
			eventually(t, "the loud tenant queues", func() bool { return p.Stats().Waiting >= 5 })
			quiet := WithTenant(context.Background(), "quiet")
			worst := int64(0)
			for range 20 {
				before := loudN.Load()
				c, err := p.Connect(quiet)
				if err != nil {
					t.Fatal(err)
				}
				worst = max(worst, loudN.Load()-before)
				_ = c.Close()
			}
			close(stop)
			wg.Wait()
			if tenants && worst > 4 {
				t.Errorf("a quiet acquire waited while %d loud borrows were handed out; want at most ~2 (one per connection)", worst)
			}
			t.Logf("tenants=%v: most loud hand-outs during one quiet acquire: %d", tenants, worst)
		})
	}
}

// While the pool is congested (overload control), the tenant with the longest backlog is shed;
// a quiet tenant's waiter is not, and is served by the next hand-out.
func TestTenantCongestionShedsTheLoud(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1, overloadInterval: time.Millisecond, OverloadTarget: 20 * time.Millisecond,
		Tenants: map[string]Tenant{"loud": {}, "quiet": {}}})
	held := mustConnect(t, p)
	got, errs := make(chan string, 8), make(chan error, 8)
	loud, quiet := WithTenant(context.Background(), "loud"), WithTenant(context.Background(), "quiet")
	for i := range 3 {
		queueWaiter(t, p, loud, fmt.Sprint("loud", i), got, errs)
	}
	time.Sleep(5 * time.Millisecond) // the queue stands for more than the congestion interval
	markReturning(p)                 // connections come back to waiters
	p.noteLoss()                     // and a borrower missed its deadline
	queueWaiter(t, p, quiet, "quiet", got, errs)
	if !p.overloadStats().Congested {
		t.Fatal("not congested")
	}
	go func() {
		_, err := p.Connect(loud)
		errs <- err
	}()
	if err := <-errs; !errors.Is(err, ErrOverloaded) {
		t.Fatalf("a loud waiter queued while congested: %v; want ErrOverloaded after its shed bound", err)
	}
	if ts := tenantOf(p.Stats(), "quiet"); ts.Waiting != 1 {
		t.Fatalf("the quiet waiter, queued before the shed loud one, is no longer waiting (%+v): it was shed", ts)
	}
	_ = held.Close()
	quietServed, loudServed := false, 0
	for range 4 {
		select {
		case name := <-got:
			quietServed = quietServed || name == "quiet"
			if name != "quiet" {
				loudServed++
			}
		case err := <-errs:
			if !errors.Is(err, ErrOverloaded) || !strings.HasPrefix(err.Error(), "loud") {
				t.Errorf("%v; want only loud waiters shed", err)
			}
		}
	}
	// The release sheds the loud backlog down to one waiter (a class's last is not shed).
	if !quietServed || loudServed > 1 {
		t.Errorf("quiet served: %v, loud waiters served: %d; want the quiet one and at most one loud", quietServed, loudServed)
	}
}

// While the adaptive limit is engaged and two tenants contend, the tenant beyond its share is
// throttled to the knee's part of the limit less one connection per other tenant (limit 4:
// 4 − √4 − 1 = 1), so that a connection it frees is not taken by it again; the limit does not
// grow meanwhile. Once the other tenant stops borrowing, the throttle ends at the next window
// and the throttled tenant's waiters are served from the idle connections.
func TestTenantThrottleWhileContending(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 8, Tenants: map[string]Tenant{"loud": {}, "quiet": {}}})
	loud, quiet := WithTenant(context.Background(), "loud"), WithTenant(context.Background(), "quiet")
	var loudHeld []driver.Conn
	for range 7 { // with the quiet one, MaxConns: waiters queue

		c, err := p.Connect(loud)
		if err != nil {
			t.Fatal(err)
		}
		loudHeld = append(loudHeld, c)
	}
	quietHeld, err := p.Connect(quiet)
	if err != nil {
		t.Fatal(err)
	}
	o := &p.ovl
	got, errs := make(chan string, 4), make(chan error, 4)
	queueWaiter(t, p, loud, "loud waiter 1", got, errs)
	queueWaiter(t, p, loud, "loud waiter 2", got, errs)
	o.limit.Store(4) // engaged: releases set connections aside until 4 circulate
	window := func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.throttled = p.throttleTenants()
		return o.throttled
	}
	if !window() {
		t.Fatal("two tenants contend, loud beyond its share: no throttle")
	}
	if th := p.store.ten.index["loud"].throttle.Load(); th != 1 {
		t.Fatalf("loud throttled to %d; want 1 (limit 4 − √4, less 1 for the other tenant)", th)
	}
	if th := p.store.ten.index["quiet"].throttle.Load(); th != 0 {
		t.Fatalf("quiet throttled to %d; want none (under its share)", th)
	}
	o.mu.Lock()
	o.baseline, o.limitF = int64(time.Millisecond), 4
	p.store.waiting.Add(1)
	o.congested.Store(true)
	p.adjustLimit(int64(time.Millisecond), 0) // flat latency, demand: would grow by √4
	o.congested.Store(false)
	p.store.waiting.Add(-1)
	grown := o.limit.Load()
	o.mu.Unlock()
	if grown != 4 {
		t.Fatalf("the limit moved to %d while a tenant is throttled; want 4", grown)
	}
	_ = quietHeld.Close() // set aside (4 of 8 are), then one comes back to the idle stack
	for _, c := range loudHeld[:4] {
		_ = c.Close()
	}
	if s := p.overloadStats(); s.Benched != 4 {
		t.Fatalf("%d connections set aside; want 4", s.Benched)
	}
	if st := p.Stats(); st.Waiting != 2 {
		t.Fatalf("%d waiting; want the loud tenant's 2 waiting beside an idle connection (it holds 3, throttled to 1)", st.Waiting)
	}
	if window() { // quiet borrowed nothing since: no contention
		t.Fatal("the throttle stayed after the quiet tenant stopped borrowing")
	}
	for range 2 {
		select {
		case <-got:
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(10 * time.Second):
			t.Fatal("the loud waiters were not served from the idle connections once the throttle ended")
		}
	}
	for _, c := range loudHeld[4:] {
		_ = c.Close()
	}
}
