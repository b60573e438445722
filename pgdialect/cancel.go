package pgdialect

import (
	"context"
	"database/sql/driver"
	"reflect"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlpool/sqlpool/internal/rawconn"
	"github.com/sqlpool/sqlpool/pool"
)

var _ pool.ServerCancel = dialect{}

// NewCancellableSession is NewSession plus the session's backend PID, which both drivers learn
// at connect (BackendKeyData) and which therefore costs no round trip: pgx's PgConn().PID(),
// lib/pq's conn.pid read by reflection. It is 0 for another driver's connection, which is then
// not cancelled on the server.
func (d dialect) NewCancellableSession(ctx context.Context, dc driver.Conn) (pool.SessionTracker, int64, error) {
	t, err := d.NewSession(ctx, dc)
	if err != nil {
		return nil, 0, err
	}
	return t, backendPID(dc), nil
}

// Cancel runs SELECT pg_cancel_backend(id) on side (a role may cancel its own backends).
func (dialect) Cancel(ctx context.Context, side driver.Conn, id int64) error {
	rows, err := rawconn.Query(ctx, side, "SELECT pg_cancel_backend("+strconv.FormatInt(id, 10)+")")
	if err != nil {
		return err
	}
	return rows.Close()
}

// Running selects ids from pg_stat_activity on side: a backend is listed until it exited.
func (dialect) Running(ctx context.Context, side driver.Conn, ids []int64) (map[int64]bool, error) {
	return rawconn.IDsPresent(ctx, side, "SELECT pid FROM pg_stat_activity WHERE pid IN ", "pg_stat_activity.pid", ids)
}

// backendPID returns dc's backend PID, or 0 when it cannot be told.
func backendPID(dc driver.Conn) int64 {
	if c, ok := dc.(*stdlib.Conn); ok {
		return int64(c.Conn().PgConn().PID())
	}
	if idx, ok := pqPIDField(reflect.TypeOf(dc)); ok {
		return reflect.ValueOf(dc).Elem().Field(idx).Int()
	}
	return 0
}

var pqPID struct {
	once sync.Once
	typ  reflect.Type
	idx  int
	ok   bool
}

// pqPIDField finds lib/pq's unexported conn.pid (from BackendKeyData).
func pqPIDField(t reflect.Type) (int, bool) {
	if !isPqType(t) {
		return 0, false
	}
	pqPID.once.Do(func() {
		f, ok := t.Elem().FieldByName("pid")
		if ok && f.Type.Kind() == reflect.Int && len(f.Index) == 1 {
			pqPID.typ, pqPID.idx, pqPID.ok = t, f.Index[0], true
		}
	})
	return pqPID.idx, pqPID.ok && pqPID.typ == t
}
