package pool_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
)

// A sql.Stmt prepared on a sql.Conn runs in the database it was prepared in, as under plain
// database/sql, whatever USE follows: prepared in A and run after USE B it reads A; after
// several prepares in A and B and a close each statement reads its own database; after LOCK
// TABLES t READ and USE B the statement prepared in A still reads A's locked table. Each
// scenario runs through plain database/sql (a fresh connection) and through the pool
// (MaxConns 1, after a borrow that warmed the statement cache), and the results must agree.
func TestStmtPreparedRunsWherePrepared(t *testing.T) {
	dsn := mysqltest.DSN(t)
	base := useBaseDB(t, dsn)
	ctx := context.Background()
	admin := sql.OpenDB(mysqlConnector(t, dsn))
	defer admin.Close()
	a, b := "sqlpool_stmtdb_a", "sqlpool_stmtdb_b"
	for _, q := range []string{
		"DROP DATABASE IF EXISTS " + a, "DROP DATABASE IF EXISTS " + b, "CREATE DATABASE " + a, "CREATE DATABASE " + b,
		"CREATE TABLE " + a + ".t (id INT PRIMARY KEY, v VARCHAR(8))", "CREATE TABLE " + b + ".t (id INT PRIMARY KEY, v VARCHAR(8))",
		"INSERT INTO " + a + ".t VALUES (1, 'in A')", "INSERT INTO " + b + ".t VALUES (1, 'in B')",
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	defer func() {
		_, _ = admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+a)
		_, _ = admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+b)
	}()
	const q = "SELECT v FROM t WHERE id = ?"
	// A step: "USE x" / "LOCK ..." / "UNLOCK TABLES" is executed; "prepare N" prepares q into
	// slot N; "run N" runs slot N; "close N" closes it.
	scenarios := map[string][]string{
		"prepared in A, run after USE B": {"USE " + a, "prepare 0", "USE " + b, "run 0", "prepare 1", "run 1", "run 0"},
		"prepared in B, run after USE A": {"USE " + b, "prepare 0", "USE " + a, "run 0", "USE " + base, "run 0"},
		"several prepares and a close": {"USE " + a, "prepare 0", "USE " + b, "prepare 1", "run 0", "run 1", "close 0",
			"USE " + a, "prepare 2", "run 1", "run 2", "USE " + b, "prepare 0", "run 0", "run 2", "close 1", "run 0"},
		"LOCK TABLES t READ, USE B": {"USE " + a, "prepare 0", "LOCK TABLES t READ", "USE " + b, "run 0", "UNLOCK TABLES", "run 0"},
	}
	scan := func(s, format string, n *int) bool {
		_, err := fmt.Sscanf(s, format, n)
		return err == nil
	}
	run := func(db *sql.DB, steps []string) []string {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var stmts [3]*sql.Stmt
		var out []string
		for _, s := range steps {
			var n int
			switch {
			case scan(s, "prepare %d", &n):
				st, err := c.PrepareContext(ctx, q)
				if err != nil {
					out = append(out, "prepare error "+errText(err))
					continue
				}
				stmts[n] = st
				out = append(out, "prepared")
			case scan(s, "run %d", &n):
				var v string
				if err := stmts[n].QueryRowContext(ctx, 1).Scan(&v); err != nil {
					v = "error " + errText(err)
				}
				out = append(out, v)
			case scan(s, "close %d", &n):
				_ = stmts[n].Close()
				stmts[n] = nil
				out = append(out, "closed")
			default:
				if _, err := c.ExecContext(ctx, s); err != nil {
					out = append(out, "error "+errText(err))
				} else {
					out = append(out, "ok")
				}
			}
		}
		for _, st := range stmts {
			if st != nil {
				_ = st.Close()
			}
		}
		return out
	}
	for name, steps := range scenarios {
		t.Run(name, func(t *testing.T) {
			plain := sql.OpenDB(mysqlConnector(t, dsn))
			plain.SetMaxIdleConns(0)
			want := run(plain, steps)
			_ = plain.Close()
			p := newMySQLPool(t, dsn, pool.Config{MaxConns: 1})
			db := p.OpenDB()
			defer db.Close()
			run(db, steps) // warms the cache under both databases
			got := run(db, steps)
			if !slices.Equal(got, want) {
				t.Fatalf("steps %q:\n pool:               %q\n plain database/sql: %q", steps, got, want)
			}
		})
	}
}
