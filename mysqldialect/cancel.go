package mysqldialect

import (
	"context"
	"database/sql/driver"
	"fmt"
	"io"
	"strconv"
	"strings"

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
	return newTracker(b, true), id, nil
}

// Cancel runs KILL QUERY id on side.
func (dialect) Cancel(ctx context.Context, side driver.Conn, id int64) error {
	return execDriver(ctx, side, "KILL QUERY "+strconv.FormatInt(id, 10))
}

// Running selects ids from information_schema.PROCESSLIST on side.
func (dialect) Running(ctx context.Context, side driver.Conn, ids []int64) (map[int64]bool, error) {
	var q strings.Builder
	q.WriteString("SELECT ID FROM information_schema.PROCESSLIST WHERE ID IN (")
	for i, id := range ids {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(strconv.FormatInt(id, 10))
	}
	q.WriteByte(')')
	rows, err := queryDriver(ctx, side, q.String())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	running := make(map[int64]bool, len(ids))
	dest := make([]driver.Value, 1)
	for {
		if err := rows.Next(dest); err != nil {
			if err == io.EOF {
				return running, nil
			}
			return nil, err
		}
		id, err := int64Value(dest[0])
		if err != nil {
			return nil, fmt.Errorf("PROCESSLIST.ID: %w", err)
		}
		running[id] = true
	}
}

// baselineWithID runs txstate.BaselineQuery with col appended. ok is false when the server
// rejected it with an ordinary error or its row is not as expected; err is a fatal error.
func baselineWithID(ctx context.Context, dc driver.Conn, col string) (b txstate.Baseline, id int64, ok bool, err error) {
	rows, err := queryDriver(ctx, dc, txstate.BaselineQuery+", "+col)
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
	if id, err = int64Value(dest[n-1]); err != nil || id <= 0 {
		return b, 0, false, nil
	}
	return b, id, true, nil
}

func int64Value(v driver.Value) (int64, error) {
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
