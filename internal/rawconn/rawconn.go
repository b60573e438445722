// Package rawconn runs statements without arguments directly on a driver.Conn, with
// database/sql's fallbacks for drivers that lack the context interfaces. Package pool uses it
// for release plans and the server-side cancel's side connection; the dialect packages for
// their baselines and cancels. It imports no driver.
package rawconn

import (
	"context"
	"database/sql/driver"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// Query runs q on dc and returns its rows. A driver without QueryerContext (or one that answers
// driver.ErrSkip) gets a prepared statement, closed when the rows are.
func Query(ctx context.Context, dc driver.Conn, q string) (driver.Rows, error) {
	if qc, ok := dc.(driver.QueryerContext); ok {
		rows, err := qc.QueryContext(ctx, q, nil)
		if err != driver.ErrSkip {
			return rows, err
		}
	}
	st, err := Prepare(ctx, dc, q)
	if err != nil {
		return nil, err
	}
	var r driver.Rows
	if sq, ok := st.(driver.StmtQueryContext); ok {
		r, err = sq.QueryContext(ctx, nil)
	} else if err = ctx.Err(); err == nil {
		r, err = st.Query(nil) //nolint:staticcheck // the legacy path is the point
	}
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return &stmtRows{Rows: r, st: st}, nil
}

// stmtRows closes the statement of Query's fallback with its rows.
type stmtRows struct {
	driver.Rows
	st driver.Stmt
}

func (r *stmtRows) Close() error {
	err := r.Rows.Close()
	_ = r.st.Close()
	return err
}

// Exec runs q on dc, with the same fallback as Query.
func Exec(ctx context.Context, dc driver.Conn, q string) error {
	if ec, ok := dc.(driver.ExecerContext); ok {
		_, err := ec.ExecContext(ctx, q, nil)
		if err != driver.ErrSkip {
			return err
		}
	}
	st, err := Prepare(ctx, dc, q)
	if err != nil {
		return err
	}
	defer st.Close()
	if se, ok := st.(driver.StmtExecContext); ok {
		_, err = se.ExecContext(ctx, nil)
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err = st.Exec(nil) //nolint:staticcheck // the legacy path is the point
	return err
}

// Prepare prepares q on dc, with database/sql's fallback for a driver without
// ConnPrepareContext (a statement prepared after ctx ended is closed and ctx's error returned).
func Prepare(ctx context.Context, dc driver.Conn, q string) (driver.Stmt, error) {
	if pc, ok := dc.(driver.ConnPrepareContext); ok {
		return pc.PrepareContext(ctx, q)
	}
	ds, err := dc.Prepare(q)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		_ = ds.Close()
		return nil, err
	}
	return ds, nil
}

// IDsPresent runs prefix followed by "(id1,id2,…)" on dc — a query whose one column lists those
// of ids that still exist, such as "SELECT ID FROM information_schema.PROCESSLIST WHERE ID IN " —
// and returns them as a set. column names the column in errors.
func IDsPresent(ctx context.Context, dc driver.Conn, prefix, column string, ids []int64) (map[int64]bool, error) {
	var q strings.Builder
	q.WriteString(prefix)
	q.WriteByte('(')
	for i, id := range ids {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(strconv.FormatInt(id, 10))
	}
	q.WriteByte(')')
	rows, err := Query(ctx, dc, q.String())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	present := make(map[int64]bool, len(ids))
	dest := make([]driver.Value, 1)
	for {
		if err := rows.Next(dest); err != nil {
			if err == io.EOF {
				return present, nil
			}
			return nil, err
		}
		id, err := Int64(dest[0])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", column, err)
		}
		present[id] = true
	}
}

// Int64 reads an integer column value as drivers return it: int64, uint64, or its decimal text.
func Int64(v driver.Value) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case uint64:
		return int64(v), nil
	case []byte:
		return strconv.ParseInt(string(v), 10, 64)
	case string:
		return strconv.ParseInt(v, 10, 64)
	}
	return 0, fmt.Errorf("unexpected %T", v)
}

// PkgPath is the import path of the package that defines v's type (through one pointer), with a
// vendored path's prefix up to "/vendor/" removed: how the pool and the dialects recognize a
// driver's connector, connection or transaction without importing the driver. "" for nil.
func PkgPath(v any) string {
	t := reflect.TypeOf(v)
	if t == nil {
		return ""
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	p := t.PkgPath()
	if i := strings.LastIndex(p, "/vendor/"); i >= 0 {
		p = p[i+len("/vendor/"):]
	}
	return p
}
