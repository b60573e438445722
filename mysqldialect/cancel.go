package mysqldialect

import (
	"context"
	"database/sql/driver"
	"io"
	"strconv"

	"github.com/sqlpool/sqlpool/internal/rawconn"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/txstate"
	"github.com/sqlpool/sqlpool/validate"
)

// sessionIDColumn is the server's id of the current session.
const sessionIDColumn = "CONNECTION_ID()"

// NewCancellableSession records the session baseline and the session id (CONNECTION_ID(),
// appended to the baseline query) in the same round trip. A server (or stub) that rejects the
// longer query, or answers it with another number of columns, gets the plain baseline query
// next, and id is then 0: its connections are not cancelled on the server.
func (d dialect) NewCancellableSession(ctx context.Context, dc driver.Conn) (pool.SessionTracker, int64, error) {
	b, id, ok, err := baselineWithID(ctx, dc, sessionIDColumn)
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		t, err := d.NewSession(ctx, dc)
		return t, 0, err
	}
	return newTracker(dc, b, true), id, nil
}

// Cancel runs KILL QUERY id on side.
func (dialect) Cancel(ctx context.Context, side driver.Conn, id int64) error {
	return rawconn.Exec(ctx, side, "KILL QUERY "+strconv.FormatInt(id, 10))
}

// Running selects ids from information_schema.PROCESSLIST on side.
func (dialect) Running(ctx context.Context, side driver.Conn, ids []int64) (map[int64]bool, error) {
	return rawconn.IDsPresent(ctx, side, "SELECT ID FROM information_schema.PROCESSLIST WHERE ID IN ", "PROCESSLIST.ID", ids)
}

// baselineWithID runs txstate.BaselineQuery with col appended. ok is false when the server
// rejected it with an ordinary error or its row is not as expected; err is a fatal error.
func baselineWithID(ctx context.Context, dc driver.Conn, col string) (b txstate.Baseline, id int64, ok bool, err error) {
	rows, err := rawconn.Query(ctx, dc, txstate.BaselineQuery+", "+col)
	if err != nil {
		if v := validate.Check(err, validate.Session{}); v.Fatal || ctx.Err() != nil {
			return b, 0, false, err
		}
		return b, 0, false, nil
	}
	defer rows.Close()
	n := len(rows.Columns())
	if n != txstate.BaselineColumns+1 {
		return b, 0, false, nil
	}
	dest := make([]driver.Value, n)
	if err := rows.Next(dest); err != nil {
		if v := validate.Check(err, validate.Session{}); err != io.EOF && (v.Fatal || ctx.Err() != nil) {
			return b, 0, false, err
		}
		return b, 0, false, nil
	}
	if b, err = txstate.BaselineFromRow(dest[:n-1]); err != nil {
		return b, 0, false, nil
	}
	if id, err = rawconn.Int64(dest[n-1]); err != nil || id <= 0 {
		return b, 0, false, nil
	}
	return b, id, true, nil
}
