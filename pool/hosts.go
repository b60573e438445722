package pool

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
)

// This file is the pool's side of a multi-host pool (package cluster): the few things only the
// pool can do for a connector that dials several hosts. With a plain driver.Connector none of it
// runs: an entry's host is nil and the hot path pays one nil check in checkout (see goneFor).

// HostConnector is a driver.Connector over several hosts, one per pool (package cluster's):
// New gives it a *HostPool. See docs/cluster.md.
type HostConnector interface {
	driver.Connector
	// ConnectHost opens a connection and names the host it reached.
	ConnectHost(ctx context.Context) (conn driver.Conn, host string, err error)
	// ConnectTo opens server-side cancel's side connection to host.
	ConnectTo(ctx context.Context, host string) (driver.Conn, error)
	// AttachPool is called once by New, before the first dial; an error fails New.
	AttachPool(p *HostPool) error
	// HostGone reports, on the failed call's goroutine, that host's server went away.
	HostGone(host string, err error)
	// DetachPool is called once by Close, or a failing New.
	DetachPool()
}

// HostPool is the pool as its HostConnector sees it. Its methods are safe for concurrent use.
type HostPool struct{ p *Pool }

// Name returns the pool's name (Config.Name).
func (h *HostPool) Name() string { return h.p.cfg.Name }

// HostStats returns per-host figures, sorted by host name.
func (h *HostPool) HostStats() []HostStats { return h.p.hostStats() }

// EvictHost closes up to n connections to host (n < 0: all), idle ones now and the others when
// returned or checked out, and returns how many it closed or marked. The close reason is
// CloseEvicted.
func (h *HostPool) EvictHost(host string, n int) int { return h.p.evictHost(host, n) }

// SetUnavailable, with err != nil, makes an acquire that finds no idle connection fail at once with
// an error wrapping err and matching ErrUnavailable, waiters included; nil ends it.
func (h *HostPool) SetUnavailable(err error) { h.p.setUnavailable(err) }

// hostState is what the pool keeps per host. Entries point at it; the map of them only grows.
type hostState struct {
	name string
	// goneAt is when a connection to this host last reported that the server went away; its
	// connections last known alive before it are probed on their next acquire.
	goneAt  atomic.Int64
	created uint64 // under reg.mu
	closed  uint64 // under reg.mu
}

// HostStats is one host's part of a pool's Stats.
type HostStats struct {
	Host     string
	Total    int // physical connections open to the host
	Active   int // in use by a borrower
	Idle     int // idle in the pool, or parked in database/sql
	Evicting int // marked for closing at return or checkout; in Total
	Created  uint64
	Closed   uint64
}

// hostConnector returns the pool's HostConnector, or nil.
func (p *Pool) hostConnector() HostConnector {
	hc, _ := p.connector.(HostConnector)
	return hc
}

// connect opens a connection with the pool's connector and, for a HostConnector, returns the
// host it reached.
func (p *Pool) connect(ctx context.Context) (driver.Conn, *hostState, error) {
	hc := p.hostConnector()
	if hc == nil {
		dc, err := p.connector.Connect(ctx)
		return dc, nil, err
	}
	dc, name, err := hc.ConnectHost(ctx)
	if err != nil || dc == nil {
		return dc, nil, err
	}
	return dc, p.host(name), nil
}

// host returns the state of the host called name, creating it on first use.
func (p *Pool) host(name string) *hostState {
	p.reg.mu.Lock()
	defer p.reg.mu.Unlock()
	if p.hosts == nil {
		p.hosts = make(map[string]*hostState)
	}
	h := p.hosts[name]
	if h == nil {
		h = &hostState{name: name}
		p.hosts[name] = h
	}
	return h
}

// attachHosts lets a HostConnector attach itself; called by New before the first dial.
func (p *Pool) attachHosts() error {
	if hc := p.hostConnector(); hc != nil {
		if err := hc.AttachPool(&HostPool{p}); err != nil {
			return fmt.Errorf("sqlpool: %s: New: %w", p.cfg.Name, err)
		}
	}
	return nil
}

// detachHosts tells a HostConnector that the pool closed.
func (p *Pool) detachHosts() {
	if hc := p.hostConnector(); hc != nil {
		hc.DetachPool()
	}
}

// goneFor is when the server of e last reported going away: the pool's own mark, or for a
// connection to a named host the later of it and the host's.
func (p *Pool) goneFor(e *entry) int64 {
	g := p.goneAt.Load()
	if h := e.host; h != nil {
		g = max(g, h.goneAt.Load())
	}
	return g
}

// serverGone records that e's server went away: for a connection to a named host only that
// host's connections are suspected, and the HostConnector is told.
func (p *Pool) serverGone(e *entry, err error) {
	now := p.nanotime()
	if h := e.host; h != nil {
		h.goneAt.Store(now)
		if hc := p.hostConnector(); hc != nil {
			hc.HostGone(h.name, err)
		}
	} else {
		p.goneAt.Store(now)
	}
	p.signalCreator()
}

// hostOpenedLocked and hostClosedLocked keep the per-host counters; the caller holds reg.mu.
func (e *entry) hostOpenedLocked() {
	if h := e.host; h != nil {
		h.created++
	}
}

func (e *entry) hostClosedLocked() {
	if h := e.host; h != nil {
		h.closed++
	}
}

// hostStats is HostPool.HostStats.
func (p *Pool) hostStats() []HostStats {
	p.reg.mu.Lock()
	defer p.reg.mu.Unlock()
	if len(p.hosts) == 0 {
		return nil
	}
	byHost := make(map[*hostState]*HostStats, len(p.hosts))
	out := make([]HostStats, 0, len(p.hosts))
	for _, h := range p.hosts {
		out = append(out, HostStats{Host: h.name, Created: h.created, Closed: h.closed})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	for i := range out {
		byHost[p.hosts[out[i].Host]] = &out[i]
	}
	for _, e := range p.reg.entries() {
		s := byHost[e.host]
		if s == nil || e.state.Load() == stateRemoved {
			continue
		}
		s.Total++
		if e.evict.Load() {
			s.Evicting++
		}
		switch e.state.Load() {
		case stateIdle, stateLent:
			s.Idle++
		case stateInUse:
			s.Active++
		}
	}
	for i := range out {
		// Reserved entries (housekeeping, Close) count as neither; keep Total = Active + Idle.
		out[i].Active = out[i].Total - out[i].Idle
	}
	return out
}

// evictHost is HostPool.EvictHost.
func (p *Pool) evictHost(host string, n int) int {
	if n == 0 {
		return 0
	}
	p.reg.mu.Lock()
	h := p.hosts[host]
	p.reg.mu.Unlock()
	if h == nil {
		return 0
	}
	taken := p.store.takeIf(func(e *entry, _ int) bool {
		if e.host != h || n == 0 {
			return false
		}
		n--
		return true
	})
	for _, e := range taken {
		p.closeEntry(e, CloseEvicted)
	}
	count := len(taken)
	if n != 0 {
		p.reg.mu.Lock()
		for _, e := range p.reg.entries() {
			if n == 0 {
				break
			}
			if e.host != h || e.evict.Load() {
				continue
			}
			switch e.state.Load() {
			case stateInUse, stateLent:
				e.evict.Store(true)
				count++
				n--
			}
		}
		p.reg.mu.Unlock()
	}
	p.signalCreator()
	return count
}

// setUnavailable is HostPool.SetUnavailable.
func (p *Pool) setUnavailable(err error) {
	if err == nil {
		p.unavailable.Store(nil)
		return
	}
	p.unavailable.Store(&errBox{err})
	s := &p.store
	s.mu.Lock()
	for s.head != nil {
		s.wakeLocked()
	}
	s.mu.Unlock()
}

// ErrUnavailable is matched by acquire errors while HostPool.SetUnavailable is in force, and
// while the server refuses the pool's login (see Pool.Redial).
var ErrUnavailable = errors.New("sqlpool: no connection can be opened")

// unavailableErr returns the fail-fast error, or nil.
func (p *Pool) unavailableErr() error {
	b := p.unavailable.Load()
	if b == nil {
		return nil
	}
	return &unavailableError{pool: p.cfg.Name, err: b.err}
}

type unavailableError struct {
	pool string
	err  error
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("sqlpool: %s: no idle connection and none can be opened now: %v", e.pool, e.err)
}
func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.err} }
