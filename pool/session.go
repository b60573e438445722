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

// queryBaseline runs txstate.BaselineQuery. A driver without QueryerContext, or a server that
// rejects the query with an ordinary (non-fatal) error, leaves the baseline unknown.
func queryBaseline(ctx context.Context, dc driver.Conn) (txstate.Baseline, bool, error) {
	b := txstate.Baseline{Autocommit: true}
	qc, ok := dc.(driver.QueryerContext)
	if !ok {
		return b, false, nil
	}
	rows, err := qc.QueryContext(ctx, txstate.BaselineQuery, nil)
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
	for _, q := range plan.Statements {
		if err := execDriver(ctx, e.conn, q); err != nil {
			return fmt.Errorf("release plan (%s) failed at %q: %w", plan.Reason, q, err)
		}
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
	var st driver.Stmt
	var err error
	if pc, ok := dc.(driver.ConnPrepareContext); ok {
		st, err = pc.PrepareContext(ctx, q)
	} else {
		st, err = dc.Prepare(q)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	if sc, ok := st.(driver.StmtExecContext); ok {
		_, err = sc.ExecContext(ctx, nil)
	} else {
		_, err = st.Exec(nil) //nolint:staticcheck
	}
	return err
}

// classifyErr is the pool's default fatal-error decision (package validate).
func classifyErr(err error, readOnlyTx bool) (fatal bool, reason string, gone bool) {
	v := validate.Check(err, validate.Session{ReadOnlyTx: readOnlyTx})
	return v.Fatal, v.Reason, v.ServerGone
}
