package pool

import (
	"context"
	"database/sql/driver"
	"fmt"
)

// session is the per-connection view of what the borrower left behind: the Dialect's
// SessionTracker, fed by the proxy, started when the connection was dialled.
type session struct {
	t SessionTracker
}

// init starts the tracker of a freshly dialled connection.
func (s *session) init(ctx context.Context, d Dialect, dc driver.Conn) error {
	t, err := d.NewSession(ctx, dc)
	if err != nil {
		return err
	}
	if t == nil {
		return fmt.Errorf("the %s dialect returned no session tracker", d.Name())
	}
	s.t = t
	return nil
}

// queryDriver runs a query without arguments on a driver connection.
func queryDriver(ctx context.Context, dc driver.Conn, q string) (driver.Rows, error) {
	if qc, ok := dc.(driver.QueryerContext); ok {
		rows, err := qc.QueryContext(ctx, q, nil)
		if err != driver.ErrSkip {
			return rows, err
		}
	}
	st, err := prepareDriver(ctx, dc, q)
	if err != nil {
		return nil, err
	}
	r, err := stmtQuery(ctx, st, nil)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return &rows{Rows: r, done: func() { _ = st.Close() }}, nil
}

// prepareDriver prepares q, with database/sql's fallback for a driver without
// ConnPrepareContext.
func prepareDriver(ctx context.Context, dc driver.Conn, q string) (driver.Stmt, error) {
	if pc, ok := dc.(driver.ConnPrepareContext); ok {
		return pc.PrepareContext(ctx, q)
	}
	ds, err := dc.Prepare(q)
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		_ = ds.Close()
		return nil, ctx.Err()
	default:
	}
	return ds, nil
}

func (s *session) begin(opts driver.TxOptions) { s.t.Begin(opts) }

func (s *session) commit(err error) {
	s.t.Commit()
	if err != nil {
		s.t.Failed()
	}
}

func (s *session) rollback(err error) {
	s.t.Rollback()
	if err != nil {
		s.t.Failed()
	}
}

func (s *session) statement(query string) { s.t.Statement(query) }

// insertID tells the tracker the result of a successful Exec (MySQL reads its last insert id:
// zero means the statement generated no AUTO_INCREMENT value, so LAST_INSERT_ID() needs no
// reset for it).
func (s *session) insertID(r driver.Result) { s.t.Result(r) }

// failed is told that the last call recorded (statement, begin, commit or rollback) returned an
// error: what it would have ended may still be in place.
func (s *session) failed() { s.t.Failed() }

func (s *session) unknown()    { s.t.Unknown() }
func (s *session) clean() bool { return s.t.Clean() }

// readOnlyTx is false before the tracker started (an error while dialling).
func (s *session) readOnlyTx() bool { return s.t != nil && s.t.ReadOnlyTx() }

// runPlan executes the tracker's release plan within ValidationTimeout.
func (p *Pool) runPlan(e *entry) error {
	plan := e.sess.t.Plan()
	switch {
	case plan.Discard:
		p.releaseLocks(e)
		return fmt.Errorf("session cannot be reset: %s", plan.Reason)
	case len(plan.Statements) == 0:
		e.sess.t.Done()
		return nil
	}
	ctx, cancel := context.WithTimeout(p.dialCtx, p.cfg.ValidationTimeout)
	defer cancel()
	ev := p.cfg.Trace.forPlans()
	rollback := len(plan.Statements) > 0 && plan.Statements[0] == "ROLLBACK"
	for i, q := range plan.Statements {
		if err := execDriver(ctx, e.conn, q); err != nil {
			if ev != nil {
				ev.ReleasePlanRun(p.cfg.Name, rollback, i+1, false)
			}
			return fmt.Errorf("release plan (%s) failed at %q: %w", plan.Reason, q, err)
		}
	}
	if ev != nil {
		ev.ReleasePlanRun(p.cfg.Name, rollback, len(plan.Statements), true)
	}
	e.sess.t.Done()
	return nil
}

// releaseLocks runs the tracker's BeforeClose statements (MySQL: SELECT RELEASE_ALL_LOCKS()) on
// a healthy connection about to be closed at release whose borrower may hold named locks
// (GET_LOCK, or a session state the tracker cannot follow): the server releases a closed
// connection's locks only after its socket closes, so without this the next borrower, on a new
// connection, could still find them held. Errors are ignored: the connection is closed next
// either way.
func (p *Pool) releaseLocks(e *entry) {
	if e.fatal != nil || e.sess.t == nil {
		return
	}
	stmts := e.sess.t.BeforeClose()
	if len(stmts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(p.dialCtx, p.cfg.ValidationTimeout)
	defer cancel()
	for _, q := range stmts {
		_ = execDriver(ctx, e.conn, q)
	}
}

// execDriver runs one statement without arguments on a driver connection.
func execDriver(ctx context.Context, dc driver.Conn, q string) error {
	if ec, ok := dc.(driver.ExecerContext); ok {
		_, err := ec.ExecContext(ctx, q, nil)
		if err != driver.ErrSkip {
			return err
		}
	}
	st, err := prepareDriver(ctx, dc, q)
	if err != nil {
		return err
	}
	defer st.Close()
	_, err = stmtExec(ctx, st, nil)
	return err
}

// nopSession is the tracker of a connection whose baseline is not recorded yet (while
// Hooks.AfterConnect runs): it follows nothing, and the tracker the dialect starts afterwards
// takes the session as the hook left it for its baseline.
type nopSession struct{}

func (nopSession) Begin(driver.TxOptions) {}
func (nopSession) Commit()                {}
func (nopSession) Rollback()              {}
func (nopSession) Statement(string)       {}
func (nopSession) Result(driver.Result)   {}
func (nopSession) Failed()                {}
func (nopSession) Unknown()               {}
func (nopSession) Clean() bool            { return true }
func (nopSession) ReadOnlyTx() bool       { return false }
func (nopSession) Plan() ReleasePlan      { return ReleasePlan{} }
func (nopSession) Done()                  {}
func (nopSession) BeforeClose() []string  { return nil }
func (nopSession) Scope() (string, bool)  { return "", false }
