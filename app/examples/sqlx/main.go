// Command sqlx runs github.com/jmoiron/sqlx on sqlpool: sqlx.NewDb wraps the pool's *sql.DB
// and everything else is plain sqlx — struct scanning, named statements, IN clauses,
// transactions, and transactions that retry.TxWith runs again on a deadlock. It starts an
// in-process MySQL-protocol server (the embedded go-mysql-server used by the tests); pass -dsn
// to use a real MySQL or MariaDB server instead.
//
//	go run ./app/examples/sqlx
//	go run ./app/examples/sqlx -dsn 'user:pass@tcp(127.0.0.1:3306)/test'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/sqlpool/sqlpool/app/embedded"
	_ "github.com/sqlpool/sqlpool/mysqldialect" // MySQL's pool.Dialect, registered on import
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/retry"
)

// move moves n units from one item to another in one transaction. retry.TxWith begins a
// *sqlx.Tx with db.BeginTxx, and commits it when the function returns nil; on a deadlock (1213),
// a lock wait timeout (1205) or a connection lost before COMMIT it rolls back and runs the
// whole function again. A COMMIT whose outcome is unknown is not run again: the error matches
// retry.ErrAmbiguousCommit.
func move(ctx context.Context, db *sqlx.DB, p retry.Policy, from, to string, n int) error {
	return retry.TxWith(ctx, db.BeginTxx, nil, p, func(ctx context.Context, tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, "UPDATE example_sqlx_items SET qty = qty - ? WHERE name = ?", n, from); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE example_sqlx_items SET qty = qty + ? WHERE name = ?", n, to)
		return err
	})
}

// Item is a row of example_sqlx_items; the db tags name its columns for sqlx.
type Item struct {
	ID   int64  `db:"id"`
	Name string `db:"name"`
	Qty  int    `db:"qty"`
}

func main() {
	dsn := flag.String("dsn", "", "go-sql-driver/mysql DSN; empty starts the embedded server")
	flag.Parse()
	if err := run(*dsn); err != nil {
		fmt.Fprintln(os.Stderr, "sqlx example:", err)
		os.Exit(1)
	}
}

func run(dsn string) error {
	if dsn == "" {
		d, stop, err := embedded.Start()
		if err != nil {
			return fmt.Errorf("starting the embedded server: %w", err)
		}
		defer stop()
		dsn = d
	}
	mcfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("parsing the DSN: %w", err)
	}
	connector, err := mysql.NewConnector(mcfg)
	if err != nil {
		return err
	}
	p, err := pool.New(connector, pool.Config{Name: "sqlx-example", MaxConns: 4, AcquireTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer p.Close()
	sdb := p.OpenDB()
	defer sdb.Close()

	// The one line that differs from a plain sqlx program: wrap the pool's *sql.DB.
	db := sqlx.NewDb(sdb, "mysql")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db.MustExecContext(ctx, "DROP TABLE IF EXISTS example_sqlx_items")
	db.MustExecContext(ctx, "CREATE TABLE example_sqlx_items (id BIGINT PRIMARY KEY AUTO_INCREMENT, name VARCHAR(64) NOT NULL, qty INT NOT NULL)")
	defer db.ExecContext(context.Background(), "DROP TABLE IF EXISTS example_sqlx_items") //nolint:errcheck

	for _, it := range []Item{{Name: "apple", Qty: 3}, {Name: "pear", Qty: 5}, {Name: "plum", Qty: 7}} {
		if _, err := db.NamedExecContext(ctx, "INSERT INTO example_sqlx_items (name, qty) VALUES (:name, :qty)", it); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
	}

	// A transaction: sqlx's Tx is database/sql's, so the pool rolls back whatever a borrower
	// leaves open — but commit or roll back yourself, as always.
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE example_sqlx_items SET qty = qty - 1 WHERE name = ?", "apple"); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}

	// A transaction that runs again when it is worth another try. The zero Policy is the
	// defaults (3 attempts, 10 ms..1 s full-jitter backoff, the process-wide budget); Dialect
	// reads errors as the pool does.
	policy := retry.Policy{Dialect: p.Dialect()}
	if err := move(ctx, db, policy, "plum", "apple", 2); err != nil {
		return fmt.Errorf("move: %w", err)
	}

	q, args, err := sqlx.In("SELECT id, name, qty FROM example_sqlx_items WHERE name IN (?) ORDER BY name", []string{"apple", "plum"})
	if err != nil {
		return err
	}
	var items []Item
	if err := db.SelectContext(ctx, &items, db.Rebind(q), args...); err != nil {
		return fmt.Errorf("select: %w", err)
	}
	for _, it := range items {
		fmt.Printf("item %d: %s x%d\n", it.ID, it.Name, it.Qty)
	}
	var pear Item
	if err := db.GetContext(ctx, &pear, "SELECT id, name, qty FROM example_sqlx_items WHERE name = ?", "pear"); err != nil {
		return err
	}
	if pear.Qty != 5 {
		return errors.New("unexpected pear quantity")
	}
	fmt.Println("pool:", p.Stats())
	return nil
}
