package pool

import (
	"context"
	"database/sql/driver"
	"fmt"
	"io"

	"github.com/sqlpool/sqlpool/txstate"
	"github.com/sqlpool/sqlpool/validate"
)

// session is the per-connection view of what the borrower left behind: a txstate.Tracker fed
// by the proxy, reset to the baseline recorded at connect.
type session struct {
	t txstate.Tracker
	// baselineKnown is false when the driver could not answer the baseline query; the tracker
	// then has no baseline and plans a discard for any change it cannot undo.
	baselineKnown bool
}

// init records the session baseline in one round trip and starts the tracker from it.
func (s *session) init(ctx context.Context, dc driver.Conn) error {
	b, known, err := queryBaseline(ctx, dc)
	if err != nil {
		return err
	}
	s.baselineKnown = known
	if known {
		s.t.Reset(b)
	}
	return nil
}

// queryBaseline runs txstate.BaselineQuery (directly, or prepared when the driver has no
// QueryerContext): once per connection, right after dialling, never on a borrow. A server that
// rejects it with an ordinary (non-fatal) error, such as one that lacks a system variable it
// names, gets txstate.BaselineCoreQuery instead (one more round trip, on such servers only): the
// database, autocommit, isolation and access mode are then still reset, and only a SET of a
// session variable discards the connection. A row whose variable columns cannot be read keeps
// its core columns the same way. A server that rejects both leaves the baseline unknown.
func queryBaseline(ctx context.Context, dc driver.Conn) (txstate.Baseline, bool, error) {
	b, known, rejected, err := runBaseline(ctx, dc, txstate.BaselineQuery)
	if err != nil || !rejected {
		return b, known, err
	}
	b, known, _, err = runBaseline(ctx, dc, txstate.BaselineCoreQuery)
	return b, known, err
}

// runBaseline runs one baseline query and reads its row. rejected reports an ordinary error
// from the server (the query may be retried); err is a fatal one (or the ctx's).
func runBaseline(ctx context.Context, dc driver.Conn, q string) (b txstate.Baseline, known, rejected bool, err error) {
	rows, err := queryDriver(ctx, dc, q)
	if err != nil {
		if v := validate.Check(err, validate.Session{}); v.Fatal || ctx.Err() != nil {
			return b, false, false, err
		}
		return b, false, true, nil
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(dest); err != nil {
		if err == io.EOF {
			return b, false, false, nil
		}
		if v := validate.Check(err, validate.Session{}); v.Fatal || ctx.Err() != nil {
			return b, false, false, err
		}
		return b, false, true, nil
	}
	b, err = txstate.BaselineFromRow(dest)
	if err != nil && len(dest) > txstate.BaselineCoreColumns {
		// A variable column it cannot read: keep the core columns (no variables recorded).
		b, err = txstate.BaselineFromRow(dest[:txstate.BaselineCoreColumns])
	}
	if err != nil {
		return b, false, false, nil
	}
	return b, true, false, nil
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

// insertID tells the tracker the last insert id of a successful Exec's result: zero means the
// statement generated no AUTO_INCREMENT value, so LAST_INSERT_ID() needs no reset for it.
func (s *session) insertID(r driver.Result) {
	if id, err := r.LastInsertId(); err == nil {
		s.t.InsertID(id)
	}
}

// failed is told that the last call recorded (statement, begin, commit or rollback) returned an
// error: what it would have ended may still be in place.
func (s *session) failed() { s.t.Failed() }

func (s *session) unknown()         { s.t.Unknown() }
func (s *session) clean() bool      { return s.t.Clean() }
func (s *session) readOnlyTx() bool { return s.t.ReadOnlyTx() }

// runPlan executes the tracker's release plan within ValidationTimeout.
func (p *Pool) runPlan(e *entry) error {
	plan := e.sess.t.Plan()
	switch plan.Action {
	case txstate.ActionNone:
		e.sess.t.Done()
		return nil
	case txstate.ActionDiscard:
		p.releaseLocks(e)
		return fmt.Errorf("session cannot be reset: %s", plan.Reason)
	}
	ctx, cancel := context.WithTimeout(p.dialCtx, p.cfg.ValidationTimeout)
	defer cancel()
	ev := p.cfg.Events
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

// releaseLocks runs SELECT RELEASE_ALL_LOCKS() on a healthy connection about to be closed at
// release whose borrower may hold named locks (GET_LOCK, or a session state the tracker cannot
// follow): the server releases a closed connection's locks only after its socket closes, so
// without this the next borrower, on a new connection, could still find them held. Errors are
// ignored: the connection is closed next either way.
func (p *Pool) releaseLocks(e *entry) {
	if e.fatal != nil || !e.sess.t.MayHoldUserLocks() {
		return
	}
	ctx, cancel := context.WithTimeout(p.dialCtx, p.cfg.ValidationTimeout)
	defer cancel()
	_ = execDriver(ctx, e.conn, "SELECT RELEASE_ALL_LOCKS()")
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

// classifyErr is the pool's default fatal-error decision (package validate).
func classifyErr(err error, readOnlyTx bool) (fatal bool, reason string, gone bool) {
	v := validate.Check(err, validate.Session{ReadOnlyTx: readOnlyTx})
	return v.Fatal, v.Reason, v.ServerGone
}
