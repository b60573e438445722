package pool

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// This file is what the pool says while it cannot open connections (an outage): one WARN when
// the first attempt fails, with the server's address, the phase that failed, the error and
// what the creator does next; then at most one summary WARN per outageLogInterval with the
// attempts made since, and one at once when attempts start failing in another phase; and one
// INFO when a connection opens again, with the downtime. Stats.DownSince reports the same
// state to metrics (sqlpool_up) and readiness checks; Trace.ConnectFailed counts the attempts.

// outageLogInterval is the least time between two summary WARN lines of one outage, unless
// Config.outageLogInterval says otherwise (tests).
const outageLogInterval = 30 * time.Second

// The phases of a connection attempt, for connectError.phase, Trace.ConnectFailed and
// sqlpool_connect_errors_total.
const (
	phaseDial      = "dial"           // name resolution and the TCP or socket connect
	phaseTLS       = "tls"            // the TLS handshake or certificate check
	phaseHandshake = "handshake"      // the database protocol's greeting and handshake
	phaseAuth      = "authentication" // the server refused the login (Dialect: ErrorClass.Login)
	phaseInit      = "init"           // Hooks.AfterConnect or the session baseline query
	phaseTimeout   = "timeout"        // ConnectTimeout passed before the driver answered (dial or handshake)
	phaseProbe     = "probe"          // connections opened but failed their first liveness probe
)

// connectError is the error of a failed attempt to open a connection: the server's address
// (empty when neither the connector, the dialect nor Config.Addr names it), the phase that
// failed and the driver's error, which it unwraps to. The pool's name is left to the error
// that carries it (AcquireTimeoutError, New's error).
type connectError struct {
	addr  string
	phase string
	err   error
}

func (e *connectError) Error() string {
	where := ""
	if e.addr != "" {
		where = " to " + e.addr
	}
	return fmt.Sprintf("cannot open a connection%s (%s): %v", where, phaseText[e.phase], e.err)
}

func (e *connectError) Unwrap() error { return e.err }

var phaseText = map[string]string{
	phaseDial:      "dial failed",
	phaseTLS:       "TLS handshake failed",
	phaseHandshake: "protocol handshake failed",
	phaseAuth:      "login refused",
	phaseInit:      "connection setup failed",
	phaseTimeout:   "no answer within ConnectTimeout",
	phaseProbe:     "new connections fail their first probe",
}

// addrDialect is implemented by a Dialect that can read the server's address from its
// driver's connector (mysqldialect reads go-sql-driver's Config.Addr). New asks it once.
type addrDialect interface {
	ConnectorAddr(c driver.Connector) string
}

// downSince is when attempts to open a connection began failing; zero while they succeed.
func (p *Pool) downSince() time.Time {
	o := &p.outage
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down {
		return o.sinceWall
	}
	return time.Time{}
}

// outageState is the pool's outage bookkeeping. The creator goroutine writes it; Stats reads
// it under mu.
type outageState struct {
	addr string // resolved once by New (resolveAddr)
	// dialStart is the pool time the creator's dial in progress began; 0: none.
	dialStart atomic.Int64

	mu        sync.Mutex
	down      bool
	since     int64 // pool time (nanotime) of the first failure
	sinceWall time.Time
	// attempts is the failed attempts since the outage began; logged the count at the last
	// summary (or the first WARN).
	attempts, logged uint64
	lastLog          int64 // pool time of the last WARN
	// phases are the phases logged in this outage: a new one is logged at once (at most one
	// WARN per phase per outage besides the summaries).
	phases map[string]bool
}

// resolveAddr finds the server's address once: Config.Addr, else the credentials connector's
// host, else the dialect's reading of the connector.
func (p *Pool) resolveAddr() {
	o := &p.outage
	switch {
	case p.cfg.Addr != "":
		o.addr = p.cfg.Addr
	case p.hostConnector() != nil:
		// a multi-host connector names the host in its own errors
	default:
		if cc, ok := p.connector.(*credConnector); ok {
			o.addr = cc.host
		} else if ad, ok := p.dialect.(addrDialect); ok {
			o.addr = safeAddr(ad, p.connector)
		}
	}
}

func safeAddr(ad addrDialect, c driver.Connector) (addr string) {
	defer func() {
		if recover() != nil {
			addr = ""
		}
	}()
	return ad.ConnectorAddr(c)
}

// connectError wraps a failed dial's err with the address and phase; init is true for an
// error of AfterConnect or the session baseline.
func (p *Pool) connectError(err error, init bool) *connectError {
	var ce *connectError
	if errors.As(err, &ce) {
		return ce
	}
	return &connectError{addr: p.outage.addr, phase: p.connectPhase(err, init), err: err}
}

// connectPhase tells which phase err, from a dial, failed in.
func (p *Pool) connectPhase(err error, init bool) string {
	if init {
		return phaseInit
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return phaseTimeout
	}
	if p.dialect.Classify(err, ErrorContext{}).Login {
		return phaseAuth
	}
	var (
		rh   tls.RecordHeaderError
		cv   *tls.CertificateVerificationError
		ua   x509.UnknownAuthorityError
		hn   x509.HostnameError
		ci   x509.CertificateInvalidError
		al   tls.AlertError
		op   *net.OpError
		dns  *net.DNSError
		nerr net.Error
	)
	switch {
	case errors.As(err, &rh), errors.As(err, &cv), errors.As(err, &ua), errors.As(err, &hn),
		errors.As(err, &ci), errors.As(err, &al), strings.Contains(err.Error(), "tls:"),
		strings.Contains(err.Error(), "TLS"):
		return phaseTLS
	case errors.As(err, &dns):
		return phaseDial
	case errors.As(err, &op) && op.Op == "dial":
		return phaseDial
	case errors.As(err, &nerr) && nerr.Timeout():
		return phaseTimeout
	}
	return phaseHandshake
}

// outageInterval is the summary interval: outageLogInterval, or Config.outageLogInterval.
func (p *Pool) outageInterval() time.Duration {
	switch d := p.cfg.outageLogInterval; {
	case d == 0:
		return outageLogInterval
	case d < 0:
		return -1
	default:
		return d
	}
}

// noteConnectFailed records a failed attempt and logs as the outage's rules say; next says
// what the creator does now, in words, and is logged with the first WARN and the summaries.
func (p *Pool) noteConnectFailed(ce *connectError, next string, nextAttrs ...any) {
	o := &p.outage
	if t := p.cfg.Trace; t != nil && t.ConnectFailed != nil {
		t.ConnectFailed(p.cfg.Name, ce.phase, ce)
	}
	now := p.nanotime()
	o.mu.Lock()
	first := !o.down
	if first {
		o.down = true
		o.since = now
		o.sinceWall = time.Now()
		o.attempts = 0
		o.logged = 0
		o.lastLog = now
		clear(o.phases)
	}
	if o.phases == nil {
		o.phases = make(map[string]bool, 4)
	}
	newPhase := !first && !o.phases[ce.phase]
	o.phases[ce.phase] = true
	o.attempts++
	summary := false
	var since, count, total uint64
	var downFor time.Duration
	if !first {
		if iv := p.outageInterval(); newPhase || (iv > 0 && now-o.lastLog >= int64(iv)) {
			summary = true
			count = o.attempts - o.logged
			total = o.attempts
			since = uint64(now - o.lastLog)
			downFor = time.Duration(now - o.since)
			o.lastLog = now
			o.logged = o.attempts
		}
	} else {
		o.logged = 1
	}
	o.mu.Unlock()
	if first {
		attrs := []any{"pool", p.cfg.Name, "addr", ce.addr, "phase", ce.phase, "error", ce.err, "next", next}
		attrs = append(attrs, nextAttrs...)
		if iv := p.outageInterval(); iv > 0 {
			attrs = append(attrs, "summary_every", iv)
		}
		p.cfg.Logger.Warn("sqlpool: cannot open a connection to the database; the pool is down until a connection opens", attrs...)
		return
	}
	if summary {
		attrs := []any{"pool", p.cfg.Name, "addr", ce.addr, "down_for", downFor.Round(time.Millisecond),
			"failed_attempts", count, "over", time.Duration(since).Round(time.Millisecond),
			"failed_attempts_total", total, "last_phase", ce.phase, "last_error", ce.err, "next", next}
		attrs = append(attrs, nextAttrs...)
		msg := "sqlpool: the database is still unreachable"
		if newPhase {
			msg = "sqlpool: the database is still unreachable, and attempts now fail in another phase"
		}
		p.cfg.Logger.Warn(msg, attrs...)
	}
}

// noteConnected ends an outage after a connection opened, with one INFO line.
func (p *Pool) noteConnected() {
	o := &p.outage
	o.mu.Lock()
	if !o.down {
		o.mu.Unlock()
		return
	}
	downFor := time.Duration(p.nanotime() - o.since)
	attempts := o.attempts
	o.down = false
	o.mu.Unlock()
	p.cfg.Logger.Info("sqlpool: connected to the database again; the pool is up",
		"pool", p.cfg.Name, "addr", o.addr, "downtime", downFor.Round(time.Millisecond), "failed_attempts", attempts)
}

// retryPlan describes in words, for the log, how the creator retries after an ordinary failed
// dial: every waitingBackoff while acquires wait, else after a doubling backoff up to maxBackoff.
func retryPlan(maxBackoff time.Duration) (string, []any) {
	return fmt.Sprintf("dials again every %v while callers wait for a connection, otherwise after a backoff doubling from 10ms to %v", waitingBackoff, maxBackoff),
		[]any{"retry_while_waiting", waitingBackoff, "retry_backoff_max", maxBackoff}
}

// dialing returns how long the creator's dial in progress has run, or 0.
func (p *Pool) dialing() time.Duration {
	if st := p.outage.dialStart.Load(); st != 0 {
		return time.Duration(max(p.nanotime()-st, 1))
	}
	return 0
}
