package pgdialect_test

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	_ "github.com/sqlpool/sqlpool/pgdialect" // PostgreSQL's rules, registered on import
	"github.com/sqlpool/sqlpool/pool"
)

// The pool on PostgreSQL with pgx: give pool.New pgx's stdlib connector; importing pgdialect
// registers PostgreSQL's rules for it (lib/pq's pq.NewConnector works the same way). What a
// borrower changes in its session (here search_path) is reset when the connection comes back,
// so the next borrower gets the session the connection opened with. The example reads
// DATABASE_URL.
func Example() {
	cfg, err := pgx.ParseConfig(os.Getenv("DATABASE_URL")) // postgres://user:pass@host:5432/db
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := pool.New(stdlib.GetConnector(*cfg), pool.Config{Name: "pg", MaxConns: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	db := p.OpenDB()
	defer db.Close()
	ctx := context.Background()

	c, err := db.Conn(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	var path string
	if _, err := c.ExecContext(ctx, "SET search_path TO pg_catalog"); err != nil {
		fmt.Println(err)
		return
	}
	_ = c.QueryRowContext(ctx, "SHOW search_path").Scan(&path)
	fmt.Println("borrower:", path)
	_ = c.Close() // back to the pool, which resets what the borrower changed

	if err := db.QueryRowContext(ctx, "SHOW search_path").Scan(&path); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("next borrower:", path)
	// It prints (with no Output comment, go test compiles it but does not run it without a
	// server; TestExample does):
	//
	//	borrower: pg_catalog
	//	next borrower: "$user", public
}
