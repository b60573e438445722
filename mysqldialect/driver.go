package mysqldialect

import (
	"context"
	"database/sql/driver"
)

// queryDriver runs a query without arguments on a driver connection, with database/sql's
// fallback (prepare, then query the statement) for a driver without QueryerContext.
func queryDriver(ctx context.Context, dc driver.Conn, q string) (driver.Rows, error) {
	if qc, ok := dc.(driver.QueryerContext); ok {
		rows, err := qc.QueryContext(ctx, q, nil)
		if err != driver.ErrSkip {
			return rows, err
		}
	}
	st, err := prepareDriver(ctx, dc, q)
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

// stmtRows closes the statement its rows came from with them.
type stmtRows struct {
	driver.Rows
	st driver.Stmt
}

func (r *stmtRows) Close() error {
	err := r.Rows.Close()
	_ = r.st.Close()
	return err
}

// execDriver runs one statement without arguments on a driver connection.
func execDriver(ctx context.Context, dc driver.Conn, q string) error {
	if ec, ok := dc.(driver.ExecerContext); ok {
		_, err := ec.ExecContext(ctx, q, nil)
		if err != driver.ErrSkip {
			return err
		}
	}
	st, err := prepareDriver(ctx, dc, q)
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

// prepareDriver prepares q, with database/sql's fallback for a driver without
// ConnPrepareContext.
func prepareDriver(ctx context.Context, dc driver.Conn, q string) (driver.Stmt, error) {
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
