package pool

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// liveConfig holds the settings that can change on a live pool (SetMaxConns, SetMinIdleConns,
// SetAcquireTimeout, SetMaxLifetime, SetIdleTimeout). Readers load them atomically; the
// setters serialize on mu. Pool.cfg keeps the values New resolved, and Config overlays these.
type liveConfig struct {
	maxConns       atomic.Int32
	minIdleConns   atomic.Int32
	acquireTimeout atomic.Int64
	maxLifetime    atomic.Int64
	idleTimeout    atomic.Int64
	// minIdleFollows is set when MinIdleConns is "MaxConns" (zero in the Config given to New,
	// or to SetMinIdleConns): SetMaxConns then moves it too, and the pool stays fixed-size.
	minIdleFollows atomic.Bool

	mu sync.Mutex // serializes the setters
	// shrinkMu serializes the decisions to close a connection because the pool is above
	// MaxConns (shrinkIdle, retireExcess), so that two returns never both close the last
	// connection over the limit.
	shrinkMu sync.Mutex
}

func (l *liveConfig) init(resolved Config, given Config) {
	l.maxConns.Store(int32(resolved.MaxConns))
	l.minIdleConns.Store(int32(resolved.MinIdleConns))
	l.minIdleFollows.Store(given.MinIdleConns == 0)
	l.acquireTimeout.Store(int64(resolved.AcquireTimeout))
	l.maxLifetime.Store(int64(resolved.MaxLifetime))
	l.idleTimeout.Store(int64(resolved.IdleTimeout))
}

func (p *Pool) maxConns() int { return int(p.live.maxConns.Load()) }

// minIdleConns is MinIdleConns, never above MaxConns.
func (p *Pool) minIdleConns() int {
	return min(int(p.live.minIdleConns.Load()), p.maxConns())
}

func (p *Pool) acquireTimeout() time.Duration { return time.Duration(p.live.acquireTimeout.Load()) }
func (p *Pool) maxLifetime() time.Duration    { return time.Duration(p.live.maxLifetime.Load()) }
func (p *Pool) idleTimeout() time.Duration    { return time.Duration(p.live.idleTimeout.Load()) }

// liveOverlay returns cfg with the live settings.
func (p *Pool) liveOverlay(cfg Config) Config {
	cfg.MaxConns = p.maxConns()
	cfg.MinIdleConns = p.minIdleConns()
	cfg.AcquireTimeout = p.acquireTimeout()
	cfg.MaxLifetime = p.maxLifetime()
	cfg.IdleTimeout = p.idleTimeout()
	return cfg
}

// SetMaxConns changes MaxConns on a live pool (n ≥ 1). Lowering it closes idle connections over
// the limit now and others when returned. MinIdleConns follows when it was zero in the Config.
func (p *Pool) SetMaxConns(n int) error {
	if n < 1 {
		return fmt.Errorf("sqlpool: %s: SetMaxConns(%d): MaxConns must be at least 1", p.cfg.Name, n)
	}
	if p.closed.Load() {
		return ErrClosed
	}
	p.live.mu.Lock()
	old := p.maxConns()
	p.live.maxConns.Store(int32(n))
	if p.live.minIdleFollows.Load() {
		p.live.minIdleConns.Store(int32(n))
	}
	p.live.mu.Unlock()
	if n < old {
		// Connections parked in database/sql come back first (and the DBs keep at most n
		// idle from now on), so that the idle ones over the limit are all in the store.
		p.flushDBs(true)
		p.shrinkIdle()
	} else if n > old {
		p.flushDBs(true) // restores the DBs' idle limit to n; parked connections come back
	}
	p.signalCreator()
	return nil
}

// SetMinIdleConns changes MinIdleConns on a live pool: n as in Config, not above MaxConns.
func (p *Pool) SetMinIdleConns(n int) error {
	if p.closed.Load() {
		return ErrClosed
	}
	p.live.mu.Lock()
	defer p.live.mu.Unlock()
	max := p.maxConns()
	if n > max {
		return fmt.Errorf("sqlpool: %s: SetMinIdleConns(%d): above MaxConns %d; raise MaxConns first", p.cfg.Name, n, max)
	}
	p.live.minIdleFollows.Store(n == 0)
	switch {
	case n == 0:
		n = max
	case n < 0:
		n = 0
	}
	p.live.minIdleConns.Store(int32(n))
	p.signalCreator()
	return nil
}

// SetAcquireTimeout changes AcquireTimeout (d as in Config) for acquires that begin to wait after
// the call; ConnectTimeout and ValidationTimeout keep their values.
func (p *Pool) SetAcquireTimeout(d time.Duration) error {
	if p.closed.Load() {
		return ErrClosed
	}
	switch {
	case d == 0:
		d = DefaultAcquireTimeout
	case d < 0:
		d = -1
	}
	p.live.acquireTimeout.Store(int64(d))
	return nil
}

// SetMaxLifetime changes MaxLifetime (d as in Config) for connections opened after the call;
// SoftEvict replaces the open ones.
func (p *Pool) SetMaxLifetime(d time.Duration) error {
	if p.closed.Load() {
		return ErrClosed
	}
	switch {
	case d == 0:
		d = DefaultMaxLifetime
	case d < 0:
		d = -1
	case d < MinMaxLifetime:
		return fmt.Errorf("sqlpool: %s: SetMaxLifetime(%v): below the %v minimum", p.cfg.Name, d, MinMaxLifetime)
	}
	p.live.mu.Lock()
	defer p.live.mu.Unlock()
	if it := p.idleTimeout(); d > 0 && it > 0 && it+time.Second > d {
		return fmt.Errorf("sqlpool: %s: SetMaxLifetime(%v): not more than 1s above IdleTimeout %v; lower IdleTimeout first", p.cfg.Name, d, it)
	}
	p.live.maxLifetime.Store(int64(d))
	return nil
}

// SetIdleTimeout changes IdleTimeout (d as in Config); the next housekeeping pass applies it.
func (p *Pool) SetIdleTimeout(d time.Duration) error {
	if p.closed.Load() {
		return ErrClosed
	}
	switch {
	case d == 0:
		d = DefaultIdleTimeout
	case d < 0:
		d = -1
	case d < MinIdleTimeout:
		return fmt.Errorf("sqlpool: %s: SetIdleTimeout(%v): below the %v minimum", p.cfg.Name, d, MinIdleTimeout)
	}
	p.live.mu.Lock()
	defer p.live.mu.Unlock()
	if lt := p.maxLifetime(); d > 0 && lt > 0 && d+time.Second > lt {
		return fmt.Errorf("sqlpool: %s: SetIdleTimeout(%v): within 1s of MaxLifetime %v or above it; raise MaxLifetime first", p.cfg.Name, d, lt)
	}
	p.live.idleTimeout.Store(int64(d))
	return nil
}

// shrinkIdle closes idle connections, oldest return first, while the pool is above MaxConns.
func (p *Pool) shrinkIdle() {
	p.live.shrinkMu.Lock()
	defer p.live.shrinkMu.Unlock()
	excess := p.reg.live() - p.maxConns()
	if excess <= 0 {
		return
	}
	for _, e := range p.store.takeIf(func(*entry, int) bool {
		if excess > 0 {
			excess--
			return true
		}
		return false
	}) {
		p.closeEntry(e, CloseResized)
	}
}

// trimAfterPut runs after a connection was made idle (or parked in database/sql): when a
// SetMaxConns lowered the limit between the caller's retireExcess and its put, shrinkIdle may
// have run before the put and missed the connection; this second look sees the new limit
// (SetMaxConns stores it before it shrinks), so one of the two finds the connection.
func (p *Pool) trimAfterPut() {
	if p.reg.open() > p.maxConns() {
		p.shrinkIdle()
	}
}

// retireExcess closes e, which the caller owns and would otherwise make idle, when the pool is
// above MaxConns, and reports whether it did. The check against the total is the fast path (two
// atomic loads); the decision is taken under shrinkMu against the registry's live entries
// (closeEntry marks an entry removed before it closes the driver connection), so concurrent
// returns close exactly the excess.
func (p *Pool) retireExcess(e *entry) bool {
	if p.reg.open() <= p.maxConns() {
		return false
	}
	p.live.shrinkMu.Lock()
	defer p.live.shrinkMu.Unlock()
	if p.reg.live() <= p.maxConns() {
		return false
	}
	p.releaseLocks(e)
	p.closeEntry(e, CloseResized)
	return true
}
