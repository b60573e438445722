package pool

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// This file is the pool's acquire and release: Connect (every borrow through sql.OpenDB(p), and
// a borrow through p.OpenDB() that finds database/sql's idle list empty) and the proxy's Close.
// It is not the path most borrows through p.OpenDB() take: with a free connection database/sql
// hands out one from its own idle list after conn.ResetSession and takes it back after
// conn.IsValid (conn.go), which check and clean the connection without touching the store.
// A clean cycle here, with no one waiting, takes the store's mutex once to pop and once to
// push (see store), reads the pool's coarse clock (an atomic load) and read-mostly flags; the
// exact clock is read only when an acquire has to wait or probe.

// acquire returns a connection in state inUse, or an error: ErrClosed, ErrPoolExhausted, an
// *AcquireTimeoutError, or the ctx's error wrapped when ctx was cancelled.
func (p *Pool) acquire(ctx context.Context) (*entry, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	// The fast path: an idle connection, trusted without a probe. No deadline, timer or
	// defer; anything else goes to acquireSlow with the connection found.
	if !p.suspended.Load() {
		e := p.store.get()
		if e == nil {
			return p.acquireSlow(ctx, nil, "")
		}
		now := p.now()
		if reason, probe := p.quickCheck(e, now); reason != "" || probe {
			return p.acquireSlow(ctx, e, reason)
		}
		if !p.driverLive(ctx, e) {
			return p.acquireSlow(ctx, e, CloseDriverInvalid)
		}
		if p.cfg.Hooks.BeforeAcquire != nil {
			reason, err := p.runBeforeAcquire(ctx, e, nil)
			if err != nil {
				return nil, err
			}
			if reason != "" {
				return p.acquireSlow(ctx, e, reason)
			}
		}
		p.handedOut(e, now, nil)
		return e, nil
	}
	return p.acquireSlow(ctx, nil, "")
}

// acquireSlow is acquire when the fast path did not do: suspended, nothing idle, or the
// connection it found (first, when not nil) needs a probe or is unfit (firstReason, when
// already known; "" runs the checks).
func (p *Pool) acquireSlow(ctx context.Context, first *entry, firstReason CloseReason) (got *entry, err error) {
	var dl deadline
	defer dl.stop()
	if ao, ok := p.cfg.Events.(AcquireObserver); ok { // tracing (trace.go)
		defer func() { p.noteAcquireEnded(ctx, ao, &dl, err) }()
	}
	if first == nil && p.suspended.Load() {
		if err := p.awaitResume(ctx, &dl); err != nil {
			return nil, err
		}
	}
	for {
		e, known := first, firstReason
		first, firstReason = nil, ""
		if e == nil {
			e = p.store.get()
		}
		if e == nil {
			var err error
			e, err = p.wait(ctx, &dl)
			p.dropUnfit(&dl)
			if err != nil {
				return nil, err
			}
		} else {
			p.dropUnfit(&dl)
		}
		now := p.now()
		reason := known
		if reason == "" {
			reason = p.check(ctx, e, now, &dl)
		}
		if reason == "" && p.cfg.Hooks.BeforeAcquire != nil {
			var err error
			if reason, err = p.runBeforeAcquire(ctx, e, &dl); err != nil {
				return nil, err
			}
		}
		if reason == "" {
			p.handedOut(e, now, &dl)
			return e, nil
		}
		// e is unfit (marked, expired, or it failed its probe). The acquire goes on; unless it
		// ends here, e is closed only once this acquire is queued again (see wait), so that the
		// replacement its close asks the creator for finds it in its place by arrival.
		dl.unfit, dl.unfitReason = e, reason
		if p.closed.Load() {
			p.dropUnfit(&dl)
			return nil, ErrClosed
		}
		// A probe may have used up the caller's ctx or the AcquireTimeout: give up here rather
		// than probe the next idle connection with no time left (or, with a spent ctx, close
		// it unprobed).
		if ctx.Err() != nil || dl.expired(p) {
			p.dropUnfit(&dl)
		}
		if ctx.Err() != nil {
			return nil, p.timeoutError(ctx, &dl, true)
		}
		if dl.expired(p) {
			return nil, p.timeoutError(ctx, &dl, false)
		}
	}
}

// handedOut records a hand-out of e at now, for Connect (dl: its deadline) and for a
// database/sql checkout (conn.ResetSession, dl nil): it counts it (Stats.Acquires), stamps the
// borrow, tells Events and arms leak detection. The first hand-out of a connection also ends a
// dead-on-arrival streak: a connection the creator opened was good enough to use.
func (p *Pool) handedOut(e *entry, now int64, dl *deadline) {
	if e.handouts.Add(1) == 1 && p.deadOnArrival.Load() != 0 {
		p.deadOnArrival.Store(0)
	}
	e.borrowedAt = now
	if ev := p.cfg.Events; ev != nil {
		p.noteAcquired(ev, e, dl)
	}
	if p.cfg.LeakDetectionThreshold > 0 {
		e.leak = p.watchLeak(e)
	}
}

// deadline is one acquire's AcquireTimeout, armed on first need so that an acquire that finds
// an idle connection never reads the exact clock or makes a timer.
type deadline struct {
	start int64 // exact pool time when the acquire first had to wait or probe; 0: not yet
	timer *time.Timer
	// ticket is the acquire's place in the waiters' queue by arrival, given when it first
	// queues; 0: it has not queued yet.
	ticket uint64
	// unfit is a connection this acquire found unfit and has yet to close, for unfitReason.
	unfit       *entry
	unfitReason CloseReason
	// limit is the pool's AcquireTimeout when the deadline was armed: a SetAcquireTimeout
	// meanwhile applies to acquires that begin to wait after it.
	limit time.Duration
	// probes counts the liveness probes this acquire ran (AcquireObserver).
	probes int
}

func (d *deadline) begin(p *Pool) int64 {
	if d.start == 0 {
		d.start = max(p.nanotime(), 1)
		d.limit = p.acquireTimeout()
	}
	return d.start
}

// acquireLimit arms the deadline and returns its AcquireTimeout (negative: off).
func (d *deadline) acquireLimit(p *Pool) time.Duration {
	d.begin(p)
	return d.limit
}

// timeout arms the AcquireTimeout timer once and returns its channel (nil when AcquireTimeout
// is off: only the ctx bounds the wait).
func (d *deadline) timeout(p *Pool) <-chan time.Time {
	if d.acquireLimit(p) <= 0 {
		return nil
	}
	if d.timer == nil {
		left := max(time.Duration(d.start+durNanos(d.limit)-p.nanotime()), 0)
		if t, ok := timerPool.Get().(*time.Timer); ok {
			t.Reset(left)
			d.timer = t
		} else {
			d.timer = time.NewTimer(left)
		}
	}
	return d.timer.C
}

// timerPool keeps stopped AcquireTimeout timers for reuse: a saturated pool arms one per wait.
// Since Go 1.23 a timer's channel is unbuffered and Stop and Reset discard a pending tick, so a
// reused timer never delivers a stale one.
var timerPool sync.Pool

// expired reports whether the deadline, once armed, has passed.
func (d *deadline) expired(p *Pool) bool {
	return d.start != 0 && d.limit > 0 && d.left(p) <= 0
}

// left is the time left before AcquireTimeout, or -1 when it is off.
func (d *deadline) left(p *Pool) time.Duration {
	if d.acquireLimit(p) <= 0 {
		return -1
	}
	return time.Duration(d.start + durNanos(d.limit) - p.nanotime())
}

func (d *deadline) stop() {
	if d.timer != nil {
		d.timer.Stop()
		timerPool.Put(d.timer)
		d.timer = nil
	}
}

// dropUnfit closes the connection the acquire found unfit, if any.
func (p *Pool) dropUnfit(dl *deadline) {
	if e := dl.unfit; e != nil {
		dl.unfit = nil
		p.closeEntry(e, dl.unfitReason)
	}
}

// driverLive asks the driver whether the connection may be handed out, as database/sql does
// before it reuses a connection from its own idle list: through its SessionResetter.
// go-sql-driver/mysql answers driver.ErrBadConn there when its connection is closed or busy, and
// (CheckConnLiveness, on by default) when a non-blocking read of the socket finds that the server
// closed it (KILL, wait_timeout, restart) — no bytes are sent. For a connection checked out of
// database/sql's idle list (p.OpenDB()) conn.ResetSession calls the driver's instead. Cost: see docs/reliability.md.
func (p *Pool) driverLive(ctx context.Context, e *entry) bool {
	if sr := e.resetter; sr != nil && sr.ResetSession(ctx) != nil {
		return false
	}
	return p.sessionAlive(e)
}

// quickCheck is the part of check that needs no I/O: reason is why e may not be handed out
// (marked, expired), and probe says it may only after a probe (outside the bypass window, or
// not known alive since a server-gone report). The driver's liveness check is not part of it.
func (p *Pool) quickCheck(e *entry, now int64) (reason CloseReason, probe bool) {
	if e.evict.Load() {
		return CloseEvicted, false
	}
	if e.expired(now) {
		return CloseMaxLifetime, false
	}
	// After a server-gone report a connection is trusted only if known alive since: last alive
	// after it, and borrowed (or, never borrowed, dialled) after it. One that was out on loan
	// when the report came was returned after it, so lastAlive is recent, but its borrower may
	// not have used it since the server restarted under it.
	gone := p.goneFor(e)
	alive := e.lastAlive
	return "", !(p.trusted(now, alive) && alive >= gone && max(e.borrowedAt, e.createdAt) >= gone)
}

// usableLent is usable for a connection checked out of database/sql's idle list
// (conn.ResetSession): an unfit one is only marked, because database/sql closes it through the proxy.
func (p *Pool) usableLent(ctx context.Context, e *entry, now int64) bool {
	if reason := p.check(ctx, e, now, nil); reason != "" {
		e.evict.Store(true)
		e.discard = reason // the Close database/sql sends next closes it for this reason
		return false
	}
	return true
}

// check returns "" when e may be handed out, or why not: it is marked, expired, the driver
// says it is dead (driverLive; acquire only, dl not nil), or it fails its probe. A probe
// (driver Pinger, within ValidationTimeout) runs when the connection was last known alive
// before the bypass window, or before a connection reported that the server went
// away. When dl is not nil the probe also ends at the acquire's AcquireTimeout deadline.
func (p *Pool) check(ctx context.Context, e *entry, now int64, dl *deadline) CloseReason {
	reason, probe := p.quickCheck(e, now)
	if reason != "" {
		return reason
	}
	if !probe {
		// Inside the bypass window nothing is sent, but what the driver can tell without
		// traffic is still asked (Connect; a checkout from a DB's idle list has asked already,
		// in conn.ResetSession).
		if dl != nil && !p.driverLive(ctx, e) {
			return CloseDriverInvalid
		}
		return ""
	}
	p.validations.Add(1)
	if dl != nil {
		dl.probes++
	}
	ev := p.cfg.Events
	timeout := p.cfg.ValidationTimeout
	if dl != nil && dl.acquireLimit(p) > 0 {
		timeout = min(timeout, max(dl.left(p), time.Millisecond))
	}
	if err := p.probe(ctx, e, timeout); err != nil {
		p.probeFailed.Add(1)
		if ev != nil {
			ev.Validated(p.cfg.Name, false)
		}
		if ctx.Err() == nil {
			if e.handouts.Load() == 0 {
				p.deadOnArrival.Add(1) // dialled, never used, already dead: see creator
			}
			p.setLastError(fmt.Errorf("validating connection: %w", err))
			p.cfg.Logger.Warn("sqlpool: connection failed validation; closing it",
				"pool", p.cfg.Name, "conn", e.id, "error", err)
		}
		return CloseValidationFailed
	}
	e.lastAlive = p.now()
	p.clearLastError()
	if p.deadOnArrival.Load() != 0 {
		p.deadOnArrival.Store(0)
	}
	if ev != nil {
		ev.Validated(p.cfg.Name, true)
	}
	return ""
}

// wait queues the caller until a connection is pushed for it, the deadline passes, the ctx
// ends or the pool closes.
func (p *Pool) wait(ctx context.Context, dl *deadline) (*entry, error) {
	s := &p.store
	w := waiterPool.Get().(*waiter)
	w.barged = false
	// Counted as waiting from before the look at the stack below until this function returns,
	// so that conn.IsValid routes every return meanwhile to the pool instead of parking it in
	// database/sql (lend.go).
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	w.since = dl.begin(p) // before the lock: the exact clock is a VDSO call
	s.mu.Lock()
	if e := s.popLocked(); e != nil {
		s.mu.Unlock()
		waiterPool.Put(w)
		return e, nil
	}
	if s.closed {
		s.mu.Unlock()
		waiterPool.Put(w)
		return nil, ErrClosed
	}
	if p.unavailable.Load() != nil { // SetUnavailable (hosts.go)
		s.mu.Unlock()
		waiterPool.Put(w)
		return nil, p.unavailableErr()
	}
	if dl.ticket != 0 {
		// Back after the connection handed to it failed validation (or expired, or was
		// marked): it keeps its place by arrival, ahead of later arrivals, and is not counted
		// against MaxWaiters again. Like a barged waiter, it gets the next connection directly.
		w.ticket = dl.ticket
		w.barged = true
		s.requeueLocked(w)
	} else {
		if mw := p.cfg.MaxWaiters; mw < 0 || (mw > 0 && s.nwait+int(p.suspendWaiting.Load()) >= mw) {
			s.mu.Unlock()
			waiterPool.Put(w)
			p.exhausted.Add(1)
			return nil, p.exhaustedError()
		}
		s.tickets++
		dl.ticket = s.tickets
		w.ticket = dl.ticket
		s.pushBackLocked(w)
	}
	s.mu.Unlock()
	p.dropUnfit(dl) // queued in place: now its replacement may come
	// At MaxConns the creator has nothing to do for this waiter, and waking its goroutine on
	// every wait costs a saturated pool a scheduler round trip per borrow. A connection that
	// closes after this look signals the creator itself (closeEntry), and sees this waiter,
	// queued above.
	if p.reg.open() < p.maxConns() {
		p.signalCreator()
	}
	// Connections parked in database/sql's idle lists cannot be handed to this waiter; from
	// now on releases route connections here instead of parking them (conn.IsValid), and any
	// parked before are brought back (see reclaimLent).
	p.reclaimLent()

	dl.begin(p)
	timeout := dl.timeout(p)
	for {
		select {
		case e := <-w.ch:
			if e != nil {
				waiterPool.Put(w)
				return e, nil
			}
			s.mu.Lock()
			if e := s.popLocked(); e != nil {
				s.mu.Unlock()
				waiterPool.Put(w)
				return e, nil
			}
			if s.closed {
				s.mu.Unlock()
				waiterPool.Put(w)
				return nil, ErrClosed
			}
			if p.unavailable.Load() != nil { // SetUnavailable (hosts.go)
				s.mu.Unlock()
				waiterPool.Put(w)
				return nil, p.unavailableErr()
			}
			// A running goroutine barged in; keep our place by arrival (the head, unless an
			// older waiter came back meanwhile).
			w.barged = true
			s.requeueLocked(w)
			s.mu.Unlock()
			// The creator may have judged "no waiters" while we were unlinked: tell it again
			// (only below MaxConns; at the limit a wake-up would be wasted on every lost race).
			if p.reg.open() < p.maxConns() {
				p.signalCreator()
			}
		case <-timeout:
			return nil, p.giveUp(ctx, w, dl, false)
		case <-ctx.Done():
			return nil, p.giveUp(ctx, w, dl, true)
		}
	}
}

// giveUp leaves the queue after a deadline or cancellation. If a connection or a wake-up was
// already sent to w, it is passed on so that no connection is stranded.
func (p *Pool) giveUp(ctx context.Context, w *waiter, dl *deadline, byCtx bool) error {
	s := &p.store
	s.mu.Lock()
	if w.queued {
		s.unlinkLocked(w)
		s.mu.Unlock()
	} else {
		s.mu.Unlock()
		if e := <-w.ch; e != nil {
			if !s.put(e) {
				p.closeEntry(e, ClosePoolClosed)
			}
		} else {
			s.mu.Lock()
			if len(s.idle) > 0 {
				s.wakeLocked()
			}
			s.mu.Unlock()
		}
	}
	waiterPool.Put(w)
	if p.closed.Load() {
		return ErrClosed
	}
	return p.timeoutError(ctx, dl, byCtx)
}

func (p *Pool) timeoutError(ctx context.Context, dl *deadline, byCtx bool) error {
	if byCtx && ctx.Err() != context.DeadlineExceeded {
		return fmt.Errorf("sqlpool: %s: acquire abandoned: %w", p.cfg.Name, ctx.Err())
	}
	p.timeouts.Add(1)
	waited := time.Duration(p.nanotime() - dl.begin(p))
	if ev := p.cfg.Events; ev != nil {
		ev.AcquireTimedOut(p.cfg.Name, waited)
	}
	st := p.Stats()
	lastErr := p.lastError()
	return &AcquireTimeoutError{
		Pool:        p.cfg.Name,
		Waited:      waited,
		Total:       st.Total,
		Active:      st.Active,
		Idle:        st.Idle,
		Waiting:     st.Waiting + 1,
		CtxDeadline: byCtx,
		Failing:     lastErr != nil,
		LastErr:     lastErr,
	}
}

func (p *Pool) exhaustedError() error {
	return fmt.Errorf("%w (pool %s, MaxWaiters %d)", ErrPoolExhausted, p.cfg.Name, p.cfg.MaxWaiters)
}

// awaitResume blocks a new acquire while the pool is suspended. Such an acquire counts as
// waiting: in Stats.Waiting and against MaxWaiters, which it fails at once with
// ErrPoolExhausted when MaxWaiters goroutines already wait (queued or suspended).
func (p *Pool) awaitResume(ctx context.Context, dl *deadline) error {
	p.suspendMu.Lock()
	ch, suspended := p.resumeCh, p.suspended.Load()
	if suspended {
		if mw := p.cfg.MaxWaiters; mw != 0 {
			_, queued := p.store.counts()
			if mw < 0 || queued+int(p.suspendWaiting.Load()) >= mw {
				p.suspendMu.Unlock()
				p.exhausted.Add(1)
				return p.exhaustedError()
			}
		}
		p.suspendWaiting.Add(1)
	}
	p.suspendMu.Unlock()
	if !suspended {
		return nil
	}
	var byCtx bool
	select {
	case <-ch:
		p.suspendWaiting.Add(-1)
		if p.closed.Load() {
			return ErrClosed
		}
		return nil
	case <-dl.timeout(p):
	case <-ctx.Done():
		byCtx = true
	}
	p.suspendWaiting.Add(-1) // before timeoutError, which counts this acquire itself
	return p.timeoutError(ctx, dl, byCtx)
}

// release takes back a connection from its borrower. A connection that saw a fatal error, that
// the driver says is broken, that cannot be cleaned, that is marked or expired, or that comes
// back to a closed pool is closed; any other goes on the idle stack.
func (p *Pool) release(e *entry) {
	if ev := p.cfg.Events; ev != nil {
		p.noteReleased(ev, e)
	}
	now := p.now()
	if reason := p.clean(e, now); reason != "" {
		p.closeEntry(e, reason)
		return
	}
	p.stow(e, now)
}

// stow puts a clean entry back on the stack, stamping its return time.
func (p *Pool) stow(e *entry, now int64) {
	e.lastReturned = now
	e.lastAlive = now
	if p.retireExcess(e) { // above MaxConns after SetMaxConns lowered it
		return
	}
	if !p.store.put(e) {
		p.closeEntry(e, ClosePoolClosed)
		return
	}
	p.trimAfterPut()
}

// clean makes e ready for the next borrower and returns "" or why it cannot be reused.
func (p *Pool) clean(e *entry, now int64) CloseReason {
	if e.leak != nil {
		e.leak.stop(p, e)
		e.leak = nil
	}
	switch {
	case e.discard != "":
		return e.discard
	case e.fatal != nil:
		return CloseFatalError
	case e.evict.Load():
		p.releaseLocks(e)
		return CloseEvicted
	case e.expired(now):
		p.releaseLocks(e)
		return CloseMaxLifetime
	case p.closed.Load():
		p.releaseLocks(e)
		return ClosePoolClosed
	}
	if e.validator != nil && !e.validator.IsValid() {
		return CloseDriverInvalid
	}
	if p.cfg.Hooks.AfterRelease != nil {
		if reason := p.runAfterRelease(e); reason != "" {
			return reason
		}
	}
	if !e.sess.clean() {
		p.releasePlans.Add(1)
		if err := p.runPlanObserved(e); err != nil {
			p.cfg.Logger.Info("sqlpool: connection discarded on release", "pool", p.cfg.Name, "conn", e.id, "reason", err)
			return CloseResetFailed
		}
	}
	return ""
}
