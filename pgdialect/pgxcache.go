package pgdialect

import (
	"context"
	"reflect"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgxCache is the part of pgx's statement cache (its internal stmtcache.Cache) the tracker
// uses: a statement invalidated here is deallocated by pgx before its next statement (one
// pipelined round trip) and prepared again on its next use.
type pgxCache interface {
	Invalidate(sql string)
	InvalidateAll()
	GetInvalidated() []*pgconn.StatementDescription
	RemoveInvalidated()
	Len() int
}

// pgxCaches reaches a pgx connection's statement and description caches, which pgx does not
// export: a statement prepared while the session resolved names differently (another
// search_path, a temporary table shadowing a table, another role) must not reach a borrower
// whose names resolve as on a new connection, where PostgreSQL would re-plan it and refuse the
// changed result type (0A000, "cached plan must not change result type").
//
// pgx's stdlib also prepares a sql.Stmt's text under a name derived from the text, in pgx's
// map of prepared statements, which any query of the same text then runs (a statement the
// pool's cache or a DB-level sql.Stmt keeps from an earlier borrow). Such a statement is
// unprepared: its entry leaves the map and its server statement is handed to pgx's statement
// cache as invalidated, so that pgx deallocates it before its next statement; the sql.Stmt
// holding it keeps working, since pgx's stdlib runs a statement by its text (through the
// statement cache, prepared under the current names).
type pgxCaches struct {
	conn         *pgx.Conn
	stmts, descs reflect.Value // the *pgx.Conn fields, made accessible
	prepared     reflect.Value // map[string]*pgconn.StatementDescription
}

// newPgxCaches returns c's caches; ok is false when pgx's layout is not the one this package
// knows (the fields are then left alone).
func newPgxCaches(c *pgx.Conn) (pgxCaches, bool) {
	if c == nil {
		return pgxCaches{}, false
	}
	v := reflect.ValueOf(c).Elem()
	get := func(name string) (reflect.Value, bool) {
		f := v.FieldByName(name)
		if !f.IsValid() || f.Kind() != reflect.Interface || !f.CanAddr() {
			return reflect.Value{}, false
		}
		return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), true
	}
	s, ok1 := get("statementCache")
	d, ok2 := get("descriptionCache")
	m := v.FieldByName("preparedStatements")
	if !ok1 || !ok2 || !m.IsValid() || m.Kind() != reflect.Map || m.Type().Key().Kind() != reflect.String ||
		m.Type().Elem() != reflect.TypeOf((*pgconn.StatementDescription)(nil)) {
		return pgxCaches{}, false
	}
	m = reflect.NewAt(m.Type(), unsafe.Pointer(m.UnsafeAddr())).Elem()
	return pgxCaches{conn: c, stmts: s, descs: d, prepared: m}, true
}

// flush deallocates the invalidated statements now, as pgx would before its next statement
// (one pipelined round trip), so that a Prepare of an unprepared text, which pgx sends under
// the same name, does not meet the old server statement (42P05). It does nothing while the
// connection is busy (a result being read) or in a failed transaction: pgx then deallocates
// them before its next statement.
func (p pgxCaches) flush() error {
	c := cacheOf(p.stmts)
	if c == nil {
		return nil
	}
	inv := c.GetInvalidated()
	pc := p.conn.PgConn()
	if len(inv) == 0 || pc.IsBusy() || pc.IsClosed() || pc.TxStatus() != 'I' && pc.TxStatus() != 'T' {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	pl := pc.StartPipeline(ctx)
	for _, sd := range inv {
		pl.SendDeallocate(sd.Name)
	}
	err := pl.Sync()
	if cerr := pl.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	for _, sd := range inv {
		if v := p.prepared.MapIndex(reflect.ValueOf(sd.Name)); v.IsValid() && v.Interface().(*pgconn.StatementDescription) == sd {
			p.prepared.SetMapIndex(reflect.ValueOf(sd.Name), reflect.Value{})
		}
	}
	c.RemoveInvalidated()
	return nil
}

// flushTimeout bounds flush.
const flushTimeout = 10 * time.Second

// unprepare unprepares the statements pgx's stdlib prepared (their map key is their text)
// whose text is not in keep; all of them with keep nil. It reports false when it could not
// hand them to pgx's statement cache for deallocation (no statement cache, another layout).
func (p pgxCaches) unprepare(keep []string) bool {
	if p.prepared.Len() == 0 {
		return true
	}
	c := cacheOf(p.stmts)
	if c == nil {
		return false
	}
	cv := reflect.ValueOf(c)
	if cv.Kind() != reflect.Pointer || cv.Elem().Kind() != reflect.Struct {
		return false
	}
	inv := cv.Elem().FieldByName("invalidStmts")
	if !inv.IsValid() || inv.Kind() != reflect.Slice || inv.Type().Elem() != p.prepared.Type().Elem() {
		return false
	}
	inv = reflect.NewAt(inv.Type(), unsafe.Pointer(inv.UnsafeAddr())).Elem()
	var drop []reflect.Value
	it := p.prepared.MapRange()
next:
	for it.Next() {
		k, sd := it.Key(), it.Value()
		if sd.IsNil() || sd.Interface().(*pgconn.StatementDescription).SQL != k.String() {
			continue // prepared under a name of its own (pgx's API through sql.Conn.Raw)
		}
		for _, u := range keep {
			if u == k.String() {
				continue next
			}
		}
		drop = append(drop, k)
		inv.Set(reflect.Append(inv, sd))
	}
	for _, k := range drop {
		p.prepared.SetMapIndex(k, reflect.Value{})
	}
	return true
}

func cacheOf(f reflect.Value) pgxCache {
	if !f.IsValid() || f.IsNil() {
		return nil
	}
	c, _ := f.Interface().(pgxCache)
	return c
}

// invalidateAll invalidates every cached statement and description.
func (p pgxCaches) invalidateAll() {
	for _, f := range [...]reflect.Value{p.stmts, p.descs} {
		if c := cacheOf(f); c != nil && c.Len() > 0 {
			c.InvalidateAll()
		}
	}
}

// invalidateExcept invalidates every cached statement and description whose text is not in
// keep. When the cache's keys cannot be listed it invalidates them all.
func (p pgxCaches) invalidateExcept(keep []string) {
	for _, f := range [...]reflect.Value{p.stmts, p.descs} {
		c := cacheOf(f)
		if c == nil || c.Len() == 0 {
			continue
		}
		keys, ok := cacheKeys(c)
		if !ok {
			c.InvalidateAll()
			continue
		}
	next:
		for _, k := range keys {
			for _, u := range keep {
				if u == k {
					continue next
				}
			}
			c.Invalidate(k)
		}
	}
}

// cacheKeys lists the texts in pgx's LRU cache (its map m keyed by statement text).
func cacheKeys(c pgxCache) ([]string, bool) {
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	m := v.Elem().FieldByName("m")
	if !m.IsValid() || m.Kind() != reflect.Map || m.Type().Key().Kind() != reflect.String {
		return nil, false
	}
	keys := make([]string, 0, m.Len())
	it := m.MapRange()
	for it.Next() {
		keys = append(keys, it.Key().String())
	}
	return keys, true
}
