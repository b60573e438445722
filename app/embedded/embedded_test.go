package embedded

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"go.uber.org/goleak"

	_ "github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/testutil"
)

func openDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("open %q: %v", dsn, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	return testutil.Context(t, d)
}

func mustExec(t *testing.T, ex interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, q string, args ...any) {
	t.Helper()
	if _, err := ex.ExecContext(ctxT(t, 10*time.Second), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// TestSupports checks the SQL the embedded server supports and logs
// what it does not.
func TestSupports(t *testing.T) {
	dsn, stop, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	db := openDB(t, dsn)
	ctx := ctxT(t, 30*time.Second)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	var one int
	if err := conn.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}

	mustExec(t, conn, "CREATE TABLE supports_t (id INT PRIMARY KEY, v VARCHAR(20))")
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS supports_t") })
	mustExec(t, conn, "INSERT INTO supports_t VALUES (1, 'a'), (2, 'b')")
	var v string
	if err := conn.QueryRowContext(ctx, "SELECT v FROM supports_t WHERE id = ?", 2).Scan(&v); err != nil || v != "b" {
		t.Fatalf("prepared SELECT = %q, %v", v, err)
	}

	// Transactions: commit keeps, rollback discards.
	mustExec(t, conn, "BEGIN")
	mustExec(t, conn, "INSERT INTO supports_t VALUES (3, 'c')")
	mustExec(t, conn, "COMMIT")
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, tx, "INSERT INTO supports_t VALUES (4, 'd')")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM supports_t").Scan(&n); err != nil || n != 3 {
		t.Fatalf("rows after commit and rollback = %d, %v; want 3", n, err)
	}
	rtx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatalf("read-only READ COMMITTED tx: %v", err)
	}
	_ = rtx.Rollback()

	// Session state.
	var autocommit int
	var dbname, iso string
	if err := conn.QueryRowContext(ctx, "SELECT @@autocommit, DATABASE(), @@transaction_isolation").Scan(&autocommit, &dbname, &iso); err != nil {
		t.Fatal(err)
	}
	if autocommit != 1 || dbname != "test" || iso != "REPEATABLE-READ" {
		t.Fatalf("@@autocommit, DATABASE(), @@transaction_isolation = %d, %q, %q", autocommit, dbname, iso)
	}
	if err := conn.QueryRowContext(ctx, "SELECT @@tx_isolation").Scan(&iso); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"SET autocommit = 0", "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
		"SET SESSION wait_timeout = 7", "SET @u = 42", "SET NAMES utf8mb4",
	} {
		mustExec(t, conn, q)
	}
	var wt, u int
	if err := conn.QueryRowContext(ctx, "SELECT @@autocommit, @@transaction_isolation, @@wait_timeout, @u").Scan(&autocommit, &iso, &wt, &u); err != nil {
		t.Fatal(err)
	}
	if autocommit != 0 || iso != "READ-COMMITTED" || wt != 7 || u != 42 {
		t.Fatalf("session state = %d %q %d %d", autocommit, iso, wt, u)
	}
	mustExec(t, conn, "SET autocommit = 1")

	// Named locks and table locks.
	var got int
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK('mysqltest_lock', 1)").Scan(&got); err != nil || got != 1 {
		t.Fatalf("GET_LOCK = %d, %v", got, err)
	}
	if err := conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK('mysqltest_lock')").Scan(&got); err != nil || got != 1 {
		t.Fatalf("RELEASE_LOCK = %d, %v", got, err)
	}
	mustExec(t, conn, "LOCK TABLES supports_t READ")
	mustExec(t, conn, "UNLOCK TABLES")

	// USE switches the current database.
	mustExec(t, conn, "CREATE DATABASE IF NOT EXISTS supports_other")
	mustExec(t, conn, "USE supports_other")
	if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbname); err != nil || dbname != "supports_other" {
		t.Fatalf("DATABASE() after USE = %q, %v", dbname, err)
	}
	mustExec(t, conn, "USE test")
	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}

	// Known gaps of go-mysql-server v0.20.0 with the in-memory database.
	for _, q := range []string{
		"CREATE TEMPORARY TABLE supports_tmp (id INT)",
		"RESET CONNECTION",
		"DO 1",
		"SELECT @@innodb_read_only",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Logf("not supported by the embedded server: %s: %v", q, err)
		} else {
			t.Logf("supported by the embedded server: %s", q)
		}
	}
}

// TestStartStop checks that stop closes open client connections and
// leaves no goroutine behind.
func TestStartStop(t *testing.T) {
	baseline := goleak.IgnoreCurrent()

	dsn, stop, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 10*time.Second)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if err := conn.PingContext(ctx); err == nil {
		t.Fatal("ping on a connection to a stopped server succeeded")
	}
	_ = conn.Close()
	_ = db.Close()
	goleak.VerifyNone(t, baseline)
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
