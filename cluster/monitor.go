package cluster

import (
	"math/rand/v2"
	"time"

	"github.com/sqlpool/sqlpool/pool"
)

// monitor is the Connector's one goroutine while a pool is attached: it checks hosts whose
// connections reported the server gone, probes down hosts with backoff, and rebalances. Checks
// and probes run on goroutines of their own (one per host at a time), so that a host that does
// not answer cannot delay the others.
func (c *Connector) monitor() {
	defer c.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		next := c.step(time.Now())
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(max(time.Until(next), time.Millisecond))
		select {
		case <-t.C:
		case <-c.kick:
		case <-c.done:
			return
		}
	}
}

// step starts the checks and probes that are due, takes a rebalancing step if one is due, and
// returns when it wants to run next.
func (c *Connector) step(now time.Time) time.Time {
	next := now.Add(time.Hour)
	c.mu.Lock()
	if c.detached {
		c.mu.Unlock()
		return next
	}
	for _, h := range c.hosts {
		switch {
		case h.checking:
		case h.up && h.suspect:
			h.suspect, h.checking = false, true
			c.wg.Add(1)
			go c.check(h)
		case !h.up && !now.Before(h.nextProbe):
			h.checking = true
			c.wg.Add(1)
			go c.probe(h)
		case !h.up:
			next = minTime(next, h.nextProbe)
		}
	}
	rebalanceDue := c.reb.active && !now.Before(c.reb.nextAt)
	if c.reb.active && !rebalanceDue {
		next = minTime(next, c.reb.nextAt)
	}
	c.mu.Unlock()
	if rebalanceDue {
		if at, ok := c.rebalanceStep(now); ok {
			next = minTime(next, at)
		}
	}
	return next
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// check runs when a connection to the up host h reported the server gone: a fresh connection
// (dial plus Ready) decides whether the host is down or only that connection was lost.
func (c *Connector) check(h *host) {
	defer c.wg.Done()
	conn, err := c.attempt(c.ctx, h)
	if err == nil {
		_ = conn.Close()
	} else if c.ctx.Err() == nil {
		c.markDown(h, err)
	}
	c.mu.Lock()
	h.checking = false
	c.mu.Unlock()
	c.wake()
}

// probe tries the down host h; it comes back when a dial plus Ready succeeds, and otherwise
// is tried again after a doubled, jittered wait.
func (c *Connector) probe(h *host) {
	defer c.wg.Done()
	conn, err := c.attempt(c.ctx, h)
	if err == nil {
		_ = conn.Close()
		c.mu.Lock()
		h.checking = false
		c.mu.Unlock()
		c.markUp(h)
		return
	}
	c.mu.Lock()
	h.checking = false
	if c.ctx.Err() == nil {
		h.lastErr = err
		h.failures++
		wait := c.cfg.ProbeInterval << min(h.failures, 20)
		h.nextProbe = time.Now().Add(c.jitter(min(wait, c.cfg.MaxProbeInterval)))
	}
	c.mu.Unlock()
	c.wake()
}

// rebalance is the state of one rebalancing: after a host came back, the connections above
// each host's target are moved one at a time, at jittered moments spread over the period.
type rebalance struct {
	active  bool
	start   time.Time
	end     time.Time
	nextAt  time.Time
	planned int // moves planned at the first step
	moved   int
}

func (r *rebalance) begin(now time.Time, period time.Duration) {
	*r = rebalance{active: true, start: now, end: now.Add(period), nextAt: now}
}

// rebalanceStep moves one connection if any host holds more than its target (none on the
// first step: it plans), and returns when the next step is due (ok false: rebalancing ended).
func (c *Connector) rebalanceStep(now time.Time) (time.Time, bool) {
	c.mu.Lock()
	p := c.p
	c.mu.Unlock()
	if p == nil {
		return time.Time{}, false
	}
	stats := p.HostStats()
	c.mu.Lock()
	defer c.mu.Unlock()
	r := &c.reb
	from, excess := c.excessLocked(stats)
	if excess == 0 || now.After(r.start.Add(3*(r.end.Sub(r.start)))) {
		if r.moved > 0 || excess > 0 {
			c.log.Debug("sqlpool: rebalancing ended", "pool", c.poolName, "moved", r.moved, "left", excess)
		}
		r.active = false
		return time.Time{}, false
	}
	if r.planned == 0 {
		r.planned = excess
		c.log.Info("sqlpool: rebalancing connections", "pool", c.poolName, "moves", excess,
			"period", r.end.Sub(r.start))
	} else {
		c.mu.Unlock()
		n := p.EvictHost(from.name, 1)
		c.mu.Lock()
		if n > 0 {
			from.rebalanced.Add(1)
			r.moved++
			excess--
		}
	}
	// The remaining moves share the time left, each at a random point in the second half of
	// its slot; past the period, they go on at the planned pace.
	left := r.end.Sub(now)
	if left <= 0 {
		left = r.end.Sub(r.start) * time.Duration(max(excess, 1)) / time.Duration(r.planned)
	}
	slot := left / time.Duration(max(excess, 1))
	r.nextAt = now.Add(time.Duration(float64(slot) * (0.5 + 0.5*rand.Float64())))
	return r.nextAt, true
}

// excessLocked returns the host to move a connection away from, and how many moves are left.
// Targets: for Sequential, everything on the first up host; for the others, an even share —
// moves go on while a host holds more than the share rounded up or less than it rounded down,
// taking from the fullest host. Connections already marked for closing do not count.
func (c *Connector) excessLocked(stats []pool.HostStats) (*host, int) {
	eff := make(map[string]int, len(stats))
	for _, s := range stats {
		eff[s.Host] = s.Total - s.Evicting
	}
	var ups []*host
	total := 0
	for _, h := range c.hosts {
		if h.up {
			ups = append(ups, h)
			total += eff[h.name]
		}
	}
	if len(ups) < 2 {
		return nil, 0
	}
	if c.cfg.Strategy == Sequential {
		var from *host
		sum := 0
		for _, h := range ups[1:] {
			if n := eff[h.name]; n > 0 {
				sum += n
				if from == nil || n > eff[from.name] {
					from = h
				}
			}
		}
		return from, sum
	}
	hi, lo := (total+len(ups)-1)/len(ups), total/len(ups)
	var from *host
	over, under := 0, 0
	for _, h := range ups {
		n := eff[h.name]
		over += max(n-hi, 0)
		under += max(lo-n, 0)
		if from == nil || n > eff[from.name] {
			from = h
		}
	}
	return from, max(over, under)
}
