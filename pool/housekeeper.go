package pool

import (
	"context"
	"slices"
	"time"
)

// housekeeper advances the coarse clock every tick and runs housekeep every
// Config.housekeepingPeriod (30 s), until the pool closes.
func (p *Pool) housekeeper() {
	defer p.wg.Done()
	period := p.cfg.housekeepingPeriod
	tick := period
	if !p.clk.exact {
		tick = min(p.clk.tick, period)
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	next := p.nanotime() + durNanos(period)
	for {
		select {
		case <-t.C:
			p.refreshClock()
			// A pass may block (keepalive pings against an unreachable server take
			// ValidationTimeout each), so it runs on its own goroutine: the clock must keep
			// moving, or return stamps taken meanwhile would look fresh afterwards.
			if now := p.nanotime(); now >= next && p.housekeeping.CompareAndSwap(false, true) {
				next = now + durNanos(period)
				p.wg.Add(1)
				go func() {
					defer p.wg.Done()
					defer p.housekeeping.Store(false)
					p.housekeep()
				}()
			}
		case <-p.done:
			return
		}
	}
}

// housekeep retires idle connections past IdleTimeout above MinIdleConns, closes idle ones past
// MaxLifetime or marked, marks expired ones that are in use or parked in database/sql, pings
// idle ones due for keepalive, and wakes the creator to refill.
func (p *Pool) housekeep() {
	if p.closed.Load() {
		return
	}
	now := p.nanotime()
	idleTimeout := durNanos(p.idleTimeout())
	minIdle := p.minIdleConns()
	useIdleTimeout := idleTimeout > 0 && minIdle < p.maxConns()
	type job struct {
		e      *entry
		reason CloseReason
	}
	var retire []job
	var ping []*entry
	p.checkDBs()
	// Connections parked in the DBs from OpenDB come back first, so that the rules below reach
	// every idle connection wherever it was parked (lend.go); borrowers take them again from
	// the pool and database/sql parks them again on return.
	if p.reg.count(stateLent) > 0 {
		p.flushDBs(true)
	}
	taken := p.store.takeIf(func(e *entry, remaining int) bool {
		switch {
		case e.evict.Load():
			retire = append(retire, job{e, CloseEvicted})
		case e.expired(now):
			retire = append(retire, job{e, CloseMaxLifetime})
		case useIdleTimeout && remaining > minIdle && now-e.lastReturned > idleTimeout:
			retire = append(retire, job{e, CloseIdleTimeout})
		case e.keepaliveGap > 0 && now-e.lastAlive > e.keepaliveGap:
			ping = append(ping, e)
		default:
			return false
		}
		return true
	})
	for _, j := range retire {
		p.closeEntry(j.e, j.reason)
	}
	if len(taken) > len(retire)+len(ping) {
		// takeIf could not give back some entries: the pool closed meanwhile.
		for _, e := range taken {
			if e.state.Load() == stateReserved && !slices.Contains(ping, e) {
				p.closeEntry(e, ClosePoolClosed)
			}
		}
	}
	for _, e := range ping {
		ctx, cancel := context.WithCancel(p.dialCtx)
		err := p.dialect.Probe(ctx, e.conn, p.cfg.ValidationTimeout)
		cancel()
		if err != nil {
			p.setLastError(err)
			p.closeEntry(e, CloseKeepaliveFailed)
			continue
		}
		e.lastAlive = p.nanotime()
		p.clearLastError()
		p.park(e)
	}
	// Connections in use (or parked in a DB the pool does not know: sql.OpenDB(p)) are only
	// marked; they are closed when returned or checked out.
	for _, e := range p.reg.entries() {
		if e.expired(now) {
			e.evict.Store(true)
		}
	}
	p.signalCreator()
}
