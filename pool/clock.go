package pool

import (
	"sync/atomic"
	"time"
)

// The pool reads time on every acquire and release: the bypass window, lifetimes and idle
// timeouts all need it. On the virtual machines this project runs on, time.Now costs ~145 ns and
// the monotonic clock alone ~80 ns (go test -bench Clock ./pool/), more than the rest of an
// acquire/release cycle together. So the hot path reads a coarse clock instead: an atomic
// holding the exact time, refreshed by the housekeeper goroutine every tick (AliveBypassWindow/10,
// between 1 ms and 100 ms). Stamps are therefore up to one tick old, and the bypass test
// subtracts one tick from the window, and a coarse "trusted" is confirmed with the exact
// clock (see trusted), so a connection is never trusted for longer than AliveBypassWindow after
// its return, even when the refresher was starved; it may be probed up to one tick early. Lifetimes and idle
// timeouts move by at most one tick, against minimums of tens of seconds.
//
// With an injected Config.Clock (tests) the hot path reads that clock exactly, and tick is 0.

type clock struct {
	exact  bool         // Config.Clock was given: read it on every call
	coarse atomic.Int64 // pool time at the last tick (coarse mode)
	tick   time.Duration
	source Clock
	epoch  time.Time
}

func (c *clock) init(cfg *Config, injected bool) {
	c.source = cfg.Clock
	c.epoch = cfg.Clock.Now()
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
// The coarse clock is one tick old only while its goroutine gets to run: when the process is
// starved of CPU (a loaded machine, a paused VM) and then resumes, a borrower can run before
// the refresh and see a clock that is far behind, and would trust a connection returned long
// before the window. So a coarse "trusted" is confirmed with the exact monotonic clock (one
// vDSO read, ~20–80 ns; only on this branch). Stamps are coarse, so never later than the
// truth: the exact elapsed time is never underestimated.
func (p *Pool) trusted(now, alive int64) bool {
	w := durNanos(p.cfg.AliveBypassWindow)
	if w <= 0 || now-alive+durNanos(p.clk.tick) > w {
		return false
	}
	return p.clk.exact || p.nanotime()-alive <= w
}
