// Command sqlx runs github.com/jmoiron/sqlx on sqlpool: sqlx.NewDb wraps the pool's *sql.DB
// and everything else is plain sqlx — struct scanning, named statements, IN clauses,
// transactions. It starts an in-process MySQL-protocol server (the embedded go-mysql-server
// used by the tests); pass -dsn to use a real MySQL or MariaDB server instead.
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
)

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
