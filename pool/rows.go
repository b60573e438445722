package pool

import (
	"database/sql/driver"
	"io"
	"reflect"
)

// rows wraps every result set a borrower reads, so that a fatal error from Next, NextResultSet
// or Close is observed like one from any other call (the connection is then never handed out
// again, and a server-gone error makes the pool probe its idle connections): go-sql-driver/mysql
// keeps its connection open, and IsValid true, after an error packet in the middle of a result
// (1053 on shutdown, 1927 on KILL). A result read through a cached statement on the caller's
// behalf (a parameterized QueryContext the driver answered with driver.ErrSkip) also holds its
// statement until the rows are closed.
//
// Each borrow's conn has one rows value it reuses, so that observing costs no allocation on
// the common path of one open result set at a time (all a MySQL connection can stream); a second
// one open at once gets its own.
//
// It implements every optional driver.Rows interface database/sql looks for, each falling back
// to exactly what database/sql does when the driver's rows lack it: no next result set, a scan
// type of any, and "not available" for length, nullability and precision.
type rows struct {
	driver.Rows
	c  *conn       // the borrow whose connection errors are observed
	cs *cachedStmt // with ds, the statement released on Close (queryCached); nil ds: none
	ds driver.Stmt
}

var (
	_ driver.RowsNextResultSet              = (*rows)(nil)
	_ driver.RowsColumnTypeScanType         = (*rows)(nil)
	_ driver.RowsColumnTypeDatabaseTypeName = (*rows)(nil)
	_ driver.RowsColumnTypeLength           = (*rows)(nil)
	_ driver.RowsColumnTypeNullable         = (*rows)(nil)
	_ driver.RowsColumnTypePrecisionScale   = (*rows)(nil)
)

// wrapRows returns dr wrapped for observation, in the conn's own rows value when it is free.
func (c *conn) wrapRows(dr driver.Rows, cs *cachedStmt, ds driver.Stmt) driver.Rows {
	r := &c.rw
	if c.rwBusy {
		r = new(rows) // a second result set open on the same borrow
	} else {
		c.rwBusy = true
	}
	*r = rows{Rows: dr, c: c, cs: cs, ds: ds}
	return r
}

// observe reports err, unless the borrow that produced the rows has ended (database/sql closes
// rows before it gives a connection back, so that does not happen through it).
func (r *rows) observe(err error) {
	if c := r.c; c != nil && !c.closed {
		c.observe(err)
	}
}

func (r *rows) Next(dest []driver.Value) error {
	err := r.Rows.Next(dest)
	if err != nil && err != io.EOF {
		r.observe(err)
	}
	return err
}

func (r *rows) Close() error {
	err := r.Rows.Close()
	if err != nil {
		r.observe(err)
	}
	if r.ds != nil {
		releaseStmt(r.cs, r.ds)
		r.cs, r.ds = nil, nil
	}
	if c := r.c; c != nil && r == &c.rw {
		c.rwBusy = false
	}
	return err
}

func (r *rows) HasNextResultSet() bool {
	if n, ok := r.Rows.(driver.RowsNextResultSet); ok {
		return n.HasNextResultSet()
	}
	return false
}

func (r *rows) NextResultSet() error {
	if n, ok := r.Rows.(driver.RowsNextResultSet); ok {
		err := n.NextResultSet()
		if err != nil && err != io.EOF {
			r.observe(err)
		}
		return err
	}
	return io.EOF
}

var anyType = reflect.TypeFor[any]()

func (r *rows) ColumnTypeScanType(i int) reflect.Type {
	if t, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return t.ColumnTypeScanType(i)
	}
	return anyType
}

func (r *rows) ColumnTypeDatabaseTypeName(i int) string {
	if t, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *rows) ColumnTypeLength(i int) (int64, bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeLength); ok {
		return t.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *rows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeNullable); ok {
		return t.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *rows) ColumnTypePrecisionScale(i int) (precision, scale int64, ok bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypePrecisionScale); ok {
		return t.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}
