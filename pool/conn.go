package pool

import (
	"context"
	"database/sql/driver"
	"errors"

	"github.com/sqlpool/sqlpool/internal/rawconn"
)

// conn is the driver.Conn that database/sql sees: one per borrow, over one physical connection.
//
// Optional interfaces. conn implements every optional driver.Conn interface database/sql looks
// for, and each method falls back to exactly what database/sql does when the wrapped connection
// lacks that interface: ExecContext/QueryContext return driver.ErrSkip (database/sql then
// prepares), BeginTx applies database/sql's own rules for non-default options, Ping returns nil,
// CheckNamedValue returns driver.ErrSkip (database/sql's default converter). So behaviour and
// round trips are those of the wrapped driver whatever subset it implements. SessionResetter
// and Validator are the pool's own hooks on database/sql's idle list: ResetSession checks a
// connection database/sql takes from it, IsValid cleans one being returned (see the package
// doc); they call the driver's when it has them.
// database/sql only keeps a connection after a cancelled transaction when both are present, and
// they always are here: the release plan then rolls back whatever was left open.
type conn struct {
	p      *Pool
	e      *entry
	closed bool
	open   []driver.Stmt // statements handed out on this borrow and not yet closed
	rw     rows          // reused for the result sets of this borrow (wrapRows)
	rwBusy bool          // rw holds an open result set
	// routed is set by IsValid when it cleaned the connection and refused to let database/sql
	// park it because the pool needs it (a waiter, or Close): Close stows it without cleaning
	// again.
	routed bool
}

var (
	_ driver.Conn               = (*conn)(nil)
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.ConnPrepareContext = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.Pinger             = (*conn)(nil)
	_ driver.NamedValueChecker  = (*conn)(nil)
	_ driver.SessionResetter    = (*conn)(nil)
	_ driver.Validator          = (*conn)(nil)
)

// Unwrap returns the driver's own connection, for sql.Conn.Raw users:
//
//	conn.Raw(func(dc any) error { mc := dc.(interface{ Unwrap() driver.Conn }).Unwrap(); … })
//
// The pool cannot see what is done with it, so the session state becomes unknown and the
// connection gets a full reset (or is discarded) when it is returned.
func (c *conn) Unwrap() driver.Conn {
	c.runBefore()
	c.e.sess.Unknown()
	return c.e.conn
}

// UnwrapRan is Unwrap for a borrower that names the statements it runs on the driver connection
// (pgdialect.UnwrapFor): the tracker records them as if run through the pool, and the session
// stays known.
func (c *conn) UnwrapRan(queries ...string) driver.Conn {
	c.runBefore()
	for _, q := range queries {
		c.e.sess.Statement(q)
	}
	return c.e.conn
}

// runBefore runs the tracker's deferred resets (SessionCaps.Before) before the driver's
// connection is handed out, within ValidationTimeout; a connection whose reset failed is closed
// at release.
func (c *conn) runBefore() {
	b := c.e.before
	if b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.p.cfg.ValidationTimeout)
	defer cancel()
	if err := b(ctx, "", nil, false); err != nil {
		_ = c.observe(err)
		c.e.evict.Store(true)
	}
}

// Unwrap returns the driver connection under one of the pool's connections (as sql.Conn.Raw passes
// it), or dc itself.
func Unwrap(dc any) driver.Conn {
	if c, ok := dc.(*conn); ok {
		return c.Unwrap()
	}
	d, _ := dc.(driver.Conn)
	return d
}

// observe records a fatal error so that the connection is never handed out again.
func (c *conn) observe(err error) error {
	if err != nil && err != driver.ErrSkip {
		c.p.observe(c.e, err)
	}
	return err
}

func (c *conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if c.e.stmts.max > 0 {
		cs, ds, err := c.cached(ctx, query)
		if err != nil {
			return nil, c.observe(err)
		}
		return c.track(newStmt(c, ds, query, cs)), nil
	}
	ds, err := rawconn.Prepare(ctx, c.e.conn, query)
	if err != nil {
		return nil, c.observe(err)
	}
	return c.track(newStmt(c, ds, query, nil)), nil
}

// track remembers a statement handed out on this borrow, so that one still open when the
// connection is returned is closed then (and counted as leaked).
func (c *conn) track(st driver.Stmt) driver.Stmt {
	c.open = append(c.open, st)
	return st
}

func (c *conn) untrack(s *stmt) {
	for i := len(c.open) - 1; i >= 0; i-- { // statements are usually closed last-in first-out
		if stmtOf(c.open[i]) == s {
			c.open = append(c.open[:i], c.open[i+1:]...)
			return
		}
	}
}

// closeLeaked closes the statements the borrower left open and reports them.
func (c *conn) closeLeaked() {
	if len(c.open) == 0 {
		return
	}
	leaked := c.open
	c.open = nil
	for _, st := range leaked {
		s := stmtOf(st)
		c.p.leakedStmts.Add(1)
		if ev := c.p.cfg.Trace; ev != nil && ev.LeakedStatementClosed != nil {
			ev.LeakedStatementClosed(c.p.cfg.Name)
		}
		if c.p.cfg.LeakDetectionThreshold > 0 {
			c.p.cfg.Logger.Warn("sqlpool: statement left open by its borrower was closed on release",
				"pool", c.p.cfg.Name, "conn", c.e.id, "query", truncate(s.query, 120))
		}
		_ = st.Close()
	}
}

func truncate(q string, n int) string {
	if len(q) <= n {
		return q
	}
	return q[:n] + "…"
}

// Close returns the connection to the pool. database/sql calls it when it drops a connection:
// one IsValid refused or routed to the pool, one its idle list has no room for, one it closes
// while parked (SetMaxIdleConns, DB.Close, the pool bringing parked connections back).
func (c *conn) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	c.closeLeaked()
	p, e := c.p, c.e
	switch e.state.Load() {
	case stateInUse:
		if c.routed {
			// IsValid released it; database/sql dropped its wrapper so that the pool can
			// serve a waiter with it.
			p.park(e)
			return nil
		}
		p.release(e, nil)
	case stateLent:
		p.unlend(e) // released by IsValid already
	}
	return nil
}

func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	var t driver.Tx
	var err error
	if bc, ok := c.e.conn.(driver.ConnBeginTx); ok {
		t, err = bc.BeginTx(ctx, opts)
	} else {
		// database/sql's rules for a driver without ConnBeginTx (ctxutil.go).
		if opts.Isolation != driver.IsolationLevel(0) {
			return nil, errors.New("sql: driver does not support non-default isolation level")
		}
		if opts.ReadOnly {
			return nil, errors.New("sql: driver does not support read-only transactions")
		}
		t, err = c.e.conn.Begin() //nolint:staticcheck // the legacy path is the point
		if err == nil {
			select {
			case <-ctx.Done():
				_ = t.Rollback()
				return nil, ctx.Err()
			default:
			}
		}
	}
	c.e.sess.Begin(opts)
	if err != nil {
		c.e.sess.Failed()
		return nil, c.observe(err)
	}
	return &tx{c: c, t: t, ctx: ctx}, nil
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if ev := c.p.cfg.Trace.forStatements(); ev != nil {
		start := c.p.nanotime()
		r, err := c.execContext(ctx, query, args)
		c.p.noteStatement(ev, ctx, query, start, err)
		return r, err
	}
	return c.execContext(ctx, query, args)
}

func (c *conn) execContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if b := c.e.before; b != nil {
		if err := b(ctx, query, args, true); err != nil {
			return nil, c.observe(err)
		}
	}
	var r driver.Result
	var err error
	var ran bool // run through the statement cache first (cacheFirst)
	if c.cacheFirst(query, args) {
		r, ran, err = c.execCacheFirst(ctx, query, args)
	}
	ec, isEC := c.e.conn.(driver.ExecerContext)
	switch {
	case ran:
	case isEC:
		r, err = ec.ExecContext(ctx, c.p.limited(ctx, c.e, query), args)
		if err == driver.ErrSkip && len(args) > 0 && c.e.stmts.max > 0 {
			r, err = c.execCached(ctx, query, args)
		}
	default:
		ex, ok := c.e.conn.(driver.Execer) //nolint:staticcheck
		if !ok {
			return nil, driver.ErrSkip
		}
		var vals []driver.Value
		if vals, err = namedValuesToValues(args); err != nil {
			return nil, err
		}
		if err = ctx.Err(); err != nil {
			return nil, err
		}
		r, err = ex.Exec(query, vals)
	}
	if err == driver.ErrSkip {
		// Not run: database/sql prepares it through the proxy, whose execution records it.
		return nil, err
	}
	c.e.sess.Statement(query) // recorded after the call, so a statement that never ran is not
	if err != nil {
		c.e.sess.Failed()
		return nil, c.observe(err)
	}
	c.e.sess.Result(r)
	return r, nil
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if ev := c.p.cfg.Trace.forStatements(); ev != nil {
		start := c.p.nanotime()
		r, err := c.queryContext(ctx, query, args)
		c.p.noteStatement(ev, ctx, query, start, err)
		return r, err
	}
	return c.queryContext(ctx, query, args)
}

func (c *conn) queryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if b := c.e.before; b != nil {
		if err := b(ctx, query, args, false); err != nil {
			return nil, c.observe(err)
		}
	}
	var r driver.Rows
	var err error
	var ran bool // run through the statement cache first (cacheFirst)
	if c.cacheFirst(query, args) {
		r, ran, err = c.queryCacheFirst(ctx, query, args)
	}
	qc, isQC := c.e.conn.(driver.QueryerContext)
	switch {
	case ran:
	case isQC:
		r, err = qc.QueryContext(ctx, c.p.limited(ctx, c.e, query), args)
		if err == driver.ErrSkip && len(args) > 0 && c.e.stmts.max > 0 {
			r, err = c.queryCached(ctx, query, args)
		}
	default:
		q, ok := c.e.conn.(driver.Queryer) //nolint:staticcheck
		if !ok {
			return nil, driver.ErrSkip
		}
		var vals []driver.Value
		if vals, err = namedValuesToValues(args); err != nil {
			return nil, err
		}
		if err = ctx.Err(); err != nil {
			return nil, err
		}
		r, err = q.Query(query, vals)
	}
	if err == driver.ErrSkip {
		// Not run: database/sql prepares it through the proxy, whose execution records it.
		return nil, err
	}
	c.e.sess.Statement(query) // recorded after the call, so a statement that never ran is not
	if err != nil {
		c.e.sess.Failed()
		return nil, c.observe(err)
	}
	if _, ok := r.(*rows); ok {
		return r, nil // queryCached's, already wrapped
	}
	return c.wrapRows(r, nil, nil), nil
}

// cacheFirst reports whether the parameterized statement query goes through the statement
// cache before the driver's direct call: the tracker asks for it (SessionCaps.CacheFirst), the
// cache is on and knows the session's scope, and query ran on the connection before (admit).
func (c *conn) cacheFirst(query string, args []driver.NamedValue) bool {
	if len(args) == 0 || c.e.stmts.max <= 0 {
		return false
	}
	if cf := c.e.cacheFirst; cf == nil || !cf() {
		return false
	}
	db, known := c.e.sess.Scope()
	return known && c.e.stmts.admit(db, query)
}

// cachedFirst returns the cached statement for a cacheFirst statement; ok is false when the
// direct call must run instead: the statement is not cached (the cache stood aside) or its
// prepare failed with an error that leaves the connection usable, which the direct call then
// reports as the driver would. A fatal prepare error is returned with ok true.
func (c *conn) cachedFirst(ctx context.Context, query string) (cs *cachedStmt, ok bool, err error) {
	cs, ds, err := c.cached(ctx, query)
	switch {
	case err != nil && c.p.dialect.Classify(err, ErrorContext{Conn: c.e.conn}).Fatal:
		return nil, true, err
	case err != nil:
		return nil, false, nil
	case cs == nil:
		_ = ds.Close()
		return nil, false, nil
	}
	return cs, true, nil
}

// staleFirst handles the error of a cacheFirst statement's execution: a stale statement is
// dropped from the cache and reported not run (the direct call runs it); any other error is the
// statement's.
func (c *conn) staleFirst(cs *cachedStmt, err error) (ran bool) {
	stale := c.p.dialect.Classify(err, ErrorContext{Conn: c.e.conn}).StaleStatement
	if stale {
		c.e.stmts.drop(cs)
	}
	cs.release()
	return !stale
}

// execCacheFirst is execContext through the cache for a cacheFirst statement; ran is false
// when the direct call must run it instead (cachedFirst, staleFirst).
func (c *conn) execCacheFirst(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, bool, error) {
	cs, ok, err := c.cachedFirst(ctx, query)
	if !ok || err != nil {
		return nil, ok, err
	}
	r, err := stmtExec(ctx, cs.ds, args)
	if err != nil {
		return nil, c.staleFirst(cs, err), err
	}
	cs.release()
	return r, true, nil
}

// queryCacheFirst is queryContext through the cache for a cacheFirst statement: the statement
// is held until the rows are closed.
func (c *conn) queryCacheFirst(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, bool, error) {
	cs, ok, err := c.cachedFirst(ctx, query)
	if !ok || err != nil {
		return nil, ok, err
	}
	r, err := stmtQuery(ctx, cs.ds, args)
	if err != nil {
		return nil, c.staleFirst(cs, err), err
	}
	return c.wrapRows(r, cs, cs.ds), true, nil
}

// execCached runs a parameterized statement through the connection's statement cache, for a
// driver that answered the direct call with driver.ErrSkip.
func (c *conn) execCached(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	cs, ds, err := c.cached(ctx, query)
	if err != nil {
		return nil, err
	}
	r, err := stmtExec(ctx, ds, args)
	releaseStmt(cs, ds)
	return r, err
}

// queryCached is execCached for queries: the statement is held until the rows are closed.
func (c *conn) queryCached(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	cs, ds, err := c.cached(ctx, query)
	if err != nil {
		return nil, err
	}
	r, err := stmtQuery(ctx, ds, args)
	if err != nil {
		releaseStmt(cs, ds)
		return nil, err
	}
	return c.wrapRows(r, cs, ds), nil
}

// releaseStmt drops a cached statement's reference, or closes an uncached one.
func releaseStmt(cs *cachedStmt, ds driver.Stmt) {
	if cs != nil {
		cs.release()
		return
	}
	_ = ds.Close()
}

func (c *conn) Ping(ctx context.Context) error {
	if pc, ok := c.e.conn.(driver.Pinger); ok {
		return c.observe(pc.Ping(ctx))
	}
	return nil
}

func (c *conn) CheckNamedValue(nv *driver.NamedValue) error {
	if nc, ok := c.e.conn.(driver.NamedValueChecker); ok {
		return nc.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// ResetSession is called by database/sql before it reuses a connection from its own idle list.
// With IsValid it is the hot path of a DB from p.OpenDB(): a borrow that finds a free
// connection there goes through these two and never through the store. It takes the parked
// connection back and runs the pool's acquire on it, which returns driver.ErrBadConn for a
// connection that is marked, expired, dead or owned by a closed pool; database/sql then closes
// it and tries another.
func (c *conn) ResetSession(ctx context.Context) error {
	e := c.e
	if !e.state.CompareAndSwap(stateLent, stateInUse) {
		if e.state.Load() == stateInUse {
			return nil // not lent: nothing to check (a new connection, checked by Connect)
		}
		return driver.ErrBadConn // closed by the pool while parked
	}
	if _, err := c.p.acquire(ctx, c); err != nil {
		return driver.ErrBadConn
	}
	return nil
}

// IsValid is called by database/sql when a borrower is done with the connection, before it
// parks it in its idle list; with ResetSession it is the hot path of a DB from p.OpenDB(). It
// runs the pool's release, which keeps ownership (the connection is parked in state lent,
// counted idle); it returns false when the connection cannot be reused, or when a goroutine
// waits in the pool (or it is closing), and database/sql then closes it, which gives it to the
// pool (Close).
func (c *conn) IsValid() bool {
	if st := c.e.state.Load(); st != stateInUse {
		return st == stateLent
	}
	return c.p.release(c.e, c)
}

func namedValuesToValues(named []driver.NamedValue) ([]driver.Value, error) {
	vals := make([]driver.Value, len(named))
	for i, nv := range named {
		if nv.Name != "" {
			return nil, errors.New("sql: driver does not support the use of Named Parameters")
		}
		vals[i] = nv.Value
	}
	return vals, nil
}

// tx tracks the end of a transaction for the release plan.
type tx struct {
	c *conn
	t driver.Tx
	// ctx is the context the transaction began with, for Dialect.Commit.
	ctx context.Context
}

func (t *tx) Commit() error {
	err := t.c.p.dialect.Commit(t.ctx, t.c.e.conn, t.t)
	s := t.c.e.sess
	s.Commit()
	if err != nil {
		s.Failed()
	}
	return t.c.observe(err)
}

func (t *tx) Rollback() error {
	err := t.t.Rollback()
	s := t.c.e.sess
	s.Rollback()
	if err != nil {
		s.Failed()
	}
	return t.c.observe(err)
}
