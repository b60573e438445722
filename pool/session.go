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
// QueryerContext). A server that rejects the query with an ordinary (non-fatal) error leaves
// the baseline unknown.
func queryBaseline(ctx context.Context, dc driver.Conn) (txstate.Baseline, bool, error) {
	var b txstate.Baseline
	rows, err := queryDriver(ctx, dc, txstate.BaselineQuery)
	if err != nil {
		if v := validate.Check(err, validate.Session{}); v.Fatal || ctx.Err() != nil {
			return b, false, err
		}
		return b, false, nil
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(dest); err != nil {
		if err == io.EOF {
			return b, false, nil
		}
		return b, false, err
	}
	parsed, err := txstate.BaselineFromRow(dest)
	if err != nil {
		return b, false, nil
	}
	return parsed, true, nil
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
