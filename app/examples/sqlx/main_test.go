package main

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/internal/testutil"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/retry"
)

// TestExample runs the example as `go run ./app/examples/sqlx` does, on the embedded server.
func TestExample(t *testing.T) {
	if err := run(""); err != nil {
		t.Fatal(err)
	}
}

// mariaDSN returns MYSQL_TEST_DSN, or skips (fails with SQLPOOL_REQUIRE_MARIADB=1).
func mariaDSN(t *testing.T) string {
	t.Helper()
	mysqltest.RequireMariaDB(t, "a real InnoDB deadlock")
	return os.Getenv(mysqltest.EnvDSN)
}

// TestExampleMariaDB runs the example as `go run ./app/examples/sqlx -dsn "$MYSQL_TEST_DSN"` does.
func TestExampleMariaDB(t *testing.T) {
	if err := run(mariaDSN(t)); err != nil {
		t.Fatal(err)
	}
}

// TestMoveRetriedAfterDeadlockMariaDB: move's transaction is made a real InnoDB deadlock victim
// (1213) on MariaDB; retry.TxWith rolls it back and runs it again, and both transactions' changes
// are applied once.
func TestMoveRetriedAfterDeadlockMariaDB(t *testing.T) {
	cfg, err := mysql.ParseDSN(mariaDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(connector, pool.Config{Name: "sqlx-deadlock", MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sdb := p.OpenDB()
	defer sdb.Close()
	db := sqlx.NewDb(sdb, "mysql")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db.MustExecContext(ctx, "DROP TABLE IF EXISTS example_sqlx_items")
	db.MustExecContext(ctx, "CREATE TABLE example_sqlx_items (id BIGINT PRIMARY KEY AUTO_INCREMENT, name VARCHAR(64) NOT NULL, qty INT NOT NULL, KEY (name)) ENGINE=InnoDB")
	defer db.ExecContext(context.Background(), "DROP TABLE IF EXISTS example_sqlx_items") //nolint:errcheck
	db.MustExecContext(ctx, "INSERT INTO example_sqlx_items (name, qty) VALUES ('apple', 3), ('pear', 5), ('plum', 7), ('fig', 9), ('kiwi', 11)")

	// The other transaction changes four rows (pear among them), so InnoDB picks move's
	// lighter transaction as the victim of the deadlock to come.
	other, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()       //nolint:errcheck
	for id := 2; id <= 5; id++ { // pear, plum, fig, kiwi, by primary key: a lock on that row only
		other.MustExecContext(ctx, "UPDATE example_sqlx_items SET qty = qty + 100 WHERE id = ?", id)
	}

	var retried []error
	pol := retry.Policy{Dialect: p.Dialect(), Budget: retry.NewBudget(retry.BudgetConfig{})}
	pol.Observer = &retry.Hooks{OnRetry: func(_ retry.Op, _ int, err error, _ time.Duration) { retried = append(retried, err) }}
	done := make(chan error, 1)
	go func() { done <- move(ctx, db, pol, "apple", "pear", 1) }() // takes apple, then waits for pear

	waitStatement(t, ctx, sdb, "%SET qty = qty + ?%", "move to wait for pear's row lock")
	// Asking for apple closes the cycle: InnoDB rolls move's transaction back (1213), and this
	// statement gets apple.
	other.MustExecContext(ctx, "UPDATE example_sqlx_items SET qty = qty + 100 WHERE id = 1") // apple
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("move = %v; want nil after a retry", err)
	}
	var me *mysql.MySQLError
	if len(retried) != 1 || !errors.As(retried[0], &me) || me.Number != 1213 {
		t.Fatalf("retried after %v; want one retry after 1213", retried)
	}
	t.Logf("retried once after: %v", retried[0])
	var apple, pear int
	if err := db.GetContext(ctx, &apple, "SELECT qty FROM example_sqlx_items WHERE name = 'apple'"); err != nil {
		t.Fatal(err)
	}
	if err := db.GetContext(ctx, &pear, "SELECT qty FROM example_sqlx_items WHERE name = 'pear'"); err != nil {
		t.Fatal(err)
	}
	if apple != 3-1+100 || pear != 5+1+100 {
		t.Fatalf("apple %d, pear %d; want %d and %d (each transaction applied once)", apple, pear, 3-1+100, 5+1+100)
	}
}

// waitStatement waits until a connection runs a statement whose text is like pattern: the
// transaction's second UPDATE, which shows that its first one is done and holds its row lock.
// (information_schema.PROCESSLIST, unlike INNODB_TRX, is not a cache refreshed at most every
// 100 ms.)
func waitStatement(t *testing.T, ctx context.Context, db *sql.DB, pattern, what string) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, what, func() bool {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE info LIKE ?", pattern).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
}
