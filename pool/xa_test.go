package pool_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
)

// A borrower that prepares an XA transaction and returns the connection: the release plan
// discards the connection (txstate plans a discard for any open XA transaction), but on
// MariaDB ≥ 10.5 a prepared XA transaction survives its connection's disconnect. It stays in
// XA RECOVER, holding its locks, until someone runs XA COMMIT or XA ROLLBACK with its xid.
// The pool cannot end it (it cannot know whether the coordinator will commit it); this test
// pins down that behaviour, which docs/operations.md describes.
func TestPreparedXAOutlivesDiscardedConnMariaDB(t *testing.T) {
	mysqltest.RequireMariaDB(t, "prepared XA transactions surviving a disconnect are InnoDB/MariaDB ≥ 10.5 behaviour")
	ctx := context.Background()
	p := newMySQLPool(t, mysqltest.DSN(t), pool.Config{Name: "xa", MaxConns: 2})
	db := p.OpenDB()
	defer db.Close()
	id := time.Now().UnixNano() % 1_000_000_000 // its own row: suites running at once do not wait on each other
	xid := fmt.Sprintf("sqlpool-xa-%d", id)
	mustExec(t, db, "CREATE TABLE IF NOT EXISTS xa_probe (id BIGINT PRIMARY KEY) ENGINE=InnoDB")

	before := p.Stats()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var thread int64
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&thread); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"XA START '" + xid + "'", fmt.Sprintf("INSERT INTO xa_probe VALUES (%d)", id),
		"XA END '" + xid + "'", "XA PREPARE '" + xid + "'"} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	_ = c.Close()
	defer func() { _, _ = db.ExecContext(ctx, "XA ROLLBACK '"+xid+"'") }() // if the test fails before its own
	if after := p.Stats(); after.Closed-before.Closed != 1 {
		t.Fatalf("the connection with a prepared XA transaction was not discarded (closed %d)", after.Closed-before.Closed)
	}
	// Once the server has finished with the closed connection (until then XA ROLLBACK from
	// another session answers 1397 XAER_NOTA), another connection still sees the transaction
	// prepared, and must end it.
	waitFor(t, "the discarded connection's thread gone", func() bool {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", thread).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	found := false
	waitFor(t, "the prepared XA transaction listed by XA RECOVER", func() bool {
		rows, err := db.QueryContext(ctx, "XA RECOVER")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var format, gl, bl int
			var data string
			if err := rows.Scan(&format, &gl, &bl, &data); err != nil {
				t.Fatal(err)
			}
			found = found || data == xid
		}
		return found
	})
	var rbErr error
	waitFor(t, "XA ROLLBACK from another connection accepted", func() bool {
		_, rbErr = db.ExecContext(ctx, "XA ROLLBACK '"+xid+"'")
		var me *mysql.MySQLError
		if errors.As(rbErr, &me) && me.Number == 1397 { // XAER_NOTA: not detached yet
			return false
		}
		return true
	})
	if rbErr != nil {
		t.Fatalf("XA ROLLBACK: %v", rbErr)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM xa_probe WHERE id = ?", id).Scan(&n); err != nil || n != 0 {
		t.Errorf("after XA ROLLBACK: %d rows, %v; want 0", n, err)
	}
}
