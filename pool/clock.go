package pool

import (
	"sync/atomic"
	"time"
)

// The pool reads time on every acquire and release: the bypass window, lifetimes and idle
// timeouts all need it. The exact monotonic clock costs ~25 ns on the virtual machines this
// project runs on and time.Now ~45 ns (go test -bench Clock ./pool/), as much as the rest of
// an acquire/release cycle together. So the hot path reads a coarse clock instead: an atomic
// holding the exact time, refreshed by the housekeeper goroutine every tick (AliveBypassWindow/10,
// between 1 ms and 100 ms). Stamps are therefore up to one tick old, never later than the
// truth, and the bypass test subtracts one tick from the window; it may probe a connection up
// to one tick early. Lifetimes and idle timeouts move by at most one tick, against minimums of
// tens of seconds. How a refresher that falls behind is kept from extending the window: see
// trusted.
//
// With a test clock (Config.testClock) the hot path reads that clock exactly, and tick is 0.

type clock struct {
	exact  bool         // Config.testClock was given: read it on every call
	coarse atomic.Int64 // pool time at the last tick (coarse mode)
	tick   time.Duration
	source timeSource
	epoch  time.Time
}

func (c *clock) init(cfg *Config, injected bool) {
	c.source = cfg.testClock
	c.epoch = cfg.testClock.Now()
	c.exact = injected
	if !injected {
		w := cfg.AliveBypassWindow
		c.tick = 100 * time.Millisecond
		if w > 0 {
			c.tick = min(max(w/10, time.Millisecond), 100*time.Millisecond)
		}
	}
	c.coarse.Store(0)
}

// nanotime is the exact pool time in nanoseconds since New.
func (p *Pool) nanotime() int64 {
	if p.clk.exact {
		return int64(p.clk.source.Now().Sub(p.clk.epoch))
	}
	return int64(time.Since(p.clk.epoch))
}

// now is the hot path's pool time: exact with an injected clock, otherwise the coarse clock.
func (p *Pool) now() int64 {
	if p.clk.exact {
		return p.nanotime()
	}
	return p.clk.coarse.Load()
}

// refreshClock advances the coarse clock; the housekeeper calls it every tick.
func (p *Pool) refreshClock() { p.clk.coarse.Store(p.nanotime()) }

// trusted reports whether a connection last known alive at alive may be handed out at now
// without a probe: at most AliveBypassWindow has passed, allowing for one coarse tick.
//
// The coarse clock is one tick old only while its goroutine gets to run. When the process is
// starved of CPU (a loaded machine, a paused VM) and resumes, a borrower can run before the
// refresher and see a clock far behind; a connection returned long before the window would
// look fresh. So a coarse "trusted" is confirmed with the exact clock whenever the coarse clock
// has moved since the stamp (alive < now): every connection that sat idle across a refresh —
// the case the window exists for — is judged on exact elapsed time. The exact read is skipped
// only for a stamp taken after the refresher's last run (alive >= now), which is what a busy
// connection, returned and borrowed again within a tick, always has; that keeps the clock read
// off the cycle that matters most (it was half its cost: docs/benchmarks.md).
//
// What the skip gives up is a stall of the whole process long enough to stop the refresher —
// more than AliveBypassWindow − tick with no refresh at all — that falls between a return and
// the next borrow of the same connection. The same stall falling just after a borrow's exact
// check leaves that borrower holding an unchecked connection just the same, so the exact read
// could not promise more there; and the driver's no-traffic liveness check, which runs at every
// hand-out, still catches a connection the server closed meanwhile. Within a running Go process
// a runnable refresher is delayed by at most about one preemption slice (10 ms).
func (p *Pool) trusted(now, alive int64) bool {
	w := durNanos(p.cfg.AliveBypassWindow)
	if w <= 0 || now-alive+durNanos(p.clk.tick) > w {
		return false
	}
	return p.clk.exact || alive >= now || p.nanotime()-alive <= w
}
