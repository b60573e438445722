package pool

import (
	"database/sql"
	"weak"
)

// openedDB is a DB that OpenDB returned. Weak: a DB the user dropped is not kept alive by the
// pool.
type openedDB struct {
	db weak.Pointer[sql.DB]
	// warned is set once checkDBs has warned about this DB's MaxOpen (under Pool.dbMu).
	warned bool
}

// Connections parked in database/sql. A DB from OpenDB keeps idle connections in its own list
// (its freeConn), where the pool cannot take them: only database/sql hands them out. The pool
// still owns them (state lent, counted idle) and brings them back when it needs them, by the
// one public lever database/sql offers: lowering a DB's idle limit closes the connections over
// it at once (DB.SetMaxIdleConns), and database/sql's close of a parked connection is the
// proxy's Close, which puts the physical connection back into the pool's store — to the first
// waiter, if any. The limit is restored right after, so the DB parks connections again.
//
// When: a goroutine starts to wait in the pool while connections are parked (reclaimLent:
// otherwise it could time out while a connection sat idle in a DB), a housekeeping pass
// (IdleTimeout, KeepaliveTime and MaxLifetime apply to parked connections too), and Close.
// While anyone waits, conn.IsValid does not park a returned connection but routes it to the
// pool; together with reclaimLent this means no connection stays parked while a goroutine
// waits (see the proof in ARCHITECTURE.md).

// reclaimLent brings back the connections parked in the pool's DBs, if there are any. A waiter
// calls it after it queued (and so after it counted itself in store.waiting).
func (p *Pool) reclaimLent() {
	if p.reg.count(stateLent) == 0 {
		return
	}
	p.flushDBs(true)
}

// flushDBs makes every DB from OpenDB close the connections parked in its idle list (they
// come back to the store), and restores the limit when restore is set. Serialized: a flush
// that starts after a waiter queued sees every connection parked before.
func (p *Pool) flushDBs(restore bool) {
	dbs := p.openDBs()
	if len(dbs) == 0 {
		return
	}
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	for _, db := range dbs {
		db.SetMaxIdleConns(-1) // ≤ 0: keep none; closes the parked ones now
		if restore && !p.closed.Load() {
			db.SetMaxIdleConns(p.maxConns())
		}
	}
	p.flushes.Add(1)
}

// lend parks c's connection, released, in database/sql's idle list (state lent) and reports
// true; or, when the pool needs it — a goroutine waits in it, it is closing, or it is above
// MaxConns — it reports false: database/sql then closes its wrapper, and conn.Close parks the
// connection in the pool (c.routed) or finds it closed (retireExcess).
func (p *Pool) lend(c *conn) bool {
	e := c.e
	if p.routeToPool() {
		c.routed = true
		return false
	}
	e.state.Store(stateLent)
	// Publish, then look again: a goroutine that began to wait after the look above, and so
	// after its scan of lent connections may have missed this one, must find it routed.
	if p.routeToPool() && e.state.CompareAndSwap(stateLent, stateInUse) {
		c.routed = true
		return false
	}
	// The same for a SetMaxConns that lowered the limit after release's retireExcess (its
	// bring-back may have missed this connection).
	if p.reg.open() > p.maxConns() && e.state.CompareAndSwap(stateLent, stateInUse) {
		if p.retireExcess(e) {
			return false
		}
		e.state.Store(stateLent)
	}
	return true
}

// unlend takes back a connection database/sql dropped while it was parked (conn.Close: a
// bring-back, SetMaxIdleConns, DB.Close). IsValid released it already: it is only closed when
// marked or expired meanwhile, else parked in the pool; its return stamp is kept, so that
// IdleTimeout counts from its last use.
func (p *Pool) unlend(e *entry) {
	if !e.state.CompareAndSwap(stateLent, stateReserved) {
		return
	}
	switch {
	case e.evict.Load():
		p.closeEntry(e, CloseEvicted)
	case e.expired(p.now()):
		p.closeEntry(e, CloseMaxLifetime)
	default:
		p.park(e)
	}
}

// routeToPool reports whether a connection being returned through database/sql must go to the
// pool rather than be parked: someone waits in the pool, or the pool is closing.
func (p *Pool) routeToPool() bool {
	return p.store.waiting.Load() != 0 || p.closed.Load()
}

// openDBs returns the DBs from OpenDB that are still referenced.
func (p *Pool) openDBs() []*sql.DB {
	p.dbMu.Lock()
	defer p.dbMu.Unlock()
	dbs := make([]*sql.DB, 0, len(p.dbs))
	for _, d := range p.dbs {
		if db := d.db.Value(); db != nil {
			dbs = append(dbs, db)
		}
	}
	return dbs
}

// checkDBs warns, once per DB, when a DB from OpenDB was given a MaxOpen with
// SetMaxOpenConns. The pool's MaxConns already bounds it; with a MaxOpen, database/sql queues
// borrowers itself (in random order, without AcquireTimeout or MaxWaiters), and its
// background opener may park a connection it opened for a waiter that gave up, which the pool
// then counts as in use until database/sql returns or closes it. Housekeeping calls it.
func (p *Pool) checkDBs() {
	p.dbMu.Lock()
	defer p.dbMu.Unlock()
	for i := range p.dbs {
		d := &p.dbs[i]
		db := d.db.Value()
		if db == nil || d.warned {
			continue
		}
		if n := db.Stats().MaxOpenConnections; n != 0 {
			d.warned = true
			p.cfg.Logger.Warn("sqlpool: SetMaxOpenConns was called on a DB from OpenDB; "+
				"database/sql now queues borrowers itself, in random order and without AcquireTimeout "+
				"or MaxWaiters. The pool's MaxConns already bounds the DB: remove the call, or call "+
				"SetMaxOpenConns(0)", "pool", p.cfg.Name, "max_open", n, "max_conns", p.maxConns())
		}
	}
}
