package pool

import (
	"context"
	"database/sql/driver"

	"github.com/sqlpool/sqlpool/internal/rawconn"
)

// stmt wraps a driver statement so that executions feed the session tracker and fatal errors
// evict the connection. Like conn, it implements the optional interfaces with database/sql's
// own fallbacks, with one care: database/sql consults a statement's NamedValueChecker before the
// connection's, so stmt's CheckNamedValue asks the driver statement, then the driver connection,
// then returns driver.ErrSkip — the order database/sql itself would use. ColumnConverter, which
// changes conversion when present, is kept exactly: stmtCC is used only when the driver's
// statement has it.
//
// Within a borrow, a statement runs as the server statement prepared when the borrower prepared
// it, as plain database/sql gives: in the database, sql_mode and character set the session had
// then, whatever USE or SET came after (the server fixes those into a statement when it
// prepares it). With the statement cache on, that server statement may be one the cache already
// held for the same database and text, prepared under the same baseline sql_mode and character
// set (SessionTracker.Scope). A statement database/sql keeps from an earlier borrow is prepared
// again at its first execution in a borrow whose scope differs (renew), as a new connection
// would prepare it.
type stmt struct {
	c      *conn
	ds     driver.Stmt
	query  string
	cs     *cachedStmt // the cache entry ds belongs to, or nil for an uncached statement
	closed bool
	// borrow is the hand-out (entry.handouts) ds was prepared or last renewed in; scope and
	// known are the session's scope then (SessionTracker.Scope).
	borrow uint64
	scope  string
	known  bool
}

type stmtCC struct{ *stmt }

var (
	_ driver.StmtExecContext   = (*stmt)(nil)
	_ driver.StmtQueryContext  = (*stmt)(nil)
	_ driver.NamedValueChecker = (*stmt)(nil)
	_ driver.ColumnConverter   = stmtCC{} //nolint:staticcheck // preserved for drivers that have it
)

func newStmt(c *conn, ds driver.Stmt, query string, cs *cachedStmt) driver.Stmt {
	s := &stmt{c: c, ds: ds, query: query, cs: cs, borrow: c.e.handouts.Load()}
	s.scope, s.known = c.e.sess.Scope()
	if _, ok := ds.(driver.ColumnConverter); ok { //nolint:staticcheck
		return stmtCC{s}
	}
	return s
}

// stmtOf returns the *stmt behind a statement newStmt returned.
func stmtOf(st driver.Stmt) *stmt {
	if cc, ok := st.(stmtCC); ok {
		return cc.stmt
	}
	return st.(*stmt)
}

func (s stmtCC) ColumnConverter(idx int) driver.ValueConverter {
	return s.ds.(driver.ColumnConverter).ColumnConverter(idx) //nolint:staticcheck
}

// Close closes the statement, or for a cached one drops this borrower's reference: the
// statement stays prepared on the connection for the next borrower.
func (s *stmt) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.c.untrack(s)
	if s.cs != nil {
		s.cs.release()
		return nil
	}
	if s.ds == nil { // renew failed
		return nil
	}
	return s.ds.Close()
}

func (s *stmt) NumInput() int {
	if s.ds == nil {
		return -1
	}
	return s.ds.NumInput()
}

// Exec and Query are the legacy entry points; database/sql uses the Context forms, which
// every stmt has.
func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), valuesToNamed(args))
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), valuesToNamed(args))
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	var r driver.Result
	err := s.run(ctx, args, true, func() (err error) {
		r, err = stmtExec(ctx, s.ds, args)
		return err
	})
	if err == nil {
		s.c.e.sess.Result(r)
	}
	return r, err
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	var r driver.Rows
	err := s.run(ctx, args, false, func() (err error) {
		r, err = stmtQuery(ctx, s.ds, args)
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.c.wrapRows(r, nil, nil), nil
}

// run is what every execution shares: refuse a statement used after it or its connection was
// given back, run the tracker's deferred resets (SessionCaps.Before; result: an Exec), record
// it for the release plan, time it for Trace, and observe its error.
func (s *stmt) run(ctx context.Context, args []driver.NamedValue, result bool, do func() error) error {
	if s.closed || s.c.closed {
		return driver.ErrBadConn
	}
	if b := s.c.e.before; b != nil {
		if err := b(ctx, s.query, args, result); err != nil {
			return s.c.observe(err)
		}
	}
	p := s.c.p
	if b := s.c.e.handouts.Load(); b != s.borrow {
		if err := s.renew(ctx, b); err != nil {
			return s.c.observe(err)
		}
	}
	s.c.e.sess.Statement(s.query)
	ev, start := p.cfg.Trace.forStatements(), int64(0)
	if ev != nil {
		start = p.nanotime()
	}
	err := do()
	if ev != nil {
		p.noteStatement(ev, ctx, s.query, start, err)
	}
	if err != nil {
		s.c.e.sess.Failed()
		return s.c.observe(err)
	}
	return nil
}

// renew readies for hand-out b a statement prepared in an earlier one, which database/sql keeps
// per connection (a sql.Stmt prepared on the DB): a new connection would prepare it now. While
// the session's scope is known and the one it was prepared under, the server statement is the
// one a new prepare gives; otherwise (the borrower changed search_path, sql_mode, the database
// …, or the statement was prepared under such a change) it is prepared again, so that it
// resolves names as the session now does.
func (s *stmt) renew(ctx context.Context, b uint64) error {
	scope, known := s.c.e.sess.Scope()
	if s.ds != nil && known && s.known && scope == s.scope {
		s.borrow = b
		return nil
	}
	if s.cs != nil {
		s.cs.release()
		s.cs = nil
	} else if s.ds != nil {
		_ = s.ds.Close()
	}
	s.ds = nil
	ds, err := rawconn.Prepare(ctx, s.c.e.conn, s.query)
	if err != nil {
		s.borrow = 0 // prepared again at the next execution
		return err
	}
	s.ds, s.scope, s.known, s.borrow = ds, scope, known, b
	return nil
}

func valuesToNamed(args []driver.Value) []driver.NamedValue {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	return nv
}

func (s *stmt) CheckNamedValue(nv *driver.NamedValue) error {
	if nc, ok := s.ds.(driver.NamedValueChecker); ok {
		return nc.CheckNamedValue(nv)
	}
	return s.c.CheckNamedValue(nv)
}

// stmtExec executes ds with database/sql's fallback for a statement without StmtExecContext.
func stmtExec(ctx context.Context, ds driver.Stmt, args []driver.NamedValue) (driver.Result, error) {
	if ec, ok := ds.(driver.StmtExecContext); ok {
		return ec.ExecContext(ctx, args)
	}
	vals, err := namedValuesToValues(args)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return ds.Exec(vals) //nolint:staticcheck
}

// stmtQuery is stmtExec for queries.
func stmtQuery(ctx context.Context, ds driver.Stmt, args []driver.NamedValue) (driver.Rows, error) {
	if qc, ok := ds.(driver.StmtQueryContext); ok {
		return qc.QueryContext(ctx, args)
	}
	vals, err := namedValuesToValues(args)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return ds.Query(vals) //nolint:staticcheck
}
