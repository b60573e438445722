package replica

import (
	"context"
	"database/sql/driver"
	"reflect"
	"strings"
)

// writes reports whether a query run with QueryContext on the writer outside a transaction may
// commit a write (INSERT … RETURNING, UPDATE … RETURNING, a CTE that writes, CALL): anything but
// a statement that starts with SELECT, SHOW, DESCRIBE, EXPLAIN, VALUES or TABLE after blanks
// and comments. Its position is then read when its rows are closed.
func writes(q string) bool {
	for {
		q = strings.TrimLeft(q, " \t\r\n(")
		switch {
		case strings.HasPrefix(q, "--") || strings.HasPrefix(q, "#"):
			i := strings.IndexByte(q, '\n')
			if i < 0 {
				return false
			}
			q = q[i+1:]
			continue
		case strings.HasPrefix(q, "/*"):
			i := strings.Index(q, "*/")
			if i < 0 {
				return false
			}
			q = q[i+2:]
			continue
		}
		break
	}
	end := strings.IndexAny(q, " \t\r\n(;")
	if end < 0 {
		end = len(q)
	}
	switch strings.ToUpper(q[:end]) {
	case "SELECT", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "VALUES", "TABLE":
		return false
	}
	return true
}

// learnRows reads the commit position of an autocommit statement that returned rows once they
// are closed (the connection cannot run another statement before).
type learnRows struct {
	driver.Rows
	c    *conn
	ctx  context.Context
	done bool
}

func (r *learnRows) Close() error {
	err := r.Rows.Close()
	if !r.done {
		r.done = true
		if err == nil && r.c.be != nil {
			r.c.learn(r.ctx)
		} else {
			r.c.r.committed(r.c.r.tokenFor(r.ctx), nil)
		}
	}
	return err
}

// The optional interfaces database/sql asks of rows, with its own answers when the driver's
// rows lack them.

func (r *learnRows) HasNextResultSet() bool {
	if x, ok := r.Rows.(driver.RowsNextResultSet); ok {
		return x.HasNextResultSet()
	}
	return false
}

func (r *learnRows) NextResultSet() error {
	if x, ok := r.Rows.(driver.RowsNextResultSet); ok {
		return x.NextResultSet()
	}
	return nil
}

func (r *learnRows) ColumnTypeScanType(i int) reflect.Type {
	if x, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return x.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}

func (r *learnRows) ColumnTypeDatabaseTypeName(i int) string {
	if x, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return x.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *learnRows) ColumnTypeLength(i int) (int64, bool) {
	if x, ok := r.Rows.(driver.RowsColumnTypeLength); ok {
		return x.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *learnRows) ColumnTypeNullable(i int) (bool, bool) {
	if x, ok := r.Rows.(driver.RowsColumnTypeNullable); ok {
		return x.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *learnRows) ColumnTypePrecisionScale(i int) (int64, int64, bool) {
	if x, ok := r.Rows.(driver.RowsColumnTypePrecisionScale); ok {
		return x.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}
