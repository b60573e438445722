package pool_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
)

// A COMMIT sent to a server that stopped answering ends at the deadline of the context the
// transaction began with, not when the server answers again (go-sql-driver's Tx.Commit
// watches no context; the pool commits through ExecContext). Plain database/sql, beside it,
// waits until the server answers.
func TestCommitEndsAtTheCallersDeadlineOnASilentServer(t *testing.T) {
	mysqltest.RequireMariaDB(t, "a COMMIT on a real server behind the fault proxy")
	dsn := mysqltest.DSN(t)
	const deadline = 500 * time.Millisecond
	const stall = 3 * time.Second
	table := fmt.Sprintf("commitctx_%d", time.Now().UnixNano())
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec("CREATE TABLE " + table + " (id INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	defer admin.Exec("DROP TABLE " + table)

	commitOn := func(t *testing.T, db *sql.DB, px *mysqltest.Proxy, id int) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s VALUES (%d)", table, id)); err != nil {
			t.Fatal(err)
		}
		px.Blackhole(true)
		resume := time.AfterFunc(stall, func() { px.Blackhole(false) })
		defer resume.Stop()
		defer px.Blackhole(false)
		start := time.Now()
		err = tx.Commit()
		return time.Since(start), err
	}

	t.Run("pool", func(t *testing.T) {
		px := mysqltest.NewProxy(t, mysqlAddrOf(t, dsn))
		p := newMySQLPool(t, px.DSN(dsn), pool.Config{Name: "commitctx", MaxConns: 2})
		db := p.OpenDB()
		defer db.Close()
		took, err := commitOn(t, db, px, 1)
		if err == nil {
			t.Fatalf("COMMIT on a silent server succeeded after %v", took)
		}
		var unknown *pool.CommitUnknownError
		if !errors.As(err, &unknown) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("COMMIT on a silent server: %v, want a *pool.CommitUnknownError matching context.DeadlineExceeded", err)
		}
		if took > deadline+time.Second {
			t.Errorf("COMMIT on a silent server returned after %v (%v), beyond the caller's %v deadline", took, err, deadline)
		}
		t.Logf("pool: COMMIT returned after %v: %v", took, err)
		// The pool goes on: a new transaction commits once the server answers.
		if _, err := db.Exec(fmt.Sprintf("INSERT INTO %s VALUES (2)", table)); err != nil {
			t.Fatalf("after the stall: %v", err)
		}
	})
	t.Run("database-sql", func(t *testing.T) {
		px := mysqltest.NewProxy(t, mysqlAddrOf(t, dsn))
		db, err := sql.Open("mysql", px.DSN(dsn))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		took, err := commitOn(t, db, px, 3)
		if took < stall-500*time.Millisecond {
			t.Errorf("plain database/sql's COMMIT returned after %v (%v): expected it to wait for the server (%v)", took, err, stall)
		}
		t.Logf("database/sql: COMMIT returned after %v: %v", took, err)
	})
}
