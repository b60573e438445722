package pool

import "database/sql"

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
// waits (see the proof in docs/ARCHITECTURE.md, "One mode").

// reclaimLent brings back the connections parked in the pool's DBs, if there are any. A waiter
// calls it after it queued (and so after it counted itself in store.waiting).
func (p *Pool) reclaimLent() {
	if p.store.count(stateLent) == 0 {
		return
	}
	p.flushDBs(true)
}

// flushDBs makes every DB from OpenDB close the connections parked in its idle list (they
// come back to the store), and restores the limit when restore is set. Serialized: a flush
// that starts after a waiter queued sees every connection parked before.
func (p *Pool) flushDBs(restore bool) {
	p.dbMu.Lock()
	dbs := make([]*sql.DB, 0, len(p.dbs))
	for _, w := range p.dbs {
		if db := w.Value(); db != nil {
			dbs = append(dbs, db)
		}
	}
	p.dbMu.Unlock()
	if len(dbs) == 0 {
		return
	}
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	for _, db := range dbs {
		db.SetMaxIdleConns(-1) // ≤ 0: keep none; closes the parked ones now
		if restore && !p.closed.Load() {
			db.SetMaxIdleConns(p.cfg.MaxConns)
		}
	}
	p.flushes.Add(1)
}

// routeToPool reports whether a connection being returned through database/sql must go to the
// pool rather than be parked: someone waits in the pool, or the pool is closing.
func (p *Pool) routeToPool() bool {
	return p.store.waiting.Load() != 0 || p.closed.Load()
}
