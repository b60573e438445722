package pool

import (
	"context"
	"database/sql/driver"

	"github.com/sqlpool/sqlpool/internal/rawconn"
)

// stmtCache is one physical connection's prepared statements, by current database and query
// text, least recently used first out. It lets a sql.Stmt used through p.OpenDB() (where database/sql prepares again
// on every borrow) and a parameterized db.QueryContext that the driver answers with
// driver.ErrSkip (go-sql-driver/mysql without interpolateParams: prepare, execute, close — three
// round trips) prepare once per connection.
//
// The server resolves unqualified names when it prepares a statement, so a statement is shared
// only under the database it was prepared in: the key is (database, query), with the database
// the session tracker follows from USE (SessionTracker.Scope; MySQL's tracker reads txstate.Tracker.Resolution). While the tracker cannot
// tell how the server would prepare a statement (the database or the session state unknown:
// after a failed USE, DROP DATABASE, a SET of sql_mode or NAMES, Raw), statements are prepared
// uncached and closed after use. A statement handed out (stmt) keeps the server statement it
// got for as long as the borrower holds it, as plain database/sql does: it runs where it was
// prepared, whatever USE or SET follows.
//
// A statement is shared by reference count: the proxies handed out for it and the rows read
// from it. One evicted while in use is closed when the last reference goes. Only the goroutine
// that holds the connection touches the cache.
type stmtCache struct {
	max        int
	m          map[stmtKey]*cachedStmt
	head, tail *cachedStmt // head: most recently used
	// seen holds the texts of parameterized statements run once directly, for a
	// tracker with SessionCaps.CacheFirst: such a statement is cached from its second run, so that a
	// statement run once costs no prepare of its own. Bounded: emptied past 4 × max entries.
	seen map[string]struct{}
}

// stmtKey is a cached statement's identity: the database it was prepared in and its text.
type stmtKey struct{ db, query string }

type cachedStmt struct {
	key        stmtKey
	ds         driver.Stmt
	refs       int
	evicted    bool
	prev, next *cachedStmt
}

func (c *stmtCache) get(k stmtKey) *cachedStmt {
	cs := c.m[k]
	if cs != nil && cs != c.head {
		c.unlink(cs)
		c.pushFront(cs)
	}
	return cs
}

// add caches ds under k and returns it with one reference; it evicts the least recently used
// statement beyond max.
func (c *stmtCache) add(k stmtKey, ds driver.Stmt) *cachedStmt {
	if c.m == nil {
		c.m = make(map[stmtKey]*cachedStmt, c.max)
	}
	cs := &cachedStmt{key: k, ds: ds, refs: 1}
	c.m[k] = cs
	c.pushFront(cs)
	for len(c.m) > c.max {
		c.evict(c.tail)
	}
	return cs
}

func (c *stmtCache) evict(cs *cachedStmt) {
	c.unlink(cs)
	delete(c.m, cs.key)
	cs.evicted = true
	if cs.refs == 0 {
		_ = cs.ds.Close()
	}
}

// admit reports whether q, a parameterized statement run for a tracker with SessionCaps.CacheFirst,
// goes through the cache: it is cached under db already, or this is its second run.
func (c *stmtCache) admit(db, q string) bool {
	if _, ok := c.m[stmtKey{db: db, query: q}]; ok {
		return true
	}
	if _, ok := c.seen[q]; ok {
		delete(c.seen, q)
		return true
	}
	if c.seen == nil || len(c.seen) >= 4*c.max {
		c.seen = make(map[string]struct{}, c.max)
	}
	c.seen[q] = struct{}{}
	return false
}

// drop evicts cs, which the server said is stale (ErrorClass.StaleStatement).
func (c *stmtCache) drop(cs *cachedStmt) {
	if !cs.evicted {
		c.evict(cs)
	}
}

// purge evicts every statement (closing those not in use).
func (c *stmtCache) purge() {
	for c.tail != nil {
		c.evict(c.tail)
	}
}

// release drops one reference; an evicted statement is closed with its last one.
func (cs *cachedStmt) release() {
	cs.refs--
	if cs.refs == 0 && cs.evicted {
		_ = cs.ds.Close()
	}
}

func (c *stmtCache) pushFront(cs *cachedStmt) {
	cs.prev, cs.next = nil, c.head
	if c.head != nil {
		c.head.prev = cs
	} else {
		c.tail = cs
	}
	c.head = cs
}

func (c *stmtCache) unlink(cs *cachedStmt) {
	if cs.prev != nil {
		cs.prev.next = cs.next
	} else {
		c.head = cs.next
	}
	if cs.next != nil {
		cs.next.prev = cs.prev
	} else {
		c.tail = cs.prev
	}
	cs.prev, cs.next = nil, nil
}

// cached returns the cached statement for q in the session's current database with one more
// reference, preparing it on a miss. When the tracker cannot tell how the server would prepare
// q (Scope not known), it prepares q without caching and returns cs == nil; so it does on
// ER_MAX_PREPARED_STMT_COUNT_REACHED, after emptying the cache (freeing the server's count).
func (c *conn) cached(ctx context.Context, q string) (cs *cachedStmt, ds driver.Stmt, err error) {
	cache := &c.e.stmts
	db, known := c.e.sess.Scope()
	if !known {
		ds, err = rawconn.Prepare(ctx, c.e.conn, q)
		return nil, ds, err
	}
	k := stmtKey{db: db, query: q}
	if cs = cache.get(k); cs != nil {
		cs.refs++
		return cs, cs.ds, nil
	}
	ds, err = rawconn.Prepare(ctx, c.e.conn, q)
	if err != nil && c.p.dialect.Classify(err, ErrorContext{Conn: c.e.conn}).StatementLimit {
		cache.purge()
		c.p.stmtCacheFull.Add(1)
		ds, err = rawconn.Prepare(ctx, c.e.conn, q)
		return nil, ds, err
	}
	if err != nil {
		return nil, nil, err
	}
	return cache.add(k, ds), ds, nil
}
