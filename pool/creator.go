package pool

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"
)

// creator is the pool's one dialling goroutine: borrowers never dial. It creates connections
// while the pool is below MaxConns and either below MinIdleConns idle or has more waiters than
// idle connections, and backs off (10 ms doubling, capped at 5 s, or at half of AcquireTimeout
// when that is shorter but not below 125 ms, so that a waiter sees another dial) after
// a failed dial, and likewise after a connection it opened failed its first probe before it was
// ever handed out (dials succeed but pings fail: without the backoff the acquire loop would
// dial, probe and close as fast as the server answers). While acquires wait, a backoff ends
// after at most waitingBackoff: the first connection after a database comes back is dialled
// within that of its return, and a database that stays down gets at most 1/waitingBackoff
// dials a second. A dial the server refused for good (ErrorClass.Login) waits longer and is
// not cut short by waiting acquires: see login.go.
func (p *Pool) creator() {
	defer p.wg.Done()
	backoff := time.Duration(0)
	grow := func() {
		backoff = min(max(backoff*2, 10*time.Millisecond), maxBackoffFor(p))
	}
	dialFailed := false
	loginWait := time.Duration(0) // after a refused login (login.go); 0 after a successful dial
	for {
		select {
		case <-p.createCh:
		case <-p.done:
			return
		}
		for p.shouldCreate() {
			if p.deadOnArrival.Load() > 0 {
				// Connections opened lately failed their first probe, and none has passed a
				// probe or been handed out since: dials succeed but the connections are no good.
				grow()
				plan, attrs := retryPlan(maxBackoffFor(p))
				p.noteConnectFailed(&connectError{addr: p.outage.addr, phase: phaseProbe, err: p.lastError()},
					plan, attrs...)
				if !p.backoffSleep(backoff) {
					return
				}
				if !p.shouldCreate() {
					break
				}
			} else if !dialFailed {
				backoff = 0
			}
			select {
			case <-p.redialCh: // this dial answers a Redial made before it
			default:
			}
			redials := p.redials.Load()
			dialStart := p.nanotime()
			p.outage.dialStart.Store(max(dialStart, 1))
			e, err := p.dial()
			p.outage.dialStart.Store(0)
			if err != nil {
				if p.closed.Load() {
					return
				}
				p.setLastError(err)
				if p.loginRefused(err) && p.redials.Load() != redials {
					// Redial was called while this dial, with the credentials of before, was
					// under way: dial again at once, and let acquires wait for that dial.
					select {
					case <-p.redialCh:
					default:
					}
					continue
				}
				if p.loginRefused(err) {
					loginWait = p.nextLoginWait(loginWait)
					p.loginFailed(err, loginWait)
					p.noteConnectFailed(p.connectError(err, false),
						fmt.Sprintf("dials again in %v (doubling up to LoginBackoffMax %v) or at once after Pool.Redial; correct the credentials or grants, then call Redial",
							loginWait, p.cfg.LoginBackoffMax), "retry_in", loginWait)
					if !p.loginWait(loginWait) {
						return
					}
					continue
				}
				if p.login.Load() != nil {
					p.login.Store(nil) // not a refused login: acquires wait again
				}
				dialFailed = true
				grow()
				plan, attrs := retryPlan(maxBackoffFor(p))
				p.noteConnectFailed(p.connectError(err, false), plan, attrs...)
				if !p.backoffSleep(backoff) {
					return
				}
				continue
			}
			if dialFailed {
				dialFailed = false
				backoff = 0
			}
			loginWait = 0
			if p.login.Load() != nil {
				p.login.Store(nil)
			}
			if p.closed.Load() {
				_ = e.conn.Close()
				return
			}
			if p.deadOnArrival.Load() == 0 {
				p.clearLastError() // else the pool is still failing: its connections are no good
				p.noteConnected()
			}
			p.register(e)
			if ev := p.cfg.Trace; ev != nil && ev.Created != nil {
				ev.Created(p.cfg.Name, time.Duration(p.nanotime()-dialStart))
			}
			p.cfg.Logger.Debug("sqlpool: connection opened", "pool", p.cfg.Name, "conn", e.id)
			if p.retireExcess(e) { // SetMaxConns lowered the limit during the dial
				continue
			}
			p.park(e)
		}
	}
}

// maxBackoffFor is the cap on the creator's backoff after a failed dial: 5 s, or half of
// AcquireTimeout when that is shorter, but not below minDerivedTimeout.
func maxBackoffFor(p *Pool) time.Duration {
	maxBackoff := 5 * time.Second
	if at := p.acquireTimeout(); at > 0 {
		maxBackoff = min(maxBackoff, max(at/2, minDerivedTimeout))
	}
	return maxBackoff
}

// waitingBackoff caps the creator's backoff while acquires wait for a connection.
const waitingBackoff = 100 * time.Millisecond

// backoffSleep waits d, in steps of waitingBackoff, and stops after a step that ends with
// acquires waiting; it reports false when the pool closed.
func (p *Pool) backoffSleep(d time.Duration) bool {
	for d > 0 {
		step := min(d, waitingBackoff)
		if !p.sleep(step) {
			return false
		}
		d -= step
		if _, waiting := p.store.counts(); waiting > 0 {
			return true
		}
	}
	return true
}

// sleep waits d, or until the pool closes; it reports false when the pool closed.
func (p *Pool) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.done:
		return false
	}
}

func (p *Pool) shouldCreate() bool {
	if p.closed.Load() || p.reg.open() >= p.maxConns() {
		return false
	}
	_, waiting := p.store.counts()
	idle := p.reg.idle() // parked in a DB too: MinIdleConns counts them
	return idle < p.minIdleConns() || waiting > idle
}

// dial opens one physical connection, runs Hooks.AfterConnect and records the session baseline,
// all within ConnectTimeout.
func (p *Pool) dial() (*entry, error) {
	ctx := p.dialCtx
	if p.cfg.ConnectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.ConnectTimeout)
		defer cancel()
	}
	dc, host, err := p.connect(ctx)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && p.dialCtx.Err() == nil {
			err = fmt.Errorf("connect timed out after ConnectTimeout %v: %w", p.cfg.ConnectTimeout, err)
		}
		return nil, p.connectError(err, false)
	}
	if dc == nil {
		return nil, p.connectError(errors.New("the connector returned a nil connection and no error"), false)
	}
	e := &entry{conn: dc, host: host}
	e.stmts.max = p.cfg.StatementCacheSize
	e.validator, _ = dc.(driver.Validator)
	e.resetter, _ = dc.(driver.SessionResetter)
	if p.cfg.Hooks.AfterConnect != nil {
		if err := p.runAfterConnect(ctx, e); err != nil {
			_ = dc.Close()
			return nil, p.connectError(err, true)
		}
	}
	if err := p.initSession(ctx, e, dc); err != nil {
		_ = dc.Close()
		return nil, p.connectError(fmt.Errorf("recording the session baseline: %w", err), true)
	}
	e.adoptTracker()
	now := p.nanotime()
	e.createdAt = now
	e.expiresAt, e.keepaliveGap = p.lifetime(now)
	e.lastReturned = now
	e.lastAlive = now
	e.state.Store(stateReserved)
	return e, nil
}

// observe is called with every error a driver call returned while e was in use. A fatal error
// marks e so that it is closed on release; one that says the server went away also makes every
// idle connection last known alive before now be probed on its next acquire.
func (p *Pool) observe(e *entry, err error) {
	p.noteInterrupted(e, err)
	fatal, reason, gone := p.classify(e, err)
	if !fatal {
		return
	}
	if e.fatal == nil {
		e.fatal = fmt.Errorf("%s: %w", reason, err)
	}
	if gone {
		p.serverGone(e, err)
	}
}

func (p *Pool) classify(e *entry, err error) (fatal bool, reason string, gone bool) {
	c := p.dialect.Classify(err, ErrorContext{ReadOnlyTx: e.sess != nil && e.sess.ReadOnlyTx(), Conn: e.conn})
	return c.Fatal, c.Reason, c.ServerGone
}
