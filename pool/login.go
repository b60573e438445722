package pool

import (
	"fmt"
	"time"
)

// This file is the pool's answer to a dial the server refused for good (ErrorClass.Login: wrong
// password, no grant, unknown database, blocked host): dialling again at once would only add
// failed logins at the server (lockouts, alerts, fail2ban). The creator waits 1 s, then 2 s, 4 s
// … up to LoginBackoffMax between such dials; until its next dial is due, an acquire that finds
// no idle connection fails at once with the login error instead of waiting for its deadline.
// A successful dial ends it; Redial makes the creator dial at once.

// loginState is the refused login the pool is in: the error, and the pool time (nanotime) of
// the creator's next dial.
type loginState struct {
	err     error
	retryAt int64
	wait    time.Duration
}

// Redial makes a pool whose login was refused (ErrorClass.Login) dial now, not after its
// backoff: call it once credentials or grants are fixed.
func (p *Pool) Redial() {
	if p.closed.Load() || p.login.Load() == nil {
		return
	}
	p.redials.Add(1)
	p.login.Store(nil)
	select {
	case p.redialCh <- struct{}{}:
	default:
	}
	p.signalCreator()
}

// loginRefused reports whether err, from a dial, is a refused login to back off from.
func (p *Pool) loginRefused(err error) bool {
	return p.cfg.LoginBackoffMax > 0 && p.dialect.Classify(err, ErrorContext{}).Login
}

// nextLoginWait is the creator's wait after one more refused login, prev the one before (0:
// none since the last successful dial).
func (p *Pool) nextLoginWait(prev time.Duration) time.Duration {
	return min(max(2*prev, time.Second), p.cfg.LoginBackoffMax)
}

// loginFailed records a refused login and the creator's wait before its next dial, and fails
// the acquires waiting (they would wait for that dial).
func (p *Pool) loginFailed(err error, wait time.Duration) {
	p.login.Store(&loginState{err: err, retryAt: p.nanotime() + durNanos(wait), wait: wait})
	s := &p.store
	s.mu.Lock()
	for s.head != nil {
		s.wakeLocked()
	}
	s.mu.Unlock()
}

// loginWait waits d after a refused login, or until Redial; it reports false when the pool
// closed.
func (p *Pool) loginWait(d time.Duration) bool {
	var c <-chan time.Time
	if after := p.cfg.testAfter; after != nil {
		c = after(d)
	} else {
		t := time.NewTimer(d)
		defer t.Stop()
		c = t.C
	}
	select {
	case <-c:
		return true
	case <-p.redialCh:
		return true
	case <-p.done:
		return false
	}
}

// loginErr is the error for an acquire that finds no idle connection while the pool's login is
// refused and the creator's next dial is not yet due; nil otherwise.
func (p *Pool) loginErr() error {
	st := p.login.Load()
	if st == nil || p.nanotime() >= st.retryAt {
		return nil
	}
	return &loginError{pool: p.cfg.Name, wait: st.wait, err: st.err}
}

type loginError struct {
	pool string
	wait time.Duration
	err  error
}

func (e *loginError) Error() string {
	return fmt.Sprintf("sqlpool: %s: no idle connection: the server refused the pool's login, and the pool "+
		"tries again %v after the refusal; fix the credentials or grants, then call Pool.Redial: %v", e.pool, e.wait, e.err)
}

func (e *loginError) Unwrap() []error { return []error{ErrUnavailable, e.err} }
