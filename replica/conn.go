package replica

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/sqlpool/sqlpool/internal/sqlstate"
	"github.com/sqlpool/sqlpool/validate"
)

// connector is the driver.Connector of the Router's two DBs. Its connections borrow a server
// connection at a borrow's first call and return it when database/sql takes the connection
// back (IsValid) or closes it.
type connector struct {
	r      *Router
	writer bool
}

func (c *connector) Connect(context.Context) (driver.Conn, error) {
	return &conn{r: c.r, writer: c.writer}, nil
}

func (c *connector) Driver() driver.Driver { return routerDriver{} }

type routerDriver struct{}

func (routerDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("replica: the router's driver cannot open connections by name; use Router.Writer or Router.Reader")
}

// conn is one database/sql connection of the writer or the reader.
type conn struct {
	r      *Router
	writer bool
	be     driver.Conn // the borrowed server connection, nil between borrows
	n      *node       // its server
	tok    *Token      // the Token of the borrow's read, if it went to a replica or the primary as a read
	read   bool        // the borrow is a read (reader, or a routed read-only transaction)
	gen    uint64      // counts borrows, so statements know when to prepare again
	inTx   bool
	stmts  []*stmt
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

// learns reports whether a commit on this borrow with ctx records its position: on the
// primary, in PoolWide for every commit, in PerToken for a context with a token or a key.
func (c *conn) learns(ctx context.Context) bool {
	if !c.writer || c.read {
		return false
	}
	switch c.r.cfg.Mode {
	case PoolWide:
		return true
	case PerToken:
		return TokenFrom(ctx) != nil || ctx.Value(keyKey{}) != nil
	}
	return false
}

// borrow takes a server connection for this borrow's first call: the primary for the writer
// (a replica for a routed read-only transaction, ro), a replica or the primary for the reader.
func (c *conn) borrow(ctx context.Context, ro bool) error {
	if c.be != nil {
		return nil
	}
	c.gen++
	if c.writer && !ro {
		be, err := c.r.primary.c.Connect(ctx)
		if err != nil {
			return err
		}
		c.be, c.n, c.read = be, c.r.primary, false
		return nil
	}
	return c.route(ctx, nil)
}

// route picks the server of a read, borrows a connection to it and, when the replica is
// behind the read's Token, waits for it. exclude is a replica that just failed this read.
func (c *conn) route(ctx context.Context, exclude *node) error {
	r := c.r
	c.read = true
	tok := r.tokenFor(ctx)
	c.tok = tok
	var need Position
	var stick *node
	if tok != nil {
		need, stick = tok.need()
	}
	if r.cfg.Mode == PoolWide {
		gp, gstick := r.global.need()
		need = merge(need, gp)
		if stick == nil {
			stick = gstick
		}
	}
	now := r.now()
	tried, timedOut := 0, false
	for tried <= len(r.nodes) {
		tried++
		n := c.pick(need, stick, exclude, now)
		if n == nil {
			break
		}
		st := n.state.Load()
		// No timeout of our own here (a timer per read costs a third of the router's
		// overhead): the replica pool's AcquireTimeout bounds it, and over a cluster.Connector
		// a down replica fails at once.
		be, err := n.c.Connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			r.failed(n, err)
			exclude = n
			continue
		}
		if !covers(st.pos, need) {
			ok, err := c.wait(ctx, n, be, need)
			if err != nil || !ok {
				_ = be.Close()
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil {
					r.failed(n, err)
					exclude = n
					continue
				}
				r.waitTimeouts.Add(1)
				n.waitTimeouts.Add(1)
				timedOut = true
				break // to the primary
			}
		}
		n.reads.Add(1)
		if tok != nil {
			tok.readAt(merge(st.pos, need))
		}
		c.be, c.n = be, n
		return nil
	}
	switch {
	case timedOut:
	case stick != nil:
		r.sticky.Add(1)
	default:
		r.noReplica.Add(1)
	}
	be, err := r.primary.c.Connect(ctx)
	if err != nil {
		return err
	}
	r.primaryReads.Add(1)
	r.primary.reads.Add(1)
	c.be, c.n = be, r.primary
	return nil
}

// pick returns the replica a read goes to, or nil for the primary: the one the Token sticks
// to while it is usable; else, in turn, a usable replica that has reached need; else the usable
// replica furthest ahead (the read waits on it).
func (c *conn) pick(need Position, stick, exclude *node, now int64) *node {
	r := c.r
	if stick != nil {
		if stick != exclude && !stick.primary && r.usable(stick, now) {
			return stick
		}
		return nil
	}
	if len(r.nodes) == 0 {
		return nil
	}
	start := int(r.rr.Add(1))
	var best *node
	var bestPos Position
	for i := range r.nodes {
		n := r.nodes[(start+i)%len(r.nodes)]
		if n == exclude || !r.usable(n, now) {
			continue
		}
		st := n.state.Load()
		if covers(st.pos, need) {
			return n
		}
		if r.cfg.WaitTimeout < 0 {
			continue
		}
		if best == nil || (covers(st.pos, bestPos) && !covers(bestPos, st.pos)) {
			best, bestPos = n, st.pos
		}
	}
	return best
}

// wait waits on be (a connection to n) until n has applied need, at most WaitTimeout.
func (c *conn) wait(ctx context.Context, n *node, be driver.Conn, need Position) (bool, error) {
	start := time.Now()
	ok, err := c.r.cfg.Flavor.Wait(ctx, be, need, c.r.cfg.WaitTimeout)
	n.waits.Add(1)
	n.waitNanos.Add(uint64(time.Since(start)))
	return ok, err
}

// release returns the borrowed connection, closing this borrow's statements on it first.
func (c *conn) release() {
	if c.be == nil {
		return
	}
	for _, s := range c.stmts {
		s.drop()
	}
	if c.read && c.tok != nil {
		if c.n.primary && !c.inTx {
			// A token read that fell back to the primary: bound what it saw by the primary's
			// position now (one more round trip, on this exceptional path only), or the token
			// would stick to the primary for as long as its reads come faster than the polls.
			ctx, cancel := context.WithTimeout(context.Background(), c.r.cfg.ConnectTimeout)
			p, err := c.r.cfg.Flavor.PrimaryPosition(ctx, c.be)
			cancel()
			if err == nil {
				c.tok.readAt(p)
			} else {
				c.tok.readEnded(c.n, c.r.now())
			}
		} else {
			c.tok.readEnded(c.n, c.r.now())
		}
	}
	_ = c.be.Close()
	c.be, c.n, c.tok, c.read, c.inTx = nil, nil, nil, false, false
}

// retryable reports whether a read's first call failed because its server is gone, so that
// it can run on another server: nothing was read yet.
func retryable(err error) bool {
	if errors.Is(err, driver.ErrBadConn) || validate.ServerGone(err) {
		return true
	}
	// PostgreSQL: the SQLSTATE through the method pgx's and lib/pq's errors have.
	var se interface{ SQLState() string }
	if errors.As(err, &se) {
		m, ok := sqlstate.Lookup(se.SQLState(), true)
		return ok && m.Fatal
	}
	return false
}

// first runs a borrow's first call op on a fresh read borrow, again on another server when the
// chosen replica turns out to be gone.
func (c *conn) first(ctx context.Context, fresh bool, op func() error) error {
	err := op()
	for tries := 0; err != nil && fresh && c.read && !c.n.primary && retryable(err) && tries < len(c.r.nodes); tries++ {
		n := c.n
		c.r.failed(n, err)
		for _, s := range c.stmts {
			s.drop()
		}
		_ = c.be.Close()
		c.be, c.n = nil, nil
		c.gen++
		if rerr := c.route(ctx, n); rerr != nil {
			return rerr
		}
		err = op()
	}
	return err
}

func (c *conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	fresh := c.be == nil
	if err := c.borrow(ctx, false); err != nil {
		return nil, err
	}
	s := &stmt{c: c, query: query}
	err := c.first(ctx, fresh, func() error { return s.prepare(ctx) })
	if err != nil {
		return nil, err
	}
	s.numInput = s.st.NumInput()
	c.stmts = append(c.stmts, s)
	return s, nil
}

func (c *conn) Close() error {
	c.release()
	return nil
}

func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	fresh := c.be == nil
	if err := c.borrow(ctx, fresh && opts.ReadOnly && c.r.cfg.RouteReadOnly); err != nil {
		return nil, err
	}
	var t driver.Tx
	err := c.first(ctx, fresh, func() error {
		var err error
		if bc, ok := c.be.(driver.ConnBeginTx); ok {
			t, err = bc.BeginTx(ctx, opts)
		} else {
			t, err = c.be.Begin() //nolint:staticcheck // a connector without ConnBeginTx
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	c.inTx = true
	return &tx{c: c, t: t, ctx: ctx}, nil
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	fresh := c.be == nil
	if err := c.borrow(ctx, false); err != nil {
		return nil, err
	}
	ec, ok := c.be.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	var res driver.Result
	err := c.first(ctx, fresh, func() error {
		var err error
		ec, _ = c.be.(driver.ExecerContext)
		res, err = ec.ExecContext(ctx, query, args)
		return err
	})
	if err == nil && !c.inTx && c.learns(ctx) {
		c.learn(ctx)
	}
	return res, err
}

// learn reads the position of the commit just made on this borrow and records it.
func (c *conn) learn(ctx context.Context) {
	p, err := c.r.cfg.Flavor.CommitPosition(ctx, c.be)
	if err != nil {
		p = nil
	}
	tok := c.r.tokenFor(ctx)
	c.r.committed(tok, p)
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	fresh := c.be == nil
	if err := c.borrow(ctx, false); err != nil {
		return nil, err
	}
	if _, ok := c.be.(driver.QueryerContext); !ok {
		return nil, driver.ErrSkip
	}
	var rows driver.Rows
	err := c.first(ctx, fresh, func() error {
		var err error
		qc, _ := c.be.(driver.QueryerContext)
		rows, err = qc.QueryContext(ctx, query, args)
		return err
	})
	if err == nil && !c.inTx && c.learns(ctx) && writes(query) {
		rows = &learnRows{Rows: rows, c: c, ctx: ctx}
	}
	return rows, err
}

func (c *conn) Ping(ctx context.Context) error {
	fresh := c.be == nil
	if err := c.borrow(ctx, false); err != nil {
		return err
	}
	return c.first(ctx, fresh, func() error {
		if p, ok := c.be.(driver.Pinger); ok {
			return p.Ping(ctx)
		}
		return nil
	})
}

// CheckNamedValue passes arguments to the borrowed connection's checker; before a borrow's
// first call (database/sql converts a call's arguments before making it) database/sql's own
// conversion applies.
func (c *conn) CheckNamedValue(nv *driver.NamedValue) error {
	if nc, ok := c.be.(driver.NamedValueChecker); ok {
		return nc.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// ResetSession is called by database/sql before it reuses the connection: the previous
// borrow's server connection was returned by IsValid already.
func (c *conn) ResetSession(context.Context) error {
	c.release()
	return nil
}

// IsValid is called by database/sql when the borrow ends: the server connection goes back to
// its pool, which cleans it.
func (c *conn) IsValid() bool {
	c.release()
	return true
}

// tx is a transaction on a borrowed connection.
type tx struct {
	c   *conn
	t   driver.Tx
	ctx context.Context
}

func (t *tx) Commit() error {
	err := t.t.Commit()
	t.c.inTx = false
	if err == nil && t.c.learns(t.ctx) {
		t.c.learn(t.ctx)
	}
	return err
}

func (t *tx) Rollback() error {
	t.c.inTx = false
	return t.t.Rollback()
}

// stmt is a prepared statement of a conn: prepared again on the server connection of a later
// borrow (database/sql keeps statements per connection across borrows).
type stmt struct {
	c        *conn
	query    string
	st       driver.Stmt // on the borrow gen, or nil
	gen      uint64
	numInput int
	closed   bool
}

func (s *stmt) prepare(ctx context.Context) error {
	var st driver.Stmt
	var err error
	if pc, ok := s.c.be.(driver.ConnPrepareContext); ok {
		st, err = pc.PrepareContext(ctx, s.query)
	} else {
		st, err = s.c.be.Prepare(s.query)
	}
	if err != nil {
		return err
	}
	s.st, s.gen = st, s.c.gen
	return nil
}

// drop closes the statement on the server connection being returned.
func (s *stmt) drop() {
	if s.st != nil {
		_ = s.st.Close()
		s.st = nil
	}
}

// ready borrows (for a statement used as a borrow's first call) and prepares on this borrow.
func (s *stmt) ready(ctx context.Context) (bool, error) {
	if s.closed {
		return false, errors.New("replica: statement is closed")
	}
	fresh := s.c.be == nil
	if err := s.c.borrow(ctx, false); err != nil {
		return false, err
	}
	if s.st == nil || s.gen != s.c.gen {
		s.drop()
		if err := s.c.first(ctx, fresh, func() error { return s.prepare(ctx) }); err != nil {
			return false, err
		}
		fresh = false
	}
	return fresh, nil
}

func (s *stmt) Close() error {
	s.closed = true
	s.drop()
	for i, o := range s.c.stmts {
		if o == s {
			s.c.stmts = append(s.c.stmts[:i], s.c.stmts[i+1:]...)
			break
		}
	}
	return nil
}

func (s *stmt) NumInput() int { return s.numInput }

func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	return nil, fmt.Errorf("replica: Stmt.Exec without a context is not supported; use ExecContext")
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	return nil, fmt.Errorf("replica: Stmt.Query without a context is not supported; use QueryContext")
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	fresh, err := s.ready(ctx)
	if err != nil {
		return nil, err
	}
	var res driver.Result
	err = s.c.first(ctx, fresh, func() error {
		if s.st == nil || s.gen != s.c.gen {
			if err := s.prepare(ctx); err != nil {
				return err
			}
		}
		sc, ok := s.st.(driver.StmtExecContext)
		if !ok {
			return errors.New("replica: the driver's statement lacks ExecContext")
		}
		res, err = sc.ExecContext(ctx, args)
		return err
	})
	if err == nil && !s.c.inTx && s.c.learns(ctx) {
		s.c.learn(ctx)
	}
	return res, err
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	fresh, err := s.ready(ctx)
	if err != nil {
		return nil, err
	}
	var rows driver.Rows
	err = s.c.first(ctx, fresh, func() error {
		if s.st == nil || s.gen != s.c.gen {
			if err := s.prepare(ctx); err != nil {
				return err
			}
		}
		sc, ok := s.st.(driver.StmtQueryContext)
		if !ok {
			return errors.New("replica: the driver's statement lacks QueryContext")
		}
		rows, err = sc.QueryContext(ctx, args)
		return err
	})
	if err == nil && !s.c.inTx && s.c.learns(ctx) && writes(s.query) {
		rows = &learnRows{Rows: rows, c: s.c, ctx: ctx}
	}
	return rows, err
}

// CheckNamedValue passes arguments to the statement's checker while it is prepared on the
// current borrow.
func (s *stmt) CheckNamedValue(nv *driver.NamedValue) error {
	if s.st != nil && s.gen == s.c.gen {
		if nc, ok := s.st.(driver.NamedValueChecker); ok {
			return nc.CheckNamedValue(nv)
		}
	}
	return s.c.CheckNamedValue(nv)
}
