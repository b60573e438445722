package pool_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
)

// With ServerStatementDeadline a statement whose context deadline passes mid-statement is
// stopped by the server (MariaDB's max_statement_time, error 1969) shortly before the
// deadline: the connection stays open and usable, nothing is killed or dialled. Without it the
// driver closes the socket at the deadline and the pool closes the connection.
func TestServerStatementDeadlineKeepsConnection(t *testing.T) {
	mysqltest.RequireMariaDB(t, "MariaDB's SET STATEMENT max_statement_time")
	dsn := mysqltest.DSN(t)
	for _, on := range []bool{true, false} {
		name := map[bool]string{true: "on", false: "off"}[on]
		t.Run(name, func(t *testing.T) {
			p := newMySQLPool(t, dsn, pool.Config{Name: "deadline-" + name, MaxConns: 1, ServerStatementDeadline: on})
			db := p.OpenDB()
			defer db.Close()
			cn, err := db.Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var id0 int64
			if err := cn.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id0); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			var n int64
			start := time.Now()
			err = cn.QueryRowContext(ctx, "SELECT SLEEP(5)").Scan(&n)
			took := time.Since(start)
			cancel()
			_ = cn.Close()
			if err == nil && n == 0 {
				t.Fatalf("SELECT SLEEP(5) with a 500ms deadline finished (%d)", n)
			}
			if took > 3*time.Second {
				t.Errorf("the statement ended after %v; want about 500ms", took)
			}
			if !on {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("off: error %v; want context.DeadlineExceeded", err)
				}
				return
			}
			var me *mysql.MySQLError
			if !errors.As(err, &me) || me.Number != 1969 {
				t.Fatalf("on: error %v; want MariaDB's 1969 (max_statement_time exceeded)", err)
			}
			if took < 300*time.Millisecond {
				t.Errorf("on: stopped after %v; want close to the 500ms deadline", took)
			}
			// The same session serves the next borrower: no close, no dial.
			var id1 int64
			if err := db.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id1); err != nil {
				t.Fatal(err)
			}
			if st := p.Stats(); id1 != id0 || st.Closed != 0 || st.Created != 1 {
				t.Errorf("after the stopped statement: session %d (was %d), %v; want the same session, nothing closed", id1, id0, st)
			}
			// The limit applied to that statement only: the session's own is unchanged.
			var mst float64
			if err := db.QueryRowContext(context.Background(), "SELECT @@max_statement_time").Scan(&mst); err != nil || mst != 0 {
				t.Errorf("session max_statement_time = %v (%v); want 0", mst, err)
			}
		})
	}
}
