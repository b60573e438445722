package main

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	gmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/internal/testutil"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/retry"
)

// TestExample runs the example as `go run ./app/examples/gorm` does, on the embedded server.
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

// TestExampleMariaDB runs the example as `go run ./app/examples/gorm -dsn "$MYSQL_TEST_DSN"` does.
func TestExampleMariaDB(t *testing.T) {
	if err := run(mariaDSN(t)); err != nil {
		t.Fatal(err)
	}
}

// TestRepriceRetriedAfterDeadlockMariaDB: reprice's GORM transaction is made a real InnoDB
// deadlock victim (1213) on MariaDB; retry.TxWith rolls it back and runs it again, and both
// transactions' changes are applied once.
func TestRepriceRetriedAfterDeadlockMariaDB(t *testing.T) {
	cfg, err := mysql.ParseDSN(mariaDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(connector, pool.Config{Name: "gorm-deadlock", MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sdb := p.OpenDB()
	defer sdb.Close()
	db, err := gorm.Open(gmysql.New(gmysql.Config{Conn: sdb}), &gorm.Config{PrepareStmt: true, Logger: logger.Default.LogMode(logger.Silent)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, q := range []string{
		"DROP TABLE IF EXISTS example_gorm_products",
		"CREATE TABLE example_gorm_products (id BIGINT PRIMARY KEY AUTO_INCREMENT, code VARCHAR(32) NOT NULL, price INT NOT NULL, KEY (code)) ENGINE=InnoDB",
		"INSERT INTO example_gorm_products (code, price) VALUES ('D42', 100), ('E17', 250), ('F99', 5), ('G01', 7), ('H02', 9)",
	} {
		if _, err := sdb.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	defer sdb.ExecContext(context.Background(), "DROP TABLE IF EXISTS example_gorm_products") //nolint:errcheck

	// The other transaction changes four rows (E17 among them), so InnoDB picks reprice's
	// lighter transaction as the victim of the deadlock to come.
	other, err := sdb.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()       //nolint:errcheck
	for id := 2; id <= 5; id++ { // by primary key: a lock on that row only
		if _, err := other.ExecContext(ctx, "UPDATE example_gorm_products SET price = price + 1000 WHERE id = ?", id); err != nil {
			t.Fatal(err)
		}
	}

	var retried []error
	pol := retry.Policy{Dialect: p.Dialect(), Budget: retry.NewBudget(retry.BudgetConfig{})}
	pol.Observer = &retry.Hooks{OnRetry: func(_ retry.Op, _ int, err error, _ time.Duration) { retried = append(retried, err) }}
	done := make(chan error, 1)
	go func() { done <- reprice(ctx, db, pol, "D42", "E17", 10) }() // takes D42 (id 1), then waits for E17

	waitStatement(t, ctx, sdb, "%SET `price`=price + ?%", "reprice to wait for E17's row lock")
	// Asking for D42 (id 1) closes the cycle: InnoDB rolls reprice's transaction back (1213), and this
	// statement gets D42.
	if _, err := other.ExecContext(ctx, "UPDATE example_gorm_products SET price = price + 1000 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("reprice = %v; want nil after a retry", err)
	}
	var me *mysql.MySQLError
	if len(retried) != 1 || !errors.As(retried[0], &me) || me.Number != 1213 {
		t.Fatalf("retried after %v; want one retry after 1213", retried)
	}
	t.Logf("retried once after: %v", retried[0])
	var d42, e17 Product
	if err := db.WithContext(ctx).Where("code = ?", "D42").First(&d42).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.WithContext(ctx).Where("code = ?", "E17").First(&e17).Error; err != nil {
		t.Fatal(err)
	}
	if d42.Price != 100-10+1000 || e17.Price != 250+10+1000 {
		t.Fatalf("D42 %d, E17 %d; want %d and %d (each transaction applied once)", d42.Price, e17.Price, 100-10+1000, 250+10+1000)
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
