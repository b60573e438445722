package pool

import (
	"context"
	"database/sql/driver"

	"github.com/sqlpool/sqlpool/validate"
)

// stmtCache is one physical connection's prepared statements, by query text, least recently
// used first out. It lets a sql.Stmt used through p.OpenDB() (where database/sql prepares again
// on every borrow) and a parameterized db.QueryContext that the driver answers with
// driver.ErrSkip (go-sql-driver/mysql without interpolateParams: prepare, execute, close — three
// round trips) prepare once per connection.
//
// A statement is shared by reference count: the proxies handed out for it and the rows read
// from it. One evicted while in use is closed when the last reference goes. Only the goroutine
// that holds the connection touches the cache.
type stmtCache struct {
	max        int
	m          map[string]*cachedStmt
	head, tail *cachedStmt // head: most recently used
}

type cachedStmt struct {
	query      string
	ds         driver.Stmt
	refs       int
	evicted    bool
	prev, next *cachedStmt
}

// erMaxPreparedStmtCount is ER_MAX_PREPARED_STMT_COUNT_REACHED: the server's
// max_prepared_stmt_count is used up.
const erMaxPreparedStmtCount = 1461

func (c *stmtCache) get(q string) *cachedStmt {
	cs := c.m[q]
	if cs != nil && cs != c.head {
		c.unlink(cs)
		c.pushFront(cs)
	}
	return cs
}

// add caches ds for q and returns it with one reference; it evicts the least recently used
// statement beyond max.
func (c *stmtCache) add(q string, ds driver.Stmt) *cachedStmt {
	if c.m == nil {
		c.m = make(map[string]*cachedStmt, c.max)
	}
	cs := &cachedStmt{query: q, ds: ds, refs: 1}
	c.m[q] = cs
	c.pushFront(cs)
	for len(c.m) > c.max {
		c.evict(c.tail)
	}
	return cs
}

func (c *stmtCache) evict(cs *cachedStmt) {
	c.unlink(cs)
	delete(c.m, cs.query)
	cs.evicted = true
	if cs.refs == 0 {
		_ = cs.ds.Close()
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

// cached returns the cached statement for q with one more reference, preparing it on a miss.
// On ER_MAX_PREPARED_STMT_COUNT_REACHED it empties the cache (freeing the server's count) and
// prepares once more without caching; the statement is then returned with cs == nil.
func (c *conn) cached(ctx context.Context, q string) (cs *cachedStmt, ds driver.Stmt, err error) {
	cache := &c.e.stmts
	if cs = cache.get(q); cs != nil {
		cs.refs++
		return cs, cs.ds, nil
	}
	ds, err = prepareDriver(ctx, c.e.conn, q)
	if n, ok := validate.ErrorNumber(err); ok && n == erMaxPreparedStmtCount {
		cache.purge()
		c.p.stmtCacheFull.Add(1)
		ds, err = prepareDriver(ctx, c.e.conn, q)
		return nil, ds, err
	}
	if err != nil {
		return nil, nil, err
	}
	return cache.add(q, ds), ds, nil
}
