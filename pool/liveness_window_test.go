package pool

import (
	"context"
	"database/sql/driver"
	"sync/atomic"
	"testing"
	"time"
)

// liveDialect is MySQL's dialect whose trackers report an Alive (SessionCaps) answering dead when
// told.
type liveDialect struct {
	Dialect
	dead  *atomic.Bool
	asked *atomic.Int64
}

type liveTracker struct {
	SessionTracker
	d liveDialect
}

func (t liveTracker) Alive() bool {
	t.d.asked.Add(1)
	return !t.d.dead.Swap(false) // dead once: the next dial is alive

}

func (t liveTracker) Caps() SessionCaps {
	c := t.SessionTracker.Caps()
	c.Alive = t.Alive
	return c
}

func (d liveDialect) NewSession(ctx context.Context, dc driver.Conn) (SessionTracker, error) {
	t, err := d.Dialect.NewSession(ctx, dc)
	if err != nil {
		return nil, err
	}
	return liveTracker{SessionTracker: t, d: d}, nil
}

// TestLivenessPeekWindow: a connection handed out less than livenessPeekWindow before is handed out
// again without asking its tracker's Alive (no system call on back-to-back borrows); one handed out
// longer before is asked, and a dead one is closed instead of handed out — through Connect and
// through a DB from OpenDB (conn.ResetSession).
func TestLivenessPeekWindow(t *testing.T) {
	for _, via := range []string{"Connect", "OpenDB"} {
		t.Run(via, func(t *testing.T) {
			clk := newFakeClock()
			d := liveDialect{Dialect: mysqlDialect(t), dead: new(atomic.Bool), asked: new(atomic.Int64)}
			p, fc := newPool(t, Config{MaxConns: 1, testClock: clk, Dialect: d})
			ctx := context.Background()
			db := p.OpenDB()
			defer db.Close()
			cycle := func() {
				t.Helper()
				if via == "Connect" {
					c, err := p.Connect(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if err := c.Close(); err != nil {
						t.Fatal(err)
					}
					return
				}
				c, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.PingContext(ctx); err != nil {
					t.Fatal(err)
				}
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
			}
			cycle() // dialled, returned
			cycle() // back to back
			asked := d.asked.Load()
			for range 5 {
				cycle()
			}
			if n := d.asked.Load() - asked; n != 0 {
				t.Fatalf("back-to-back borrows asked the tracker's Alive %d times; want 0 within %v of the return", n, livenessPeekWindow)
			}
			opens := fc.Opens.Load()
			clk.Advance(livenessPeekWindow + time.Microsecond)
			d.dead.Store(true)
			cycle()
			if d.asked.Load() == asked {
				t.Fatalf("a borrow %v after the return did not ask the tracker's Alive", livenessPeekWindow)
			}
			if fc.Opens.Load() == opens {
				t.Fatalf("the connection reported dead was handed out: no new dial")
			}
		})
	}
}

// skipDialect is MySQL's dialect whose trackers report that the driver's ResetSession is
// redundant (SessionCaps.SkipDriverReset) when skip is set.
type skipDialect struct {
	Dialect
	skip bool
}

type skipTracker struct {
	SessionTracker
	skip bool
}

func (t skipTracker) Caps() SessionCaps {
	c := t.SessionTracker.Caps()
	c.SkipDriverReset = t.skip
	return c
}

func (d skipDialect) NewSession(ctx context.Context, dc driver.Conn) (SessionTracker, error) {
	t, err := d.Dialect.NewSession(ctx, dc)
	if err != nil {
		return nil, err
	}
	return skipTracker{SessionTracker: t, skip: d.skip}, nil
}

// TestDriverResetRedundant: a checkout from a DB's idle list calls the driver's ResetSession
// unless the tracker says it is redundant. A connection the driver reports bad there (the fake
// driver's Break) is replaced when the reset runs and handed out again when it is skipped.
func TestDriverResetRedundant(t *testing.T) {
	for _, skip := range []bool{false, true} {
		p, fc := newPool(t, Config{MaxConns: 1, Dialect: skipDialect{Dialect: mysqlDialect(t), skip: skip}})
		ctx := context.Background()
		db := p.OpenDB()
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil { // parked in db's idle list
			t.Fatal(err)
		}
		fc.Conns()[0].Break()
		c, err = db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
		want := int64(2) // the reset refused the broken connection: a new one was dialled
		if skip {
			want = 1
		}
		if n := fc.Opens.Load(); n != want {
			t.Errorf("skip=%v: %d connections dialled; want %d", skip, n, want)
		}
		db.Close()
	}
}
