package pool

import (
	"context"
	"database/sql/driver"
)

// stmt wraps a driver statement so that executions feed the session tracker and fatal errors
// evict the connection. Like conn, it implements the optional interfaces with database/sql's
// own fallbacks, with one care: database/sql consults a statement's NamedValueChecker before the
// connection's, so stmt's CheckNamedValue asks the driver statement, then the driver connection,
// then returns driver.ErrSkip — the order database/sql itself would use. ColumnConverter, which
// changes conversion when present, is kept exactly: stmtCC is used only when the driver's
// statement has it.
type stmt struct {
	c     *conn
	ds    driver.Stmt
	query string
}

type stmtCC struct{ *stmt }

var (
	_ driver.StmtExecContext   = (*stmt)(nil)
	_ driver.StmtQueryContext  = (*stmt)(nil)
	_ driver.NamedValueChecker = (*stmt)(nil)
	_ driver.ColumnConverter   = stmtCC{} //nolint:staticcheck // preserved for drivers that have it
)

func newStmt(c *conn, ds driver.Stmt, query string) driver.Stmt {
	s := &stmt{c: c, ds: ds, query: query}
	if _, ok := ds.(driver.ColumnConverter); ok { //nolint:staticcheck
		return stmtCC{s}
	}
	return s
}

func (s stmtCC) ColumnConverter(idx int) driver.ValueConverter {
	return s.ds.(driver.ColumnConverter).ColumnConverter(idx) //nolint:staticcheck
}

func (s *stmt) Close() error  { return s.ds.Close() }
func (s *stmt) NumInput() int { return s.ds.NumInput() }

func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	s.c.e.sess.statement(s.query)
	r, err := s.ds.Exec(args) //nolint:staticcheck
	return r, s.done(err)
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	s.c.e.sess.statement(s.query)
	r, err := s.ds.Query(args) //nolint:staticcheck
	return r, s.done(err)
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if ec, ok := s.ds.(driver.StmtExecContext); ok {
		s.c.e.sess.statement(s.query)
		r, err := ec.ExecContext(ctx, args)
		return r, s.done(err)
	}
	vals, err := namedValuesToValues(args)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.Exec(vals)
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if qc, ok := s.ds.(driver.StmtQueryContext); ok {
		s.c.e.sess.statement(s.query)
		r, err := qc.QueryContext(ctx, args)
		return r, s.done(err)
	}
	vals, err := namedValuesToValues(args)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.Query(vals)
}

func (s *stmt) CheckNamedValue(nv *driver.NamedValue) error {
	if nc, ok := s.ds.(driver.NamedValueChecker); ok {
		return nc.CheckNamedValue(nv)
	}
	return s.c.CheckNamedValue(nv)
}

func (s *stmt) done(err error) error {
	if err != nil {
		s.c.e.sess.failed()
		return s.c.observe(err)
	}
	return nil
}
