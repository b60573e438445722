package pool

import (
	"context"
	"database/sql/driver"
	"fmt"

	"github.com/sqlpool/sqlpool/internal/rawconn"
)

// orNop returns t, or a tracker that follows nothing when t is nil (a dialect without session
// tracking).
func orNop(t SessionTracker) SessionTracker {
	if t == nil {
		return nopTracker{}
	}
	return t
}

// runPlan executes the tracker's release plan within ValidationTimeout.
func (p *Pool) runPlan(e *entry) error {
	plan := e.sess.Plan()
	switch {
	case plan.Discard:
		p.releaseLocks(e)
		return fmt.Errorf("session cannot be reset: %s", plan.Reason)
	case len(plan.Statements) == 0:
		e.sess.Done()
		return nil
	}
	ctx, cancel := context.WithTimeout(p.dialCtx, p.cfg.ValidationTimeout)
	defer cancel()
	ev := p.cfg.Trace.forPlans()
	rollback := len(plan.Statements) > 0 && plan.Statements[0] == "ROLLBACK"
	for i, q := range plan.Statements {
		if err := rawconn.Exec(ctx, e.conn, q); err != nil {
			if ev != nil {
				ev.ReleasePlanRun(p.cfg.Name, rollback, i+1, false)
			}
			return fmt.Errorf("release plan (%s) failed at %q: %w", plan.Reason, q, err)
		}
	}
	if ev != nil {
		ev.ReleasePlanRun(p.cfg.Name, rollback, len(plan.Statements), true)
	}
	e.sess.Done()
	return nil
}

// releaseLocks runs the tracker's BeforeClose statements (MySQL: SELECT RELEASE_ALL_LOCKS()) on
// a healthy connection about to be closed at release whose borrower may hold named locks
// (GET_LOCK, or a session state the tracker cannot follow): the server releases a closed
// connection's locks only after its socket closes, so without this the next borrower, on a new
// connection, could still find them held. Errors are ignored: the connection is closed next
// either way.
func (p *Pool) releaseLocks(e *entry) {
	if e.fatal != nil || e.sess == nil {
		return
	}
	stmts := e.sess.BeforeClose()
	if len(stmts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(p.dialCtx, p.cfg.ValidationTimeout)
	defer cancel()
	for _, q := range stmts {
		_ = rawconn.Exec(ctx, e.conn, q)
	}
}

// nopTracker is the tracker of a connection whose dialect follows no session state (its
// NewSession returned nil), and of one whose baseline is not recorded yet (while
// Hooks.AfterConnect runs): it follows nothing, and the tracker the dialect starts afterwards
// takes the session as the hook left it for its baseline.
type nopTracker struct{}

func (nopTracker) Begin(driver.TxOptions) {}
func (nopTracker) Commit()                {}
func (nopTracker) Rollback()              {}
func (nopTracker) Statement(string)       {}
func (nopTracker) Result(driver.Result)   {}
func (nopTracker) Failed()                {}
func (nopTracker) Unknown()               {}
func (nopTracker) Clean() bool            { return true }
func (nopTracker) ReadOnlyTx() bool       { return false }
func (nopTracker) Plan() ReleasePlan      { return ReleasePlan{} }
func (nopTracker) Done()                  {}
func (nopTracker) BeforeClose() []string  { return nil }
func (nopTracker) Scope() (string, bool)  { return "", false }
func (nopTracker) Caps() SessionCaps      { return SessionCaps{} }
