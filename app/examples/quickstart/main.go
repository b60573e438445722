// Command quickstart runs sqlpool against an in-process MySQL-protocol server (the embedded
// go-mysql-server used by the tests), runs a few queries through database/sql and prints the
// pool's Stats. Pass -dsn to use a real MySQL or MariaDB server instead.
//
//	go run ./app/examples/quickstart
//	go run ./app/examples/quickstart -dsn 'user:pass@tcp(127.0.0.1:3306)/test'
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/app/embedded"
	_ "github.com/sqlpool/sqlpool/mysqldialect" // MySQL's pool.Dialect, registered on import
	"github.com/sqlpool/sqlpool/pool"
)

func main() {
	dsn := flag.String("dsn", "", "go-sql-driver/mysql DSN; empty starts the embedded server")
	flag.Parse()
	if err := run(*dsn); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
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
		fmt.Println("embedded MySQL-protocol server at", dsn)
	}
	mcfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("parsing the DSN: %w", err)
	}
	connector, err := mysql.NewConnector(mcfg)
	if err != nil {
		return err
	}

	// The pool wraps the driver's connector; p.OpenDB() puts database/sql in front of it.
	p, err := pool.New(connector, pool.Config{
		Name:           "quickstart",
		MaxConns:       4,
		AcquireTimeout: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	defer p.Close()
	db := p.OpenDB()
	defer db.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, q := range []string{
		"DROP TABLE IF EXISTS quickstart_items",
		"CREATE TABLE quickstart_items (id INT PRIMARY KEY, name VARCHAR(64))",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}

	// One transaction writes 40 rows. (Writes stay in one transaction: the embedded server's
	// in-memory tables lose concurrent transactions' writes; MariaDB does not.)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for id := 0; id < 40; id++ {
		if _, err := tx.ExecContext(ctx, "INSERT INTO quickstart_items VALUES (?, ?)", id, fmt.Sprint("item-", id)); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}

	// Eight goroutines share four connections to read them back; waiting for a connection is
	// FIFO and bounded by AcquireTimeout.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				var name string
				id := g*5 + i
				if err := db.QueryRowContext(ctx, "SELECT name FROM quickstart_items WHERE id = ?", id).Scan(&name); err != nil {
					errs <- fmt.Errorf("reading row %d: %w", id, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}

	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM quickstart_items").Scan(&n); err != nil {
		return err
	}
	fmt.Println("rows inserted:", n)
	var name string
	if err := db.QueryRowContext(ctx, "SELECT name FROM quickstart_items WHERE id = ?", 7).Scan(&name); err != nil {
		return err
	}
	fmt.Println("row 7:", name)
	if _, err := db.ExecContext(ctx, "DROP TABLE quickstart_items"); err != nil {
		return err
	}

	s := p.Stats()
	fmt.Printf("pool %s: total=%d active=%d idle=%d waiting=%d | acquires=%d timeouts=%d created=%d closed=%d\n",
		s.Name, s.Total, s.Active, s.Idle, s.Waiting, s.Acquires, s.Timeouts, s.Created, s.Closed)
	return nil
}
