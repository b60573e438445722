package pool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
)

// Fair waiting between tenants (Config.Tenants, WithTenant; docs/design/tenants.md).
//
// Without Config.Tenants nothing here runs: the store's queue is one FIFO queue, and the only
// cost is a nil check of store.ten where a waiter is queued, unlinked or chosen, and of
// entry.tc at release.
//
// With it, every acquire belongs to a class: a configured key, or the "other" class (key "",
// every key not configured and no key). Each waiter is also linked into its class's own FIFO
// sub-queue, in arrival order. A freed connection goes to the head of the class chosen by
// stride scheduling (Waldspurger and Weihl, 1995), a virtual-time form of weighted fair
// queueing: each class has a pass, the class with waiters and the smallest pass is served and
// its pass advances by its stride (1/weight); a class whose queue was empty restarts at the
// virtual time (the pass of the class served last), so that a quiet class neither piles up
// credit nor waits behind a loud class's backlog. A class at its Cap is skipped. Hand-outs are
// direct: with tenants there is no barging, since a running goroutine of a loud class taking
// the freed connection would undo the choice.
//
// Held counts a class's connections from the moment one is taken for it (idle stack, hand-off,
// or database/sql's idle list) until it comes back (release, put, close), so that a Cap is
// checked against connections still being validated too.

// tenantKey is the context key of WithTenant.
type tenantKey struct{}

// WithTenant returns ctx, borrowing for tenant key (Config.Tenants).
func WithTenant(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, tenantKey{}, key)
}

// Tenant is a tenant's share (Config.Tenants): Weight (zero: 1), Cap on connections held
// (zero: none).
type Tenant struct{ Weight, Cap int }

// TenantStats is one tenant's part of Stats.
type TenantStats struct {
	Key              string
	Held, Waiting    int
	Acquires, Failed uint64 // hand-outs; acquires that timed out or were shed
}

// maxTenantWeight bounds Tenant.Weight, so that a stride stays at least 1.
const (
	tenantStrideUnit = 1 << 24
	maxTenantWeight  = 1 << 16
)

// tenants is a pool's fair-waiting state; nil without Config.Tenants.
type tenants struct {
	index   map[string]*tenantClass // configured keys; others go to other
	classes []*tenantClass          // configured, sorted by key, then other
	other   *tenantClass
	vtime   uint64 // guarded by store.mu: the pass of the class served last
}

// tenantClass is one class of borrowers: a configured tenant, or every other key.
type tenantClass struct {
	key    string
	stride uint64
	cap    int32 // 0: none

	// throttle (0: none) caps the class while it holds more than its share of a congested
	// pool whose limit other tenants contend for (throttleTenants).
	throttle atomic.Int32
	winAcq   uint64 // guarded by overload.mu: acquires at the last window's end

	held     atomic.Int32
	acquires atomic.Uint64
	failed   atomic.Uint64

	// Guarded by store.mu: the class's waiters in arrival order, and its pass.
	head, tail *waiter
	nwait      int
	pass       uint64
}

// newTenants validates cfg.Tenants and builds the classes; nil when it is empty.
func newTenants(cfg map[string]Tenant) (*tenants, error) {
	if len(cfg) == 0 {
		return nil, nil
	}
	t := &tenants{index: make(map[string]*tenantClass, len(cfg))}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range cfg {
			if !yield(k) {
				return
			}
		}
	})
	if _, ok := cfg[""]; !ok {
		keys = append(keys, "")
	} else {
		keys = append(slices.DeleteFunc(keys, func(k string) bool { return k == "" }), "")
	}
	for _, k := range keys {
		tc := cfg[k]
		if tc.Weight < 0 || tc.Weight > maxTenantWeight || tc.Cap < 0 {
			return nil, fmt.Errorf("sqlpool: Config.Tenants[%q] is %+v; Weight must be 0 to %d (zero means 1) and Cap at least 0 (zero means no cap)", k, tc, maxTenantWeight)
		}
		c := &tenantClass{key: k, stride: tenantStrideUnit / uint64(max(tc.Weight, 1)), cap: int32(min(tc.Cap, 1<<30))}
		t.classes = append(t.classes, c)
		if k == "" {
			t.other = c
		} else {
			t.index[k] = c
		}
	}
	return t, nil
}

// of returns the class of an acquire with ctx.
func (t *tenants) of(ctx context.Context) *tenantClass {
	if k, ok := ctx.Value(tenantKey{}).(string); ok {
		if c := t.index[k]; c != nil {
			return c
		}
	}
	return t.other
}

// sheddableLocked reports whether a waiter of class tc may be shed while the pool is congested
// (overload.go): without tenants always; with them only when tc has more than this one waiter
// (more: 1 for an acquire about to queue) and the largest demand — connections held and
// waiters, per unit of weight. As FQ-CoDel (RFC 8290) drops from the fattest flow and serves
// sparse flows first, the loud tenant whose demand made the congestion is shed, and a quiet
// one's waiters, which fair waiting serves at the next hand-outs, are not.
func (s *store) sheddableLocked(tc *tenantClass, more int) bool {
	if tc == nil {
		return true
	}
	if tc.nwait+more <= 1 {
		return false
	}
	demand := func(c *tenantClass, more int) uint64 {
		return uint64(max(int(c.held.Load())+c.nwait+more, 0)) * c.stride
	}
	mine := demand(tc, more)
	for _, c := range s.ten.classes {
		if c != tc && demand(c, 0) > mine {
			return false
		}
	}
	return true
}

// stillSheddable is sheddableLocked for a waiter of class tc whose shed bound passed: it is
// shed only if its tenant's backlog is still the longest.
func (p *Pool) stillSheddable(tc *tenantClass) bool {
	s := &p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sheddableLocked(tc, 0)
}

// limit is the most connections c may hold now: the smaller of its cap and its throttle,
// 0 for none.
func (c *tenantClass) limit() int32 {
	l, t := c.cap, c.throttle.Load()
	if t != 0 && (l == 0 || t < l) {
		l = t
	}
	return l
}

// tryHold counts one more connection held by c unless c is at its cap or throttle.
func (c *tenantClass) tryHold() bool {
	l := c.limit()
	if l == 0 {
		c.held.Add(1)
		return true
	}
	for {
		n := c.held.Load()
		if n >= l {
			return false
		}
		if c.held.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// atCap reports whether c holds its cap or throttle.
func (c *tenantClass) atCap() bool { l := c.limit(); return l != 0 && c.held.Load() >= l }

// getFor is store.get for an acquire of class tc (nil: no tenants): the top of the idle stack,
// counted against tc, unless tc is at its cap.
func (s *store) getFor(tc *tenantClass) *entry {
	if tc == nil {
		return s.get()
	}
	s.mu.Lock()
	e := s.popForLocked(tc)
	s.mu.Unlock()
	return e
}

// popForLocked is popLocked for class tc (nil: no tenants).
func (s *store) popForLocked(tc *tenantClass) *entry {
	if tc == nil {
		return s.popLocked()
	}
	if len(s.idle) == 0 || !tc.tryHold() {
		return nil
	}
	e := s.popLocked()
	e.tc = tc
	return e
}

// untenantLocked ends e's count against its class, if any (e is back in the store's hands).
func untenant(e *entry) *tenantClass {
	tc := e.tc
	if tc != nil {
		e.tc = nil
		tc.held.Add(-1)
	}
	return tc
}

// untenant ends e's count against its class when e leaves its borrower other than through
// store.put (release to database/sql's idle list, close), and serves a waiter of a capped
// class that this makes eligible from the idle stack.
func (p *Pool) untenant(e *entry) {
	if tc := untenant(e); tc != nil && tc.limit() != 0 {
		s := &p.store
		s.mu.Lock()
		if tc.head != nil && !s.closed {
			s.serveIdleLocked()
		}
		s.mu.Unlock()
	}
}

// holdLent counts a connection from database/sql's idle list against the acquire's class, or
// refuses it when the class is at its cap: the connection then goes back to the pool
// (routed), and database/sql, told it is bad, calls Connect, which waits in the class's
// queue.
func (p *Pool) holdLent(lent *conn, tc *tenantClass) bool {
	if !tc.tryHold() {
		lent.routed = true
		return false
	}
	lent.e.tc = tc
	return true
}

// fairNextLocked chooses the waiter a freed connection goes to: the head (tail while LIFO) of
// the eligible class with the smallest pass, older head first on a tie; it counts the
// connection against the class and advances its pass. nil: no waiter may take one.
func (s *store) fairNextLocked() *waiter {
	t := s.ten
	for {
		var best *tenantClass
		for _, c := range t.classes {
			if c.head == nil || c.atCap() {
				continue
			}
			if best == nil || c.pass < best.pass || (c.pass == best.pass && c.head.ticket < best.head.ticket) {
				best = c
			}
		}
		if best == nil {
			return nil
		}
		if !best.tryHold() { // a checkout from database/sql's idle list took the last slot
			continue
		}
		t.vtime = best.pass
		best.pass += best.stride
		if s.lifo {
			return best.tail
		}
		return best.head
	}
}

// handLocked gives e to the waiter fairNextLocked chose, or reports false.
func (s *store) fairPutLocked(e *entry) bool {
	w := s.fairNextLocked()
	if w == nil {
		return false
	}
	s.unlinkLocked(w)
	e.state.Store(stateInUse)
	e.tc = w.tc
	w.ch <- e
	return true
}

// serveIdleLocked hands idle connections to eligible waiters (a class's cap was freed).
func (s *store) serveIdleLocked() {
	for len(s.idle) > 0 {
		w := s.fairNextLocked()
		if w == nil {
			return
		}
		e := s.popLocked()
		s.unlinkLocked(w)
		e.tc = w.tc
		w.ch <- e
	}
}

// linkClassLocked links w, queued in the store, into its class's queue by ticket.
func (s *store) linkClassLocked(w *waiter) {
	c := w.tc
	if c.head == nil {
		c.pass = max(c.pass, s.ten.vtime)
	}
	var after *waiter
	for n := c.tail; n != nil; n = n.tprev {
		if n.ticket < w.ticket {
			after = n
			break
		}
	}
	w.tprev = after
	if after != nil {
		w.tnext = after.tnext
		after.tnext = w
	} else {
		w.tnext = c.head
		c.head = w
	}
	if w.tnext != nil {
		w.tnext.tprev = w
	} else {
		c.tail = w
	}
	c.nwait++
}

// unlinkClassLocked takes w out of its class's queue.
func (s *store) unlinkClassLocked(w *waiter) {
	c := w.tc
	if w.tprev != nil {
		w.tprev.tnext = w.tnext
	} else {
		c.head = w.tnext
	}
	if w.tnext != nil {
		w.tnext.tprev = w.tprev
	} else {
		c.tail = w.tprev
	}
	w.tprev, w.tnext = nil, nil
	c.nwait--
}

// throttleTenants shares a congested pool's limit between contending tenants, under
// overload.mu at the end of each window of the adaptive limit.
//
// On a saturated database a statement runs beside every other in flight: a quiet tenant served
// first by fair waiting still takes as long as the connections in circulation make it. The
// limit settles at the database's knee plus a queue allowance of √limit (adjustLimit); while
// two or more tenants borrowed in the window, the tenants whose demand (connections held and
// waiters) exceeds their weighted share of the limit are throttled together to the knee's part,
// limit − √limit, less one connection kept free for each other tenant, by weight and at least
// one each, so that a quiet tenant's statement finds the database near its knee rather than
// behind the loud tenant's queue on it. While any tenant is throttled the limit does not grow.
// Throttles end when the limit lets go or the tenants no longer contend.
func (p *Pool) throttleTenants() bool {
	t := p.store.ten
	if t == nil {
		return false
	}
	limit := float64(p.ovl.limit.Load())
	s := &p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	var active []*tenantClass
	var wsum float64
	for _, c := range t.classes {
		acq := c.acquires.Load()
		if acq != c.winAcq || c.nwait > 0 || c.held.Load() > 0 {
			active = append(active, c)
			wsum += c.weight()
		}
		c.winAcq = acq
	}
	var over []*tenantClass
	var wover float64
	if limit > 0 && len(active) > 1 {
		for _, c := range active {
			if float64(int(c.held.Load())+c.nwait) > limit*c.weight()/wsum {
				over = append(over, c)
				wover += c.weight()
			}
		}
	}
	if len(over) == len(active) {
		over = nil // all beyond their share: no one is throttled
	}
	budget := max(1, math.Round(limit-math.Sqrt(limit))-float64(len(active)-len(over)))
	s.setThrottlesLocked(func(c *tenantClass) int32 {
		if !slices.Contains(over, c) {
			return 0
		}
		return int32(max(1, math.Floor(budget*c.weight()/wover)))
	})
	return over != nil
}

// weight is c's Tenant.Weight, as its stride encodes it.
func (c *tenantClass) weight() float64 { return float64(tenantStrideUnit / c.stride) }

// setThrottlesLocked sets every class's throttle to th(class) (0: none) and serves waiters
// from the idle stack when a throttle rose or ended.
func (s *store) setThrottlesLocked(th func(*tenantClass) int32) {
	raised := false
	for _, c := range s.ten.classes {
		n := th(c)
		if old := c.throttle.Swap(n); old != 0 && (n == 0 || n > old) {
			raised = true
		}
	}
	if raised && !s.closed {
		s.serveIdleLocked()
	}
}

// tenantStats returns the classes' numbers (nil without tenants).
func (p *Pool) tenantStats() []TenantStats {
	t := p.store.ten
	if t == nil {
		return nil
	}
	out := make([]TenantStats, len(t.classes))
	p.store.mu.Lock()
	for i, c := range t.classes {
		out[i] = TenantStats{Key: c.key, Waiting: c.nwait}
	}
	p.store.mu.Unlock()
	for i, c := range t.classes {
		out[i].Held = int(c.held.Load())
		out[i].Acquires = c.acquires.Load()
		out[i].Failed = c.failed.Load()
	}
	return out
}

// ended counts an acquire of class c that ended with err.
func (c *tenantClass) ended(err error) {
	if err == nil {
		c.acquires.Add(1)
		return
	}
	var te *AcquireTimeoutError
	if errors.Is(err, ErrOverloaded) || errors.As(err, &te) {
		c.failed.Add(1)
	}
}
