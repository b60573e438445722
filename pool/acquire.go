package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// This file is the pool's one acquire and one release, and the one set of checks a connection
// passes before it is handed out (checkout). Every borrow and return goes through them:
//
//	acquire  Connect (sql.OpenDB(p), and p.OpenDB() when database/sql's idle list is empty), and
//	         conn.ResetSession (database/sql checks out a connection parked in its idle list)
//	release  conn.Close (a borrow from Connect ends) and conn.IsValid (database/sql's check-in
//	         before it parks the connection in its idle list)
//
// The borrow path of p.OpenDB() with a free connection, as database/sql drives it (no store
// lock, no bytes sent, the exact clock read only past the bypass window or for the 1 ms
// liveness window, see sessionAlive):
//
//	 1. conn.ResetSession   takes the parked connection back: lent → inUse
//	 2. Pool.acquire        a closed pool hands out nothing; the connection is the one given
//	 3. Pool.checkout       marked, expired; inside AliveBypassWindow (Pool.trusted) only the
//	                        driver's no-traffic check (Pool.sessionAlive); past it a probe
//	                        (Pool.validate)
//	 4. Pool.handedOut      counted, stamped, told to Trace, watched for leaks
//	    … the borrower's statements (conn.go) …
//	 5. conn.IsValid        database/sql's check-in, before it parks the connection
//	 6. Pool.release        the one release
//	 7. Pool.clean          the release plan: rollback/reset only what the borrower left
//	 8. Pool.retireExcess   above MaxConns (SetMaxConns lowered it): close
//	 9. Pool.lend           park in database/sql (inUse → lent), unless a waiter or Close
//	                        needs it (then database/sql closes its wrapper: conn.Close → park)
//
// Connect takes step 2 from the idle stack (store.get) or waits for a connection (take, wait),
// and its release ends in park (the idle stack, or a waiter) instead of lend.

// acquire hands out a connection in state inUse. lent is nil for Connect: the connection is
// taken from the idle stack, or waited for in arrival order. For a checkout from database/sql's
// idle list (conn.ResetSession) lent is the parked connection, already taken back: it is checked
// and handed out, or refused with errRefused and marked, so that the Close database/sql sends
// next closes it. Errors: ErrClosed, ErrPoolExhausted, an *AcquireTimeoutError, ctx's error
// wrapped when ctx was cancelled, or one matching ErrUnavailable (SetUnavailable, or a refused
// login: login.go).
func (p *Pool) acquire(ctx context.Context, lent *conn) (*entry, error) {
	// 1. A closed pool hands out nothing.
	if p.closed.Load() {
		return nil, ErrClosed
	}
	var dl deadline // armed only when the acquire waits or probes: no exact clock, no timer
	var e *entry
	probeBy := &dl // the probe's bound (validate): Connect's AcquireTimeout; none for a checkout
	if lent != nil {
		e, probeBy = lent.e, nil
	}
	if t := p.store.ten; t != nil { // fair waiting between tenants (tenant.go)
		if dl.tc = t.of(ctx); lent != nil && !p.holdLent(lent, dl.tc) {
			return nil, errRefused
		}
	}
	for {
		// 2. Take a connection: the one database/sql parked, else the top of the idle stack
		//    (store.get), else wait for one, first come, first served (take).
		if e == nil && !dl.slow && !p.suspended.Load() {
			if dl.tc == nil {
				e = p.store.get()
			} else {
				e = p.store.getFor(dl.tc)
			}
		}
		if e == nil {
			var err error
			if e, err = p.take(ctx, &dl); err != nil {
				return nil, p.acquireEnded(ctx, &dl, err)
			}
		}
		// 3. Check it (checkout): marked, expired; inside AliveBypassWindow what the driver
		//    tells without traffic, past it a probe.
		now := p.now()
		reason := p.checkout(ctx, e, now, probeBy)
		// 4. Hooks.BeforeAcquire.
		if reason == "" && p.cfg.Hooks.BeforeAcquire != nil {
			var err error
			if reason, err = p.beforeAcquire(ctx, e, lent, &dl); err != nil {
				return nil, p.acquireEnded(ctx, &dl, err)
			}
		}
		// 5. Hand it out (handedOut).
		if reason == "" {
			p.handedOut(e, now, &dl)
			return e, p.acquireEnded(ctx, &dl, nil)
		}
		// 6. It is unfit. A parked one is refused: database/sql closes it and checks out
		//    another, or calls Connect.
		if lent != nil {
			e.evict.Store(true)
			e.discard = reason // the Close database/sql sends next closes it for this reason
			return nil, errRefused
		}
		// 7. Connect goes back to 2. Unless it ends here, e is closed only once this acquire
		//    is queued again (wait, dropUnfit), so that the replacement its close asks the
		//    creator for finds the acquire in its place by arrival.
		dl.unfit, dl.unfitReason, dl.slow = e, reason, true
		if e.tc != nil {
			p.untenant(e)
		}
		e = nil
		if p.closed.Load() {
			p.dropUnfit(&dl)
			return nil, p.acquireEnded(ctx, &dl, ErrClosed)
		}
		// A probe may have used up the caller's ctx or the AcquireTimeout: give up here rather
		// than probe the next idle connection with no time left (or, with a spent ctx, close
		// it unprobed).
		if ctx.Err() != nil || dl.expired(p) {
			p.dropUnfit(&dl)
		}
		if ctx.Err() != nil {
			return nil, p.acquireEnded(ctx, &dl, p.timeoutError(ctx, &dl, true))
		}
		if dl.expired(p) {
			return nil, p.acquireEnded(ctx, &dl, p.timeoutError(ctx, &dl, false))
		}
	}
}

// errRefused is acquire's error for a connection parked in database/sql that may not be handed
// out; conn.ResetSession answers driver.ErrBadConn.
var errRefused = errors.New("sqlpool: parked connection refused")

// take is acquire's step 2 for Connect when the idle stack was empty, the pool is suspended or
// a previous round found a connection unfit: the top of the idle stack, else a wait in arrival
// order (wait); a new acquire on a suspended pool first waits for Resume (awaitResume). It
// closes the connection a previous round found unfit (dropUnfit) once it has one, or gave up.
func (p *Pool) take(ctx context.Context, dl *deadline) (*entry, error) {
	if !dl.slow && p.suspended.Load() {
		dl.slow = true
		if err := p.awaitResume(ctx, dl); err != nil {
			return nil, err
		}
	}
	dl.slow = true
	e := p.store.getFor(dl.tc)
	var err error
	if e == nil {
		e, err = p.wait(ctx, dl)
	}
	p.dropUnfit(dl)
	return e, err
}

// acquireEnded ends an acquire with err (nil: it handed out a connection). An acquire that
// waited, probed or met an unfit connection stops its timer and is told to Trace.AcquireEnded
// (trace.go); one that took a fit idle connection at once pays two loads.
func (p *Pool) acquireEnded(ctx context.Context, dl *deadline, err error) error {
	if dl.slow || dl.start != 0 || dl.tc != nil {
		p.slowAcquireEnded(ctx, dl, err)
	}
	return err
}

func (p *Pool) slowAcquireEnded(ctx context.Context, dl *deadline, err error) {
	if dl.tc != nil {
		dl.tc.ended(err) // tenant.go
	}
	if ao := p.cfg.Trace; ao != nil && ao.AcquireEnded != nil { // tracing (trace.go)
		p.noteAcquireEnded(ctx, ao, dl, err)
	}
	dl.stop()
}

// checkout is the one set of checks a connection passes before it is handed out, for Connect
// and for a checkout from database/sql's idle list alike. It returns "" or why e may not be
// handed out:
//
//	marked (SoftEvict, EvictHost, MaxLifetime while in use, Close)   CloseEvicted
//	past MaxLifetime                                                 CloseMaxLifetime
//	known alive within AliveBypassWindow and since the last server-gone report: nothing is
//	sent, but what the driver can tell without traffic is asked      CloseDriverInvalid
//	otherwise a probe (validate)                                     CloseValidationFailed
//
// What the driver can tell without traffic is what database/sql asks before it reuses a
// connection from its own idle list: its SessionResetter. go-sql-driver/mysql answers
// driver.ErrBadConn there when its connection is closed or busy, and (CheckConnLiveness, on by
// default) when a non-blocking read of the socket finds that the server closed it (KILL,
// wait_timeout, restart). Then the tracker's SessionCaps.Alive (sessionAlive). Cost: see
// docs/operations.md.
//
// After a server-gone report a connection is trusted only if known alive since: last alive
// after it, and borrowed (or, never borrowed, dialled) after it. One that was out on loan when
// the report came was returned after it, so lastAlive is recent, but its borrower may not have
// used it since the server restarted under it.
func (p *Pool) checkout(ctx context.Context, e *entry, now int64, dl *deadline) CloseReason {
	if e.evict.Load() {
		return CloseEvicted
	}
	if e.expired(now) {
		return CloseMaxLifetime
	}
	gone := p.goneFor(e)
	if alive := e.lastAlive; p.trusted(now, alive) && alive >= gone && max(e.borrowedAt, e.createdAt) >= gone {
		if sr := e.resetter; (sr != nil && sr.ResetSession(ctx) != nil) || !p.sessionAlive(e) {
			return CloseDriverInvalid
		}
		return ""
	}
	return p.validate(ctx, e, dl)
}

// validate probes e (driver Pinger, within ValidationTimeout; for Connect, dl not nil, also
// within the acquire's AcquireTimeout) and returns "" or CloseValidationFailed.
func (p *Pool) validate(ctx context.Context, e *entry, dl *deadline) CloseReason {
	p.validations.Add(1)
	timeout := p.cfg.ValidationTimeout
	if dl != nil {
		dl.probes++
		if dl.acquireLimit(p) > 0 {
			timeout = min(timeout, max(dl.left(p), time.Millisecond))
		}
	}
	if err := p.probe(ctx, e, timeout); err != nil {
		p.probeFailed.Add(1)
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
	return ""
}

// beforeAcquire runs Hooks.BeforeAcquire (hooks.go) on e: for Connect runBeforeAcquire, which
// closes e itself when the hook fails; for a checkout from database/sql's idle list
// lentBeforeAcquire, which marks it.
func (p *Pool) beforeAcquire(ctx context.Context, e *entry, lent *conn, dl *deadline) (CloseReason, error) {
	if lent != nil {
		if !p.lentBeforeAcquire(ctx, lent) {
			return e.discard, nil
		}
		return "", nil
	}
	if dl.start == 0 {
		dl = nil // not armed: the hook gets the whole AcquireTimeout, and no clock is read
	}
	return p.runBeforeAcquire(ctx, e, dl)
}

// handedOut records a hand-out of e at now: it counts it (Stats.Acquires), stamps the borrow,
// tells Trace and arms leak detection. The first hand-out of a connection also ends a
// dead-on-arrival streak: a connection the creator opened was good enough to use.
func (p *Pool) handedOut(e *entry, now int64, dl *deadline) {
	n := e.handouts.Add(1)
	if n == 1 && p.deadOnArrival.Load() != 0 {
		p.deadOnArrival.Store(0)
	}
	if n&sampleMask == 0 {
		p.sampledHandout(e) // under contention, one borrow in sixteen is timed (overload.go)
	}
	e.borrowedAt = now
	if ev := p.cfg.Trace; ev != nil {
		p.noteAcquired(ev, e, dl)
	}
	if p.cfg.LeakDetectionThreshold > 0 {
		e.leak = p.watchLeak(e)
	}
}

// release takes back a connection from its borrower: for conn.Close of a borrow from Connect
// (checkin nil), and for database/sql's check-in before it parks the connection, conn.IsValid
// (checkin: that conn). It reports whether database/sql may park the connection.
func (p *Pool) release(e *entry, checkin *conn) (lent bool) {
	// 1. The borrow ended.
	if e.tc != nil {
		p.untenant(e) // fair waiting between tenants (tenant.go)
	}
	if ev := p.cfg.Trace; ev != nil {
		p.noteReleased(ev, e)
	}
	if e.sampledAt != 0 {
		p.sampledRelease(e) // a timed borrow feeds the overload estimate (overload.go)
	}
	// 2. Clean it for the next borrower (clean). One that cannot be reused is closed; on a
	//    check-in it is marked instead, and the Close database/sql sends next closes it.
	now := p.now()
	if reason := p.clean(e, now); reason != "" {
		if checkin != nil {
			e.evict.Store(true)
			e.discard = reason
			return false
		}
		p.closeEntry(e, reason)
		return false
	}
	// 3. Stamp the return: IdleTimeout and AliveBypassWindow count from it.
	e.lastReturned = now
	e.lastAlive = now
	// 4. Above MaxConns after SetMaxConns lowered it: close it.
	if p.retireExcess(e) {
		return false
	}
	// 5. Park it: on a check-in in database/sql's idle list, unless the pool needs it (lend);
	//    otherwise on the idle stack, or to a waiter (park).
	if checkin != nil {
		if p.overLimit() { // the adaptive limit sets it aside: the Close database/sql sends parks it
			checkin.routed = true
			return false
		}
		return p.lend(checkin)
	}
	p.park(e)
	return false
}

// park makes e, which the caller owns and has cleaned, idle on the stack or hands it to a
// waiter (store.put); it closes e when the pool closed.
func (p *Pool) park(e *entry) {
	if e.tc != nil {
		p.untenant(e)
	}
	if p.overLimit() && p.store.bench(e) { // above the adaptive limit (overload.go)
		return
	}
	if !p.store.put(e) {
		p.closeEntry(e, ClosePoolClosed)
		return
	}
	p.trimAfterPut()
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
	// probes counts the liveness probes this acquire ran (Trace.AcquireEnded).
	probes int
	// slow is set once the acquire had to wait (or was suspended) or met an unfit connection:
	// its end is told to Trace.AcquireEnded.
	slow bool
	// shed bounds the wait while the pool is congested (overload.go); nil: not armed.
	shed *time.Timer
	// tc is the acquire's tenant class (tenant.go); nil without tenants.
	tc *tenantClass
}

// shedTimer arms the congestion bound: after, counted from the start of the wait.
func (d *deadline) shedTimer(p *Pool, after time.Duration) <-chan time.Time {
	left := max(time.Duration(d.start+int64(after)-p.nanotime()), 0)
	if d.shed != nil {
		d.shed.Reset(left)
		return d.shed.C
	}
	if t, ok := timerPool.Get().(*time.Timer); ok {
		t.Reset(left)
		d.shed = t
	} else {
		d.shed = time.NewTimer(left)
	}
	return d.shed.C
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
	if d.shed != nil {
		d.shed.Stop()
		timerPool.Put(d.shed)
		d.shed = nil
	}
}

// dropUnfit closes the connection the acquire found unfit, if any.
func (p *Pool) dropUnfit(dl *deadline) {
	if e := dl.unfit; e != nil {
		dl.unfit = nil
		p.closeEntry(e, dl.unfitReason)
	}
}

// wait queues the caller until a connection is pushed for it, the deadline passes, the ctx
// ends or the pool closes.
func (p *Pool) wait(ctx context.Context, dl *deadline) (*entry, error) {
	s := &p.store
	w := waiterPool.Get().(*waiter)
	w.barged, w.tc = false, dl.tc
	// 1. Count as waiting, from before the look at the stack below until this function
	//    returns, so that conn.IsValid routes every return meanwhile to the pool instead of
	//    parking it in database/sql (lend.go).
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	w.since = dl.begin(p) // before the lock: the exact clock is a VDSO call
	// 2. Under the lock, look at the stack once more; a closed or unavailable pool ends here.
	s.mu.Lock()
	if e := s.popForLocked(dl.tc); e != nil {
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
	if err := p.loginErr(); err != nil { // a refused login (login.go)
		s.mu.Unlock()
		waiterPool.Put(w)
		return nil, err
	}
	// 3. Queue by arrival (MaxWaiters bounds the queue), or go back to the place kept. Under
	//    overload (overload.go) a waiter that cannot finish before its deadline fails here, and
	//    one that queues while the pool is congested waits at most its shed bound.
	var shedC <-chan time.Time
	if p.ovl.on && p.congestedLocked(w.since) {
		if err := p.cannotFinish(ctx); err != nil {
			s.mu.Unlock()
			waiterPool.Put(w)
			return nil, err
		}
		if s.sheddableLocked(dl.tc, 1) { // with tenants, only the largest demand (tenant.go)
			shedC = dl.shedTimer(p, time.Duration(s.shedNs))
		}
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
	// 4. Queued in place: close the unfit connection (its replacement may come now), wake
	//    the creator, bring back connections parked in database/sql (and those the adaptive
	//    limit set aside, when it let go: overload.go).
	p.dropUnfit(dl)
	p.releaseBench()
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

	// 5. Wait for a connection handed over, or a wake-up to look at the stack again (a
	//    barging goroutine may have taken it: back to the place by arrival), until the
	//    deadline or ctx ends the wait (giveUp).
	dl.begin(p)
	timeout := dl.timeout(p)
	for {
		select {
		case e := <-w.ch:
			if e == shedSignal {
				waiterPool.Put(w)
				return nil, p.shedError(dl.start)
			}
			if e != nil {
				waiterPool.Put(w)
				if p.ovl.on {
					if err := p.cannotFinish(ctx); err != nil { // congested only
						p.park(e) // to the next waiter: this one would lose it in the statement
						return nil, err
					}
					p.nearMiss(ctx, dl.start)
				}
				return e, nil
			}
			s.mu.Lock()
			if e := s.popForLocked(dl.tc); e != nil {
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
			if err := p.loginErr(); err != nil { // a refused login (login.go)
				s.mu.Unlock()
				waiterPool.Put(w)
				return nil, err
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
		case <-shedC:
			// Congestion ended, connections stopped coming back, or another tenant has the
			// larger demand now (tenant.go): wait on.
			if !p.shedNow() || (dl.tc != nil && !p.stillSheddable(dl.tc)) {
				shedC = nil
				continue
			}
			if err := p.giveUp(ctx, w, dl, false); err != errShed {
				return nil, err
			}
			return nil, p.shedError(dl.start)
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
		if e := <-w.ch; e == shedSignal {
			// shed by a put meanwhile: nothing to pass on
		} else if e != nil {
			if !s.put(e) {
				p.closeEntry(e, ClosePoolClosed)
			}
		} else {
			s.mu.Lock()
			if len(s.idle) > 0 && s.ten != nil {
				s.serveIdleLocked() // tenants (tenant.go): hand over directly, to the fair choice
			} else if len(s.idle) > 0 {
				s.wakeLocked()
			}
			s.mu.Unlock()
		}
	}
	waiterPool.Put(w)
	if p.closed.Load() {
		return ErrClosed
	}
	if dl.shed != nil && !byCtx && !dl.expired(p) {
		return errShed // the shed timer, not AcquireTimeout, ended the wait
	}
	return p.timeoutError(ctx, dl, byCtx)
}

// errShed is giveUp's answer when the congestion bound (overload.go) ended the wait.
var errShed = errors.New("sqlpool: shed")

func (p *Pool) timeoutError(ctx context.Context, dl *deadline, byCtx bool) error {
	if byCtx && ctx.Err() != context.DeadlineExceeded {
		return fmt.Errorf("sqlpool: %s: acquire abandoned: %w", p.cfg.Name, ctx.Err())
	}
	p.timeouts.Add(1)
	lastErr := p.lastError()
	if lastErr == nil && dl.ticket != 0 && dl.probes == 0 {
		p.noteLoss() // lost in the queue of a busy pool, not a failing one's: an outage is not overload
	}
	waited := time.Duration(p.nanotime() - dl.begin(p))
	if ev := p.cfg.Trace; ev != nil && ev.AcquireTimedOut != nil {
		ev.AcquireTimedOut(p.cfg.Name, waited)
	}
	st := p.Stats()
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
		addr:        p.outage.addr,
		dialing:     p.dialing(),
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
	if !e.sess.Clean() {
		p.releasePlans.Add(1)
		if err := p.runPlanObserved(e); err != nil {
			p.cfg.Logger.Info("sqlpool: connection discarded on release", "pool", p.cfg.Name, "conn", e.id, "reason", err)
			return CloseResetFailed
		}
	}
	return ""
}
