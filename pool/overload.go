package pool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Overload control: what the pool does when more borrowers want connections than the database
// can serve before their deadlines (docs/operations.md "Overload", docs/design/overload.md).
//
// Without it a flood of requests with deadlines collapses the pool: first come, first served
// hands each freed connection to the oldest waiter, whose deadline is nearest; the deadline
// expires in the statement; the driver closes the socket, the pool sends KILL QUERY and dials
// a replacement, and the pool's throughput falls to its dial rate. Three mechanisms prevent it,
// all inactive until the pool is congested, so that a pool that is merely busy (a queue that
// drains, or a standing queue whose waiters all get served in time) behaves as before:
//
//  1. Congestion, after CoDel (Nichols and Jacobson; Facebook's "Fail at Scale"): the pool is
//     congested when demand exceeds connections that are being returned: its waiters' queue
//     has not emptied for the congestion interval (100 ms), a connection was returned to a
//     waiter within the last five intervals, and a waiter lost its deadline in the queue within the
//     last ten intervals (timed out waiting, was shed or could not finish, or was served after
//     waiting longer than the time it had left) while no dial or probe was failing. A
//     statement that ran into its deadline is not such a loss: after a short wait it says that
//     the database or a host is slow, not that the queue is long, and a long wait before it
//     was already counted at the hand-out. So a stalled host (its connections return nothing,
//     their statements hit their deadlines) or an outage (dials fail) is not overload.
//     Congestion ends when the queue empties or no connection was returned for five intervals.
//     While congested, a freed connection goes to the newest waiter (LIFO), and a waiter waits
//     at most the larger of OverloadTarget and the estimated borrow time before it fails with
//     ErrOverloaded (unless connections stopped coming back meanwhile): those that are served
//     have their whole deadline left, those that are not fail fast, without taking a connection.
//  2. While congested, a waiter that cannot finish in time — its context's deadline is nearer
//     than the estimated borrow time (sampled) — fails at once with a *overloadError that matches both
//     ErrOverloaded and context.DeadlineExceeded, instead of taking a connection it would lose
//     in the statement.
//  3. Unless AdaptiveLimitFloor is negative, an adaptive limit on the connections in
//     circulation, between AdaptiveLimitFloor (2) and MaxConns, engaged at a congestion
//     (docs/design/overload.md): connections above the limit are set aside
//     (benched) open and idle, so that fewer statements share the database and each finishes
//     sooner. It follows the gradient algorithm (Netflix's concurrency-limits): every
//     congestion interval (100 ms), from the sampled borrow times of the window, newLimit =
//     limit + √limit while latency is within 10 % of the baseline, else limit ×
//     max(0.5, baseline/latency) + √limit (gradient 0.5 when statements ran into their
//     deadlines; no growth without waiters), smoothed by half (adjustLimit); the baseline is
//     the lowest window latency since the limit engaged. It starts at the floor, so that
//     the baseline is measured at low concurrency, grows back once congestion ended, and
//     disengages when back at MaxConns, or at a stall (no connection came back to a waiter
//     for five intervals: the connections it set aside come back). Besides congestion, the
//     database's own overload engages it: statements running into their deadlines, many and
//     a large share of the borrows (serverOverloaded), as when every connection is out and the
//     server queues the statements.
//
// Cost when not congested: an acquire that waits looks at a few more fields under the store
// lock, and a return to a waiter stamps the exact clock (which it read anyway for the
// hand-off age); one borrow in sixteen reads the exact clock at hand-out and at release and
// takes a mutex to feed the estimate (sampled, and only while someone waits); the others pay a
// load and a branch at hand-out and at release, and a release one atomic load of the limit. A
// statement that runs into its deadline takes a mutex, and once a second sums the hand-outs.

// ErrOverloaded is matched by an acquire refused under overload (and, when its deadline was too
// near to finish, context.DeadlineExceeded too): it took no connection.
var ErrOverloaded = errors.New("sqlpool: overloaded")

// overloadError is an acquire refused under overload: shed after waiting (Waited) while the
// pool was congested, or, CannotFinish, failed at once because its context's deadline (Left)
// was nearer than a borrow takes (Estimate). It matches ErrOverloaded, and
// context.DeadlineExceeded when CannotFinish.
type overloadError struct {
	Pool                   string
	CannotFinish           bool
	Left, Estimate, Waited time.Duration
	Limit                  int // connections in circulation allowed then
}

func (e *overloadError) Error() string {
	if e.CannotFinish {
		return fmt.Sprintf("sqlpool: %s: overloaded: the context's deadline is %v away, less than a borrow takes now (%v): failed at once without taking a connection; shed load or give requests longer deadlines",
			e.Pool, e.Left.Round(time.Microsecond), e.Estimate.Round(time.Microsecond))
	}
	return fmt.Sprintf("sqlpool: %s: overloaded: the queue has not emptied for a while and requests miss their deadlines; shed after waiting %v (limit %d connections in circulation); back off before retrying",
		e.Pool, e.Waited.Round(time.Microsecond), e.Limit)
}

func (e *overloadError) Is(target error) bool {
	return target == ErrOverloaded || (e.CannotFinish && target == context.DeadlineExceeded)
}

// Defaults of the overload settings (CoDel's target and interval).
const (
	defaultOverloadTarget   = 5 * time.Millisecond
	defaultOverloadInterval = 100 * time.Millisecond
	// defaultLimitFloor is AdaptiveLimitFloor's default: two connections keep one statement
	// running on the server while the other's result travels.
	defaultLimitFloor = 2
	// lossMemory is how long after a deadline loss a standing queue still counts as congestion.
	lossMemory = 10 // intervals
	// returnMemory is how long without a connection coming back to a waiter ends congestion (a
	// stalled host or an outage, not overload): longer than a statement of a mixed load takes
	// with the adaptive limit low (several scans holding every connection in circulation).
	returnMemory = 5 // intervals
	// sampleMask: one borrow in sampleMask+1 is timed (handouts & sampleMask == 0), and only
	// while someone waits or the adaptive limit is engaged: an uncontended pool times nothing.
	sampleMask = 15
)

// shedSignal is sent on a waiter's channel to shed it (it is never a connection).
var shedSignal = &entry{}

// overload is a pool's overload-control state.
type overload struct {
	on       bool
	adaptive bool
	target   int64 // ns
	interval int64 // ns
	floor    int

	lastLoss atomic.Int64 // pool time of the last deadline loss; 0: none
	stmtLoss atomic.Int32 // statements that ran into their deadline, this window
	holdEst  atomic.Int64 // EWMA of sampled borrow times, ns; 0: no sample yet
	limit    atomic.Int32 // connections in circulation allowed; 0: not engaged (MaxConns)
	engaged  atomic.Bool  // the limit was just engaged: the next window starts afresh

	shed         atomic.Uint64
	cannotFinish atomic.Uint64
	changes      atomic.Uint64

	// Written under store.mu.
	congested atomic.Bool
	busySince int64 // when the queue last became non-empty; under store.mu

	mu        sync.Mutex // the sample window, and the statement losses' (serverOverloaded)
	sStart    int64
	sLosses   int
	sHandouts uint64
	winStart  int64
	winSum    int64
	winN      int64
	baseline  int64 // lowest window mean since the limit engaged, ns
	limitF    float64
	skip      bool
	throttled bool // throttleTenants throttled a tenant at the last window's end
}

// startLimit is where the adaptive limit starts when it engages: the floor, so that the
// baseline is measured at the lowest concurrency (a baseline measured in the flood would hide
// the queue); it grows back by √limit an interval while latency stays flat.
func (o *overload) startLimit(p *Pool) int {
	return max(o.floor, 1)
}

func (o *overload) init(c Config) {
	o.on = c.OverloadTarget > 0
	o.target = int64(c.OverloadTarget)
	o.interval = int64(c.overloadInterval)
	o.adaptive = o.on && c.AdaptiveLimitFloor > 0
	o.floor = c.AdaptiveLimitFloor
}

// resolveOverload applies the overload settings' defaults (Config.resolved).
func (c *Config) resolveOverload() {
	switch {
	case c.OverloadTarget == 0:
		c.OverloadTarget = defaultOverloadTarget
	case c.OverloadTarget < 0:
		c.OverloadTarget = -1
	}
	if c.overloadInterval <= 0 {
		c.overloadInterval = defaultOverloadInterval
	}
	switch {
	case c.AdaptiveLimitFloor == 0:
		c.AdaptiveLimitFloor = min(defaultLimitFloor, c.MaxConns)
	case c.AdaptiveLimitFloor < 0:
		c.AdaptiveLimitFloor = -1
	case c.AdaptiveLimitFloor > c.MaxConns:
		c.AdaptiveLimitFloor = c.MaxConns
	}
}

// noteLoss records that a borrower lost its deadline (timed out waiting, shed, cannot finish).
func (p *Pool) noteLoss() {
	if p.ovl.on {
		p.ovl.lastLoss.Store(max(p.nanotime(), 1))
	}
}

// noteStmtLoss is observe's: a statement ran into its context's deadline (or the server's
// statement time limit). It is no sign of congestion (see the file's comment); it feeds the
// adaptive limit's gradient, and engages the limit when the database itself is overloaded
// (serverOverloaded).
func (p *Pool) noteStmtLoss() {
	o := &p.ovl
	if !o.adaptive || p.lastError() != nil {
		return
	}
	o.stmtLoss.Add(1)
	if o.limit.Load() == 0 {
		p.serverOverloaded()
	}
}

// Server overload: a database that takes more statements than it can finish in time queues
// them itself, so the pool sees no queue of its own (its connections are all out, running
// statements that miss their deadlines). The adaptive limit engages when, over at least
// stmtLossWindow intervals, at least minStmtLosses statements and stmtLossShare of the borrows
// ran into their deadlines: a stalled host loses one statement per connection it holds per
// deadline, a small share of the borrows the healthy hosts serve meanwhile (and if the limit
// engages anyway, the stall rule lets it go: congestedLocked). Three intervals, not ten: every
// interval until it engages, the database's overload kills statements at their deadlines.
const (
	minStmtLosses  = 8
	stmtLossShare  = 0.05
	stmtLossWindow = 3 // intervals
)

// serverOverloaded counts a statement loss in the current window (under ovl.mu) and, once the
// window is stmtLossWindow intervals long, engages the adaptive limit if the losses were many.
func (p *Pool) serverOverloaded() {
	o := &p.ovl
	now := p.nanotime()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sLosses++
	if o.sStart == 0 { // the first loss opens the first window
		o.sStart, o.sHandouts, o.sLosses = now, p.handoutsTotal(), 1
		return
	}
	if now-o.sStart < stmtLossWindow*o.interval {
		return
	}
	h := p.handoutsTotal()
	many := o.sLosses >= minStmtLosses && float64(o.sLosses) >= stmtLossShare*float64(h-o.sHandouts)
	o.sStart, o.sHandouts, o.sLosses = now, h, 0
	if many && o.limit.CompareAndSwap(0, int32(o.startLimit(p))) {
		o.engaged.Store(true)
		o.changes.Add(1)
		// The borrowers the limit now queues would wait first come, first served until one
		// of them lost its deadline in the queue (up to a deadline: the oldest served near
		// it); the statements' losses are that evidence already, so the standing queue counts
		// as congestion once it has not emptied for an interval.
		o.lastLoss.Store(max(now, 1))
	}
}

// handoutsTotal is the pool's hand-outs so far (Stats.Acquires).
func (p *Pool) handoutsTotal() uint64 {
	p.reg.mu.Lock()
	defer p.reg.mu.Unlock()
	n := p.handouts.Load()
	for _, e := range p.reg.entries() {
		n += e.handouts.Load()
	}
	return n
}

// congestedLocked is wait's look at congestion before it queues, under store.mu, at now.
func (p *Pool) congestedLocked(now int64) bool {
	o, s := &p.ovl, &p.store
	if !o.on {
		return false
	}
	if now-s.lastPut > returnMemory*o.interval { // no connection came back to a waiter lately
		p.stalledLocked() // a stalled host, an outage, or the end of an overload
		if s.nwait == 0 {
			o.busySince = now
		}
		return false
	}
	if s.nwait == 0 {
		p.endCongestionLocked()
		o.busySince = now
		return false
	}
	if !o.congested.Load() && now-o.busySince > o.interval {
		if ll := o.lastLoss.Load(); ll != 0 && now-ll < lossMemory*o.interval {
			o.congested.Store(true)
			s.lifo = true
			if o.adaptive && o.limit.CompareAndSwap(0, int32(o.startLimit(p))) {
				o.engaged.Store(true) // sampledRelease restarts the window and the baseline
				o.changes.Add(1)
			}
		}
	}
	if o.congested.Load() {
		s.shedNs = int64(o.shedAfter())
	}
	return o.congested.Load()
}

// endCongestionLocked ends congestion (under store.mu): first come, first served again.
func (p *Pool) endCongestionLocked() {
	if p.ovl.congested.Load() {
		p.ovl.congested.Store(false)
	}
	p.store.lifo = false
}

// stalledLocked ends congestion (under store.mu) when no connection came back to a waiter for
// returnMemory intervals, and lets the adaptive limit go: the overload ended, or a stalled
// host holds the connections in circulation and those set aside may be the only ones that
// work. The caller brings them back (releaseBench) once it released store.mu.
func (p *Pool) stalledLocked() {
	p.endCongestionLocked()
	if o := &p.ovl; o.limit.Load() != 0 {
		o.limit.Store(0) // the next engagement starts afresh (engaged)
		o.changes.Add(1)
	}
	if p.store.ten != nil {
		p.store.setThrottlesLocked(func(*tenantClass) int32 { return 0 })
	}
}

// releaseBench puts the connections the adaptive limit set aside back into circulation when
// the limit is no longer engaged (stalledLocked); a load and a branch otherwise.
func (p *Pool) releaseBench() {
	if p.store.nbenched.Load() != 0 && p.ovl.limit.Load() == 0 {
		p.unbench(p.maxConns())
	}
}

// shedNow is a waiter's whose shed bound passed: it reports whether to shed it, that is
// whether the pool is still congested and connections still come back; when they stopped
// (a host stalled since), congestion ends and the waiter waits on.
func (p *Pool) shedNow() bool {
	s := &p.store
	s.mu.Lock()
	if !p.ovl.congested.Load() {
		s.mu.Unlock()
		return false
	}
	if p.nanotime()-s.lastPut > returnMemory*p.ovl.interval {
		p.stalledLocked()
		s.mu.Unlock()
		p.releaseBench()
		return false
	}
	s.mu.Unlock()
	return true
}

// nearMiss is a waiter's, served after waiting since start: when it waited longer than the
// congestion interval and than the time it has left before its deadline, the queue is eating
// deadlines — a loss for congestion, noted before the first deadline passes.
func (p *Pool) nearMiss(ctx context.Context, start int64) {
	dl, ok := ctx.Deadline()
	if !ok {
		return
	}
	waited := p.nanotime() - start
	if waited > p.ovl.interval && int64(time.Until(dl)) < waited {
		p.noteLoss()
	}
}

// shedAfter is how long a waiter may wait while the pool is congested.
func (o *overload) shedAfter() time.Duration {
	return time.Duration(max(o.target, o.holdEst.Load()))
}

// cannotFinish returns a *overloadError when the pool is congested and ctx's deadline is nearer
// than the estimated borrow time; nil otherwise (or without an estimate or a deadline).
func (p *Pool) cannotFinish(ctx context.Context) error {
	o := &p.ovl
	if !o.congested.Load() {
		return nil
	}
	est := o.holdEst.Load()
	if est == 0 {
		return nil
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	left := time.Until(dl)
	if int64(left) >= est {
		return nil
	}
	o.cannotFinish.Add(1)
	p.noteLoss()
	return &overloadError{Pool: p.cfg.Name, CannotFinish: true, Left: left, Estimate: time.Duration(est), Limit: p.circulationLimit()}
}

// shedError is the error of a waiter shed under congestion after waiting since start.
func (p *Pool) shedError(start int64) error {
	p.ovl.shed.Add(1)
	p.noteLoss()
	return &overloadError{Pool: p.cfg.Name, Waited: time.Duration(p.nanotime() - start), Limit: p.circulationLimit()}
}

// circulationLimit is the adaptive limit, or MaxConns when it is not engaged.
func (p *Pool) circulationLimit() int {
	if l := int(p.ovl.limit.Load()); l > 0 {
		return min(l, p.maxConns())
	}
	return p.maxConns()
}

// sampledHandout is handedOut's for one borrow in sampleMask+1: it stamps it with the exact
// clock while the pool is contended (someone waits) or the adaptive limit is engaged.
func (p *Pool) sampledHandout(e *entry) {
	if p.ovl.on && (p.store.waiting.Load() != 0 || p.ovl.limit.Load() != 0) {
		e.sampledAt = p.nanotime()
	}
}

// sampledRelease is release's for a timed borrow: it feeds the estimate and the limit.
func (p *Pool) sampledRelease(e *entry) {
	now := p.nanotime()
	d := now - e.sampledAt
	e.sampledAt = 0
	o := &p.ovl
	o.mu.Lock()
	defer o.mu.Unlock()
	if est := o.holdEst.Load(); est == 0 {
		o.holdEst.Store(d)
	} else {
		o.holdEst.Store(est + (d-est)/8)
	}
	if o.winStart == 0 {
		o.winStart = now
	}
	if o.engaged.Swap(false) {
		// Freshly engaged: the statements in flight still run at the old concurrency; forget
		// the window, and measure the baseline anew from the next one on.
		o.winStart, o.winSum, o.winN, o.baseline = now, 0, 0, 0
		o.limitF = float64(o.limit.Load())
		o.skip = true
		return
	}
	o.winSum += d
	o.winN++
	if now-o.winStart < o.interval || o.winN < 4 {
		return
	}
	mean := o.winSum / o.winN
	o.winStart, o.winSum, o.winN = now, 0, 0
	if o.skip {
		o.skip = false // the first window after engaging drains the old concurrency
		o.stmtLoss.Store(0)
		return
	}
	if o.baseline == 0 || mean < o.baseline {
		o.baseline = mean
	}
	losses := o.stmtLoss.Swap(0)
	if o.adaptive && o.limit.Load() != 0 {
		p.adjustLimit(mean, losses)
	}
	if o.adaptive {
		o.throttled = p.throttleTenants()
	}
}

// flatLatency: a window whose mean borrow time is within this factor of the baseline shows no
// queue on the database (below its knee): the limit grows by √limit, as the gradient algorithm
// does at gradient 1.
const flatLatency = 1.1

// adjustLimit is the gradient step, under o.mu.
//
// Below the database's knee (latency flat: within flatLatency of the baseline) the limit grows
// by √limit. Above it, latency grows with every statement added (on a saturated database each
// one adds its whole service time to everyone's), and the limit follows the gradient
// baseline/latency (tolerance 1) with a queue allowance of √limit: on one core it settles near
// 4 (the gradient with a tolerance of 2 settled near 11, adding ~7 ms to every statement for
// nothing), on a many-core database at its knee plus a few.
func (p *Pool) adjustLimit(mean int64, losses int32) {
	o := &p.ovl
	if o.limitF == 0 {
		o.limitF = float64(o.limit.Load()) // engaged since the last step
	}
	limit := o.limitF
	b, m := float64(o.baseline), float64(mean)
	waiting, congested := p.store.waiting.Load() != 0, o.congested.Load()
	var next float64
	switch {
	case losses > 0:
		next = limit*0.5 + math.Sqrt(limit) - 1
	case !waiting && !congested: // the limit does not bind: it grows back and lets go
		next = limit + math.Sqrt(limit)
	case m <= flatLatency*b:
		next = limit + math.Sqrt(limit)
		if !waiting { // no demand beyond the limit: no reason to grow (once congestion ended it grows back to MaxConns and lets go)
			next = limit
		}
	default:
		next = limit*max(0.5, b/m) + math.Sqrt(limit)
	}
	if o.throttled { // tenants contend (throttleTenants): the limit does not grow
		next = min(next, limit)
	}
	ceiling := float64(p.maxConns())
	next = 0.5*limit + 0.5*next
	next = min(max(next, float64(o.floor)), ceiling)
	o.limitF = next
	old := int(o.limit.Load())
	n := int(next + 0.5)
	if n >= int(ceiling) && !o.congestedNow(p) {
		o.limit.Store(0) // back at MaxConns and not congested: disengage
		o.limitF = 0
		o.changes.Add(1)
		p.unbench(p.maxConns())
		return
	}
	n = max(n, 1)
	if n != old {
		o.limit.Store(int32(n))
		o.changes.Add(1)
		if n > old {
			p.unbench(n)
		}
	}
}

func (o *overload) congestedNow(*Pool) bool { return o.congested.Load() }

// overLimit reports whether a released connection must be benched: the adaptive limit is
// engaged and more connections circulate than it allows.
func (p *Pool) overLimit() bool {
	return p.ovl.limit.Load() != 0 && p.overLimitEngaged()
}

func (p *Pool) overLimitEngaged() bool {
	l := p.ovl.limit.Load()
	return l != 0 && p.reg.open()-int(p.store.nbenched.Load()) > int(l)
}

// unbench puts benched connections back into circulation until limit circulate.
func (p *Pool) unbench(limit int) {
	for p.store.nbenched.Load() > 0 && p.reg.open()-int(p.store.nbenched.Load()) < limit {
		e := p.store.unbench()
		if e == nil {
			return
		}
		p.park(e)
	}
}

// overloadStats is the overload control's state: congested now; connections allowed in
// circulation (MaxConns unless the adaptive limit is engaged) and idle ones set aside by it;
// the limit's minimum window borrow time and the sampled borrow time; acquires shed and failed
// as unable to finish; changes of the limit.
type overloadStats struct {
	Congested                        bool
	Limit, Benched                   int
	Baseline, Estimate               time.Duration
	Shed, CannotFinish, LimitChanges uint64
}

// overloadStats returns the overload control's state.
func (p *Pool) overloadStats() overloadStats {
	o := &p.ovl
	s := overloadStats{
		Limit:        p.circulationLimit(),
		Benched:      int(p.store.nbenched.Load()),
		Estimate:     time.Duration(o.holdEst.Load()),
		Shed:         o.shed.Load(),
		CannotFinish: o.cannotFinish.Load(),
		LimitChanges: o.changes.Load(),
	}
	o.mu.Lock()
	s.Baseline = time.Duration(o.baseline)
	o.mu.Unlock()
	s.Congested = o.congested.Load()
	return s
}

// fillOverloadStats adds the overload control's figures to Stats.
func (p *Pool) fillOverloadStats(s *Stats) {
	o := p.overloadStats()
	s.Congested, s.Limit, s.LimitBaseline, s.LimitChanges = o.Congested, o.Limit, o.Baseline, o.LimitChanges
	s.Shed = o.Shed + o.CannotFinish
}
