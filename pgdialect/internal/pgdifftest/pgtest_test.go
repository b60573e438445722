package pgdifftest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/lib/pq"

	"github.com/sqlpool/sqlpool/internal/leakcheck"
	"github.com/sqlpool/sqlpool/internal/pgtest"
)

// internal/pgtest links no driver (the library module requires none): this binary gives it
// lib/pq's connector constructor.
func init() {
	pgtest.RegisterConnector("postgres", func(dsn string) (driver.Connector, error) { return pq.NewConnector(dsn) })
}

// TestMain stops the shared PostgreSQL server (if a test started one) before the leak check.
func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	if code == 0 {
		if err := leakcheck.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// envInt reads a positive integer environment variable, or def.
func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// TestPgtestConnectors: internal/pgtest's connectors (pgx stdlib and lib/pq, reached through
// the drivers this binary links) answer on the shared server and on a restarted private one.
func TestPgtestConnectors(t *testing.T) {
	s := pgtest.Shared(t)
	for name, c := range map[string]func() *sql.DB{
		"pgx": func() *sql.DB { return sql.OpenDB(s.PgxConnector(t)) },
		"pq":  func() *sql.DB { return sql.OpenDB(s.PqConnector(t)) },
	} {
		db := c()
		var v string
		if err := db.QueryRowContext(context.Background(), "SHOW server_version").Scan(&v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: server_version %s", name, v)
		db.Close()
	}
	p := pgtest.Start(t)
	p.Restart(t)
	p.Exec(t, "CREATE TABLE pgtest_restarted (id int)", "DROP TABLE pgtest_restarted")
	if err := p.Admin(t).PingContext(context.Background()); err != nil {
		t.Fatal(err)
	}
}
