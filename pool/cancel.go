package pool

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Server-side cancel.
//
// go-sql-driver/mysql (v1.10, connection.go: watchCancel, startWatcher, cancel, cleanup) stops
// waiting for a statement whose context ends by closing the connection's socket: the call
// returns the context's error at once, the connection is dead from then on (IsValid false,
// every later call driver.ErrBadConn), and nothing is sent to the server. The server never
// learns that the client gave up: a SELECT SLEEP(10) keeps its thread for the ten seconds, a
// long join runs to its end. Without more, the pool then dials a replacement for the dead
// connection, so under a storm of timeouts the server runs more statements than MaxConns.
// Such a connection cannot be kept: its socket is closed before the pool sees the error.
//
// So when a driver call on a pooled connection fails with its context's error (the statement
// may still be running on the server), the connection is marked interrupted; when the pool
// closes it, it stops the statement on the server with a ServerCancel (KILL QUERY <id> on
// MySQL and MariaDB, the id recorded at dial time) sent over a side connection of its own, and
// keeps counting the connection (in Stats.Total and Active, as Cancelling) until the server
// reports that the session is gone, or Config.ServerCancelTimeout has passed. The first
// MaxConns/8 such connections (the overshoot budget) are counted beside MaxConns: the creator
// dials their replacements at once, in parallel with the KILL, so that a storm of deadlines
// (an overload) does not shrink the pool to its dial rate. Beyond the budget a cancelled
// connection counts against MaxConns, and the creator dials no replacement until its session
// is gone. So MaxConns + MaxConns/8 bounds the server threads that run the pool's statements,
// not just its sockets (plus one: the side connection, one per host, opened at the first
// cancel and kept until Close; it is not counted), and a pool below 8 connections keeps
// MaxConns as the bound. Each step
// of a cancel (opening the side connection, the KILL, one poll) is bounded by the shorter of
// ConnectTimeout or ValidationTimeout and ServerCancelTimeout, and each host has its own cancel
// goroutine, so a host that stopped answering holds its cancelled connections' slots for at
// most about ServerCancelTimeout and delays no other host's cancels.
//
// The caller is not delayed: it gets its error when the driver returns, as without the pool.
// A connection whose driver returned the context's error but stayed valid (the context ended
// before the driver sent anything) is kept, and its mark is harmless: it matters only when the
// connection is closed, and then costs one KILL of a session that is already ending.

// ServerCancel is implemented by a Dialect that can stop a statement on the server
// (docs/operations.md). Cancel and Running run on the pool's cancel goroutine, one call at a time;
// side is the pool's own connection to the same server.
type ServerCancel interface {
	// NewCancellableSession is NewSession that also returns the server's session id; 0: not
	// cancellable.
	NewCancellableSession(ctx context.Context, dc driver.Conn) (t SessionTracker, id int64, err error)
	// Cancel asks the server to stop the statement running in session id.
	Cancel(ctx context.Context, side driver.Conn, id int64) error
	// Running returns those of ids whose sessions still exist on the server.
	Running(ctx context.Context, side driver.Conn, ids []int64) (map[int64]bool, error)
}

// CancelOutcome says how a server-side cancel ended (a metric label); see docs/metrics.md.
type CancelOutcome string

// The outcomes of a server-side cancel.
const (
	CancelEnded      CancelOutcome = "ended"       // the session was gone within ServerCancelTimeout
	CancelTimedOut   CancelOutcome = "timeout"     // still on the server after ServerCancelTimeout
	CancelFailed     CancelOutcome = "failed"      // no side connection, or the server could not be asked
	CancelPoolClosed CancelOutcome = "pool_closed" // the pool closed first
)

// cancelPoll is how often a cancel goroutine asks the server whether cancelled sessions are
// gone, while any is pending.
const cancelPoll = 5 * time.Millisecond

// canceller is a pool's server-side cancel state: one goroutine per host (one in all without
// a HostConnector), started at the host's first cancel and stopped by Close, so that a host
// that stopped answering delays only its own cancels.
type canceller struct {
	impl ServerCancel

	mu      sync.Mutex
	hosts   map[string]*hostCanceller
	stopped bool           // Close began: no more jobs, the goroutines finish
	wg      sync.WaitGroup // the goroutines; Add only under mu while !stopped

	// pending counts the jobs not yet finished (queued or in progress), for Stats; detached
	// those of them counted beside MaxConns (the overshoot budget), under mu.
	pending  atomic.Int32
	detached int
}

// cancelOvershoot is the overshoot budget's divisor: MaxConns/cancelOvershoot cancelled
// connections whose sessions may still run count beside MaxConns.
const cancelOvershoot = 8

// hostCanceller is the cancel goroutine of one host.
type hostCanceller struct {
	host  string
	queue []*cancelJob  // handed over by closeEntry, not yet seen by the goroutine; under canceller.mu
	wake  chan struct{} // capacity 1
}

type cancelJob struct {
	e        *entry
	reason   CloseReason
	closeErr error
	queued   time.Time
	deadline time.Time
	detached bool // closed at once, counted in the overshoot budget until it finishes
}

// initSession starts e's session tracker and, with server-side cancel on, records the session
// id (ServerCancel.NewCancellableSession).
func (p *Pool) initSession(ctx context.Context, e *entry, dc driver.Conn) error {
	var t SessionTracker
	var err error
	if p.cancel == nil {
		t, err = p.dialect.NewSession(ctx, dc)
	} else {
		t, e.sessionID, err = p.cancel.impl.NewCancellableSession(ctx, dc)
	}
	if err != nil {
		return err
	}
	e.sess = orNop(t)
	return p.initLimiter(ctx, e, dc) // StatementDeadline (deadline.go)
}

// noteInterrupted marks e when err says its call's context ended: the statement may still be
// running on the server, so closing e must also stop it there.
func (p *Pool) noteInterrupted(e *entry, err error) {
	if p.ovl.on && p.statementTimedOut(err) {
		p.noteStmtLoss()
	}
	if p.cancel != nil && e.sessionID != 0 &&
		(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		e.interrupted.Store(true)
	}
}

// serverCancel takes over the end of closeEntry for an interrupted connection: it reports
// true when e will be cancelled on the server and counted until its session is gone (in the
// overshoot budget, closeDone at once; otherwise the cancel goroutine calls it then), false
// when closeEntry must finish as usual.
func (p *Pool) serverCancel(e *entry, reason CloseReason, closeErr error) bool {
	c := p.cancel
	if c == nil || !e.interrupted.Load() || e.sessionID == 0 {
		return false
	}
	now := time.Now()
	j := &cancelJob{e: e, reason: reason, closeErr: closeErr, queued: now,
		deadline: now.Add(p.cfg.ServerCancelTimeout)}
	host := hostName(e)
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return false
	}
	hc := c.hosts[host]
	if hc == nil {
		if c.hosts == nil {
			c.hosts = map[string]*hostCanceller{}
		}
		hc = &hostCanceller{host: host, wake: make(chan struct{}, 1)}
		c.hosts[host] = hc
		c.wg.Add(1)
		go p.cancelLoop(hc)
	}
	c.pending.Add(1)
	if c.detached < p.maxConns()/cancelOvershoot {
		c.detached++
		j.detached = true
	}
	hc.queue = append(hc.queue, j)
	c.mu.Unlock()
	select {
	case hc.wake <- struct{}{}:
	default:
	}
	if j.detached {
		p.closeDone(e, reason, closeErr) // the creator dials the replacement now
	}
	return true
}

// stopCanceller is called by Close after the pool stopped dialling: every cancel goroutine
// releases its pending connections (CancelPoolClosed) and returns.
func (p *Pool) stopCanceller() {
	c := p.cancel
	if c == nil {
		return
	}
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.wg.Wait()
}

// cancelLoop is the cancel goroutine of one host: it sends the KILLs, polls the server for
// the sessions' end and gives the slots back.
func (p *Pool) cancelLoop(hc *hostCanceller) {
	c := p.cancel
	defer c.wg.Done()
	var side driver.Conn
	defer func() {
		if side != nil {
			_ = side.Close()
		}
	}()
	var active []*cancelJob
	poll := time.NewTimer(time.Hour)
	poll.Stop()
	defer poll.Stop()
	for {
		var closing bool
		if len(active) == 0 {
			select {
			case <-hc.wake:
			case <-p.done:
				closing = true
			}
		} else {
			poll.Reset(cancelPoll)
			select {
			case <-hc.wake:
				poll.Stop()
			case <-poll.C:
			case <-p.done:
				closing = true
			}
		}
		c.mu.Lock()
		jobs := hc.queue
		hc.queue = nil
		if closing {
			c.stopped = true // a closeEntry from now on finishes by itself
		}
		c.mu.Unlock()
		for _, j := range jobs {
			if closing {
				p.finishCancel(j, CancelPoolClosed)
				continue
			}
			if err := p.sendCancel(&side, hc.host, j); err != nil {
				p.cfg.Logger.Warn("sqlpool: cannot stop a cancelled statement on the server; its connection no longer counts against MaxConns",
					"pool", p.cfg.Name, "host", hc.host, "conn", j.e.id, "session", j.e.sessionID, "error", err)
				p.finishCancel(j, CancelFailed)
				continue
			}
			active = append(active, j)
		}
		if closing {
			for _, j := range active {
				p.finishCancel(j, CancelPoolClosed)
			}
			return
		}
		active = p.pollCancelled(&side, hc.host, active)
	}
}

// hostName is the key of e's host in the cancel goroutines ("" without a HostConnector).
func hostName(e *entry) string {
	if e.host == nil {
		return ""
	}
	return e.host.name
}

// cancelBound is the longest one step of a cancel (opening the side connection, one KILL,
// one poll) may take: the shorter of limit and ServerCancelTimeout, so that a host that
// stopped answering holds a slot no longer than ServerCancelTimeout.
func (p *Pool) cancelBound(limit time.Duration) time.Duration {
	if limit <= 0 {
		return p.cfg.ServerCancelTimeout
	}
	return min(limit, p.cfg.ServerCancelTimeout)
}

// openSide opens the side connection to host.
func (p *Pool) openSide(host string) (driver.Conn, error) {
	ctx, cancel := context.WithTimeout(p.dialCtx, p.cancelBound(p.cfg.ConnectTimeout))
	defer cancel()
	var dc driver.Conn
	var err error
	if host == "" {
		dc, err = p.connector.Connect(ctx)
	} else if hc := p.hostConnector(); hc != nil {
		dc, err = hc.ConnectTo(ctx, host)
	} else {
		return nil, fmt.Errorf("the connector (%T) cannot open a connection to host %s: it is not a pool.HostConnector", p.connector, host)
	}
	if err != nil {
		return nil, fmt.Errorf("opening the side connection: %w", err)
	}
	if dc == nil {
		return nil, errors.New("opening the side connection: the connector returned a nil connection and no error")
	}
	return dc, nil
}

// sideCall runs f on the side connection to host (opened if need be) within
// ValidationTimeout; after an error it closes the side connection, and when the error was
// fatal for it (a side connection the server dropped while idle) tries once more on a new one.
func (p *Pool) sideCall(side *driver.Conn, host string, f func(ctx context.Context, side driver.Conn) error) error {
	for attempt := 0; ; attempt++ {
		if *side == nil {
			dc, err := p.openSide(host)
			if err != nil {
				return err
			}
			*side = dc
		}
		ctx, cancel := context.WithTimeout(p.dialCtx, p.cancelBound(p.cfg.ValidationTimeout))
		err := f(ctx, *side)
		cancel()
		if err == nil {
			return nil
		}
		fatal := errors.Is(err, driver.ErrBadConn) || errors.Is(err, context.DeadlineExceeded) ||
			p.dialect.Classify(err, ErrorContext{Conn: *side}).Fatal
		if fatal {
			_ = (*side).Close()
			*side = nil
		}
		if !fatal || attempt > 0 || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
}

// sendCancel stops j's statement on the server. It fails only when there is no usable side
// connection: an ordinary error from the KILL itself (such as "unknown thread": the session
// ended first) leaves the decision to the poll.
func (p *Pool) sendCancel(side *driver.Conn, host string, j *cancelJob) error {
	err := p.sideCall(side, host, func(ctx context.Context, dc driver.Conn) error {
		return p.cancel.impl.Cancel(ctx, dc, j.e.sessionID)
	})
	if err != nil && *side == nil {
		return err
	}
	return nil
}

// pollCancelled asks the server which of active's sessions still exist, finishes those that
// ended or timed out, and returns the rest.
func (p *Pool) pollCancelled(side *driver.Conn, host string, active []*cancelJob) []*cancelJob {
	ids := make([]int64, len(active))
	for i, j := range active {
		ids[i] = j.e.sessionID
	}
	var running map[int64]bool
	err := p.sideCall(side, host, func(ctx context.Context, dc driver.Conn) error {
		var err error
		running, err = p.cancel.impl.Running(ctx, dc, ids)
		return err
	})
	now := time.Now()
	rest := active[:0]
	for _, j := range active {
		switch {
		case err == nil && !running[j.e.sessionID]:
			p.finishCancel(j, CancelEnded)
		case now.After(j.deadline):
			if err != nil {
				p.cfg.Logger.Warn("sqlpool: cannot see whether a cancelled statement ended on the server",
					"pool", p.cfg.Name, "host", host, "conn", j.e.id, "session", j.e.sessionID, "error", err)
			}
			p.finishCancel(j, CancelTimedOut)
		default:
			rest = append(rest, j)
		}
	}
	clear(active[len(rest):])
	return rest
}

// finishCancel gives j's slot (or its place in the overshoot budget) back and reports the
// outcome.
func (p *Pool) finishCancel(j *cancelJob, outcome CancelOutcome) {
	c := p.cancel
	if j.detached {
		c.mu.Lock()
		c.detached--
		c.pending.Add(-1)
		c.mu.Unlock()
	} else {
		c.pending.Add(-1)
	}
	took := time.Since(j.queued)
	if ce := p.cfg.Trace; ce != nil && ce.ServerCancelled != nil {
		ce.ServerCancelled(p.cfg.Name, outcome, took)
	}
	p.cfg.Logger.Debug("sqlpool: cancelled statement stopped on the server", "pool", p.cfg.Name,
		"conn", j.e.id, "session", j.e.sessionID, "outcome", string(outcome), "took", took)
	if !j.detached {
		p.closeDone(j.e, j.reason, j.closeErr)
	}
}

// cancelling counts the closed connections still counted while their sessions end.
func (p *Pool) cancelling() int {
	if p.cancel == nil {
		return 0
	}
	return int(p.cancel.pending.Load())
}
