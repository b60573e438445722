package pool

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// park borrows n connections through db at once and returns them, so that db parks them.
func park(t *testing.T, p *Pool, db *sql.DB, n int) {
	t.Helper()
	ctx := context.Background()
	var cs []*sql.Conn
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	for _, c := range cs {
		_ = c.Close()
	}
	if got := db.Stats().Idle; got != n {
		t.Fatalf("database/sql holds %d idle; want %d parked", got, n)
	}
	if got := p.reg.count(stateLent); got != n {
		t.Fatalf("%d entries lent; want %d", got, n)
	}
}

// The race of parking: a goroutine queues in the pool while a connection sits parked in a DB.
// Here the connection is parked in one DB and the waiter comes through Connect (it would be
// the same through a second DB); without reclaimLent it would wait until its deadline.
func TestWaiterReclaimsParkedConnection(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1})
	eventually(t, "pool filled", func() bool { return p.Stats().Idle == 1 })
	db := p.OpenDB()
	defer db.Close()
	park(t, p, db, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := p.Connect(ctx)
	if err != nil {
		t.Fatalf("Connect with the only connection parked in a DB: %v; want it brought back", err)
	}
	defer c.Close()
	if got := db.Stats().Idle; got != 0 {
		t.Errorf("database/sql still holds %d idle", got)
	}
	if p.flushes.Load() == 0 {
		t.Error("no bring-back counted")
	}
}

// While someone waits in the pool, a connection returned through database/sql goes to the
// waiter instead of into database/sql's idle list.
func TestReturnRoutedToPoolWaiter(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1})
	eventually(t, "pool filled", func() bool { return p.Stats().Idle == 1 })
	db := p.OpenDB()
	defer db.Close()
	ctx := context.Background()
	held, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		c, err := p.Connect(ctx)
		if err == nil {
			_ = c.Close()
		}
		got <- err
	}()
	eventually(t, "a waiter in the pool", func() bool { return p.Stats().Waiting == 1 })
	_ = held.Close()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not get the connection returned through database/sql")
	}
	if n := db.Stats().Idle; n != 0 {
		t.Errorf("database/sql parked %d connections while a goroutine waited in the pool", n)
	}
}

// Through OpenDB, saturated: waiters are served in arrival order, MaxWaiters refuses at once,
// AcquireTimeout ends a wait, although database/sql keeps the idle connections.
func TestOpenDBSaturatedIsFIFOAndBounded(t *testing.T) {
	ctx := context.Background()
	// AcquireTimeout.
	short, _ := newPool(t, Config{MaxConns: 1, AcquireTimeout: 250 * time.Millisecond})
	eventually(t, "pool filled", func() bool { return short.Stats().Idle == 1 })
	sdb := short.OpenDB()
	defer sdb.Close()
	sheld, err := sdb.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdb.Conn(ctx); !errors.Is(err, ErrAcquireTimeout) {
		t.Fatalf("db.Conn on a saturated pool = %v; want ErrAcquireTimeout", err)
	}
	_ = sheld.Close()

	p, _ := newPool(t, Config{MaxConns: 1, MaxWaiters: 3})
	eventually(t, "pool filled", func() bool { return p.Stats().Idle == 1 })
	db := p.OpenDB()
	defer db.Close()
	held, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := 1; i <= 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := db.Conn(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			_ = c.Close()
		}()
		eventually(t, fmt.Sprintf("waiter %d queued", i), func() bool { return p.Stats().Waiting == i })
	}
	// MaxWaiters (3) reached: the fourth fails at once.
	start := time.Now()
	if _, err := db.Conn(ctx); !errors.Is(err, ErrPoolExhausted) || time.Since(start) > time.Second {
		t.Fatalf("db.Conn beyond MaxWaiters = %v after %v; want ErrPoolExhausted at once", err, time.Since(start))
	}
	_ = held.Close()
	wg.Wait()
	if fmt.Sprint(order) != "[1 2 3]" {
		t.Fatalf("waiters served in order %v; want arrival order [1 2 3]", order)
	}
}

// No connection is stranded: borrowers through two DBs and through Connect, on a pool smaller
// than their number, all get connections within a generous deadline; at the end every
// connection is idle (in the pool or parked) and none is lost.
func TestNoConnectionStranded(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 2})
	eventually(t, "pool filled", func() bool { return p.Stats().Idle == 2 })
	db1, db2 := p.OpenDB(), p.OpenDB()
	defer db1.Close()
	defer db2.Close()
	var wg sync.WaitGroup
	for g := range 9 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 60 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				var err error
				switch g % 3 {
				case 0, 1:
					db := db1
					if g%3 == 1 {
						db = db2
					}
					var c *sql.Conn
					if c, err = db.Conn(ctx); err == nil {
						err = c.PingContext(ctx)
						_ = c.Close()
					}
				case 2:
					var c *conn
					var dc any
					if dc, err = p.Connect(ctx); err == nil {
						c = dc.(*conn)
						_ = c.Close()
					}
				}
				cancel()
				if err != nil {
					t.Errorf("goroutine %d: %v (stats %v)", g, err, p.Stats())
					return
				}
			}
		}()
	}
	wg.Wait()
	if s := p.Stats(); s.Total != 2 || s.Idle != 2 || s.Waiting != 0 {
		t.Fatalf("after the run: %v; want 2 connections, both idle", s)
	}
}

// Housekeeping reaches parked connections: IdleTimeout retires them above MinIdleConns.
func TestParkedIdleTimeout(t *testing.T) {
	clk := newFakeClock()
	p, fc := newPool(t, Config{MaxConns: 4, MinIdleConns: 2, testClock: clk, IdleTimeout: time.Minute})
	eventually(t, "MinIdleConns filled", func() bool { return p.Stats().Idle == 2 })
	db := p.OpenDB()
	defer db.Close()
	park(t, p, db, 4)
	clk.Advance(61 * time.Second)
	p.housekeep()
	if s := p.Stats(); s.Total != 2 || fc.Open() != 2 {
		t.Fatalf("after IdleTimeout with 4 parked: %v, %d open; want MinIdleConns (2) kept", s, fc.Open())
	}
}

// KeepaliveTime pings a parked connection.
func TestParkedKeepalive(t *testing.T) {
	clk := newFakeClock()
	p, fc := newPool(t, Config{MaxConns: 1, testClock: clk, KeepaliveTime: time.Minute})
	eventually(t, "pool filled", func() bool { return p.Stats().Idle == 1 })
	db := p.OpenDB()
	defer db.Close()
	park(t, p, db, 1)
	clk.Advance(61 * time.Second)
	p.housekeep()
	if fc.Pings.Load() != 1 {
		t.Fatalf("pings = %d; want one keepalive of the parked connection", fc.Pings.Load())
	}
	if s := p.Stats(); s.Idle != 1 || s.Total != 1 {
		t.Fatalf("after keepalive: %v; want the connection idle again", s)
	}
}

// MaxLifetime closes parked connections when they expire, not only at their next checkout.
func TestParkedMaxLifetime(t *testing.T) {
	clk := newFakeClock()
	p, fc := newPool(t, Config{MaxConns: 2, testClock: clk, MaxLifetime: time.Minute})
	eventually(t, "pool filled", func() bool { return p.Stats().Idle == 2 })
	db := p.OpenDB()
	defer db.Close()
	park(t, p, db, 2)
	clk.Advance(61 * time.Second)
	p.housekeep()
	if got := fc.Closes.Load(); got != 2 {
		t.Fatalf("closes = %d; want both expired parked connections closed", got)
	}
}

// MinIdleConns counts parked connections as idle: the creator does not open more while they
// are parked, and Stats shows them idle.
func TestParkedCountAsIdle(t *testing.T) {
	p, fc := newPool(t, Config{MaxConns: 4, MinIdleConns: 2})
	eventually(t, "MinIdleConns filled", func() bool { return p.Stats().Idle == 2 })
	db := p.OpenDB()
	defer db.Close()
	park(t, p, db, 2)
	if s := p.Stats(); s.Idle != 2 || s.Active != 0 || s.Total != 2 {
		t.Fatalf("with 2 parked: %v; want 2 idle, 0 active", s)
	}
	if p.shouldCreate() {
		t.Fatal("the creator would open a connection with MinIdleConns met by parked ones")
	}
	if n := fc.Opens.Load(); n != 2 {
		t.Fatalf("%d dials; want 2", n)
	}
}

// Close closes parked connections and returns at once.
func TestParkedClosedByClose(t *testing.T) {
	p, fc := newPool(t, Config{MaxConns: 2, CloseTimeout: 3 * time.Second})
	eventually(t, "pool filled", func() bool { return p.Stats().Idle == 2 })
	db := p.OpenDB()
	defer db.Close()
	park(t, p, db, 2)
	start := time.Now()
	if err := p.Close(); err != nil {
		t.Fatalf("Close with 2 parked = %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v with only parked connections", d)
	}
	if n := fc.Open(); n != 0 {
		t.Fatalf("%d connections open after Close; want the parked ones closed", n)
	}
	if got := db.Stats().Idle; got != 0 {
		t.Errorf("database/sql still holds %d idle after the pool's Close", got)
	}
}
