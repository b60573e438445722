package pool_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
)

// A named lock taken by a borrower whose connection the release then discards (here: Raw use,
// an unknown session state) must not be visible once the release returned: the pool releases
// the locks before it closes the connection, since the server frees a closed connection's
// locks only after its socket closes. Checked right after each Close, from another
// connection, 100 times.
func TestNamedLockReleasedBeforeDiscard(t *testing.T) {
	mysqltest.RequireMariaDB(t, "named locks (the embedded server's are per process, not per session)")
	dsn := mysqltest.DSN(t)
	ctx := context.Background()
	other := sql.OpenDB(mysqlConnector(t, dsn))
	defer other.Close()
	p := newMySQLPool(t, dsn, pool.Config{MaxConns: 1})
	db := p.OpenDB()
	defer db.Close()
	held := 0
	for i := 0; i < 100; i++ {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got int
		if err := c.QueryRowContext(ctx, "SELECT GET_LOCK('sqlpool_discard_lock', 0)").Scan(&got); err != nil || got != 1 {
			t.Fatalf("GET_LOCK = %d, %v", got, err)
		}
		if err := c.Raw(func(dc any) error { _ = pool.Unwrap(dc); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		var used sql.NullInt64
		if err := other.QueryRowContext(ctx, "SELECT IS_USED_LOCK('sqlpool_discard_lock')").Scan(&used); err != nil {
			t.Fatal(err)
		}
		if used.Valid {
			held++
		}
	}
	if held > 0 {
		t.Fatalf("the lock was still held after %d of 100 releases that discarded its connection", held)
	}
	if st := p.Stats(); st.Closed < 100 {
		t.Fatalf("%d connections closed; want 100 (each discarded)", st.Closed)
	}
}
