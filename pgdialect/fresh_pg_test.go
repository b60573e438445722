package pgdialect_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/sqlpool/sqlpool/internal/pgtest"
	"github.com/sqlpool/sqlpool/pool"
)

// setupItems creates sqlpool_items (id, v) in public and in schema sqlpool_s2 with another
// column (id, v, w), so that an unqualified SELECT * changes result type with search_path.
func setupItems(t *testing.T, s *pgtest.Server) {
	s.Exec(t,
		`CREATE TABLE IF NOT EXISTS sqlpool_items (id int PRIMARY KEY, v text)`,
		`INSERT INTO sqlpool_items VALUES (1, 'p1'), (2, 'p2'), (3, 'p3') ON CONFLICT DO NOTHING`,
		`CREATE SCHEMA IF NOT EXISTS sqlpool_s2`,
		`CREATE TABLE IF NOT EXISTS sqlpool_s2.sqlpool_items (id int PRIMARY KEY, v text, w text)`,
		`INSERT INTO sqlpool_s2.sqlpool_items VALUES (1, 's1', 'w1'), (2, 's2', 'w2') ON CONFLICT DO NOTHING`,
	)
}

const itemsQuery = "SELECT * FROM sqlpool_items WHERE id >= $1 ORDER BY id"

// shape runs q with arg on x and returns "<columns>x<rows>", or the error.
func shape(ctx context.Context, t *testing.T, x interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, q string, arg any) string {
	t.Helper()
	rows, err := x.QueryContext(ctx, q, arg)
	return rowsShape(rows, err)
}

func rowsShape(rows *sql.Rows, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		return "error: " + err.Error()
	}
	return strings.Repeat("c", len(cols)) + "x" + string(rune('0'+n))
}

// borrowRun runs f on a connection borrowed from db and returns it.
func borrowRun(ctx context.Context, t *testing.T, db *sql.DB, f func(c *sql.Conn)) {
	t.Helper()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f(c)
}

func mustExec(ctx context.Context, t *testing.T, c *sql.Conn, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestFreshBorrowSearchPathCachedPlan: a statement a borrower ran under SET search_path is not
// run, by the next borrower, as the statement prepared then (PostgreSQL would re-plan it and
// refuse the changed result type, 0A000); nor is a statement prepared before the borrower's
// SET search_path. The shrunk program, with both drivers (lib/pq through the pool's
// statement cache, which runs a statement from its second run).
func TestFreshBorrowSearchPathCachedPlan(t *testing.T) {
	s := pgtest.Shared(t)
	setupItems(t, s)
	ctx := context.Background()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			p := newPool(t, d.conn(t, s), pool.Config{MaxConns: 1})
			db := p.OpenDB()
			defer db.Close()
			borrowRun(ctx, t, db, func(c *sql.Conn) {
				mustExec(ctx, t, c, "SET search_path TO sqlpool_s2")
				for range 3 {
					if got := shape(ctx, t, c, itemsQuery, 1); got != "cccx2" {
						t.Fatalf("under sqlpool_s2: %s, want 3 columns × 2 rows", got)
					}
				}
			})
			borrowRun(ctx, t, db, func(c *sql.Conn) {
				for range 3 {
					if got := shape(ctx, t, c, itemsQuery, 1); got != "ccx3" {
						t.Fatalf("next borrower: %s, want public's 2 columns × 3 rows as on a new connection", got)
					}
				}
			})
			// The other way: cached under the default search_path, then run by a borrower
			// who changed it first.
			borrowRun(ctx, t, db, func(c *sql.Conn) {
				mustExec(ctx, t, c, "SET search_path TO sqlpool_s2")
				if got := shape(ctx, t, c, itemsQuery, 1); got != "cccx2" {
					t.Fatalf("borrower under sqlpool_s2 after others cached it: %s, want 3 columns × 2 rows", got)
				}
			})
		})
	}
}

// TestFreshBorrowTempTableShadow: a temporary table shadowing a table with other columns, in
// one borrow, with the same SELECT * before (earlier borrow), inside and after (next borrow).
func TestFreshBorrowTempTableShadow(t *testing.T) {
	s := pgtest.Shared(t)
	setupItems(t, s)
	ctx := context.Background()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			p := newPool(t, d.conn(t, s), pool.Config{MaxConns: 1})
			db := p.OpenDB()
			defer db.Close()
			for round := range 2 {
				borrowRun(ctx, t, db, func(c *sql.Conn) {
					for range 2 {
						if got := shape(ctx, t, c, itemsQuery, 1); got != "ccx3" {
							t.Fatalf("round %d, before: %s, want 2 columns × 3 rows", round, got)
						}
					}
				})
				borrowRun(ctx, t, db, func(c *sql.Conn) {
					mustExec(ctx, t, c, "CREATE TEMP TABLE sqlpool_items (id int, v text, w text, z text)",
						"INSERT INTO pg_temp.sqlpool_items VALUES (5, 't', 'w', 'z')")
					for range 2 {
						if got := shape(ctx, t, c, itemsQuery, 1); got != "ccccx1" {
							t.Fatalf("round %d, shadowed: %s, want 4 columns × 1 row as on a new connection", round, got)
						}
					}
				})
				borrowRun(ctx, t, db, func(c *sql.Conn) {
					if got := shape(ctx, t, c, itemsQuery, 1); got != "ccx3" {
						t.Fatalf("round %d, after: %s, want 2 columns × 3 rows", round, got)
					}
				})
			}
			// Within one borrow: a statement prepared before the shadowing table is refused
			// after it (0A000), as on a new connection, which creates its temporary schema
			// there and so re-plans it.
			borrowRun(ctx, t, db, func(c *sql.Conn) {
				if got := shape(ctx, t, c, itemsQuery, 1); got != "ccx3" {
					t.Fatalf("before, same borrow: %s", got)
				}
				mustExec(ctx, t, c, "CREATE TEMP TABLE sqlpool_items (id int, v text, w text, z text)")
				got := shape(ctx, t, c, itemsQuery, 1)
				switch d.name {
				case "pgx": // pgx's cached statement is re-planned
					if !strings.Contains(got, "0A000") {
						t.Fatalf("after shadowing in the same borrow: %s, want 0A000 as on a new connection", got)
					}
				default: // lib/pq parses each run anew
					if got != "ccccx0" {
						t.Fatalf("after shadowing in the same borrow: %s, want 4 columns × 0 rows as on a new connection", got)
					}
				}
			})
		})
	}
}

// TestFreshBorrowDBStmtAcrossSearchPath: a sql.Stmt prepared on the DB, then used through
// tx.Stmt by a borrower who changed search_path, runs under the borrower's search_path, as a
// new connection prepares it there.
func TestFreshBorrowDBStmtAcrossSearchPath(t *testing.T) {
	s := pgtest.Shared(t)
	setupItems(t, s)
	ctx := context.Background()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			p := newPool(t, d.conn(t, s), pool.Config{MaxConns: 1})
			db := p.OpenDB()
			defer db.Close()
			stmt, err := db.PrepareContext(ctx, itemsQuery)
			if err != nil {
				t.Fatal(err)
			}
			defer stmt.Close()
			if got := rowsShape(stmt.QueryContext(ctx, 1)); got != "ccx3" {
				t.Fatalf("on the DB: %s", got)
			}
			borrowRun(ctx, t, db, func(c *sql.Conn) {
				mustExec(ctx, t, c, "SET search_path TO sqlpool_s2")
				tx, err := c.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback()
				if got := rowsShape(tx.StmtContext(ctx, stmt).QueryContext(ctx, 1)); got != "cccx2" {
					t.Fatalf("tx.Stmt under sqlpool_s2: %s, want 3 columns × 2 rows", got)
				}
			})
			if got := rowsShape(stmt.QueryContext(ctx, 1)); got != "ccx3" {
				t.Fatalf("on the DB again: %s, want 2 columns × 3 rows", got)
			}
		})
	}
}

// TestFreshBorrowCustomSettingFromDO: a custom setting a DO block, a function or set_config
// created is absent (NULL) for the next borrower, as on a new connection, not ”.
func TestFreshBorrowCustomSettingFromDO(t *testing.T) {
	s := pgtest.Shared(t)
	s.Exec(t, `CREATE OR REPLACE FUNCTION sqlpool_set_tenant43(t text) RETURNS text LANGUAGE plpgsql AS
		$$ BEGIN RETURN set_config('app.tenant43', t, false); END $$`)
	ctx := context.Background()
	for _, d := range drivers {
		for _, set := range []string{
			"DO $$BEGIN PERFORM set_config('app.tenant43', 'from_do', false); END$$",
			"DO $$BEGIN EXECUTE 'SET app.tenant43 = ''x'''; END$$",
			"SELECT sqlpool_set_tenant43('f')",
			"SELECT set_config('app.tenant43', 'l', true)",
			"SET app.tenant43 = 's'",
		} {
			t.Run(d.name+"/"+set, func(t *testing.T) {
				p := newPool(t, d.conn(t, s), pool.Config{MaxConns: 1})
				db := p.OpenDB()
				defer db.Close()
				borrowRun(ctx, t, db, func(c *sql.Conn) {
					var isNull bool
					// Names the setting, as an application reading it does.
					if err := c.QueryRowContext(ctx, "SELECT current_setting('app.tenant43', true) IS NULL").Scan(&isNull); err != nil || !isNull {
						t.Fatalf("baseline: %v, %v", isNull, err)
					}
				})
				borrowRun(ctx, t, db, func(c *sql.Conn) { mustExec(ctx, t, c, set) })
				borrowRun(ctx, t, db, func(c *sql.Conn) {
					var isNull bool
					if err := c.QueryRowContext(ctx, "SELECT current_setting('app.tenant43', true) IS NULL").Scan(&isNull); err != nil {
						t.Fatal(err)
					}
					if !isNull {
						t.Fatal("next borrower: current_setting('app.tenant43', true) is not NULL; a new connection has no such setting")
					}
				})
			})
		}
	}
}

// TestFreshBorrowSetTransactionOutside: SET TRANSACTION outside a transaction leaves
// transaction_isolation set by the session in pg_settings; the next borrower sees none.
func TestFreshBorrowSetTransactionOutside(t *testing.T) {
	s := pgtest.Shared(t)
	ctx := context.Background()
	for _, d := range drivers {
		for _, set := range []string{"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", "SET transaction_read_only = on", "SET transaction_deferrable = on"} {
			t.Run(d.name+"/"+set, func(t *testing.T) {
				p := newPool(t, d.conn(t, s), pool.Config{MaxConns: 1})
				db := p.OpenDB()
				defer db.Close()
				borrowRun(ctx, t, db, func(c *sql.Conn) { mustExec(ctx, t, c, set) })
				borrowRun(ctx, t, db, func(c *sql.Conn) {
					var got string
					if err := c.QueryRowContext(ctx, "SELECT coalesce(string_agg(name, ','), '') FROM pg_settings WHERE source = 'session'").Scan(&got); err != nil {
						t.Fatal(err)
					}
					if got != "" {
						t.Fatalf("next borrower: settings with source session: %s; a new connection has none", got)
					}
				})
			})
		}
	}
}

// TestPrepareInFailedTransaction records pgx's behaviour that the pool keeps: pgx's stdlib
// answers a Prepare of a text it holds prepared from its own map, so in a failed transaction
// the Prepare succeeds where the server would refuse it, on a new connection too (for a text
// prepared earlier in the borrow); the statement's execution then fails with 25P02.
func TestPrepareInFailedTransaction(t *testing.T) {
	s := pgtest.Shared(t)
	ctx := context.Background()
	db := sql.OpenDB(s.PgxConnector(t))
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.PrepareContext(ctx, "SELECT $1::int + 1")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mustExec(ctx, t, c, "BEGIN")
	if _, err := c.ExecContext(ctx, "SELECT 1/0"); err == nil {
		t.Fatal("1/0 succeeded")
	}
	st2, err := c.PrepareContext(ctx, "SELECT $1::int + 1")
	if err != nil {
		t.Fatalf("plain database/sql, pgx, a held text in a failed transaction: Prepare failed (%v); pgx's behaviour changed: revisit docs/postgresql.md", err)
	}
	defer st2.Close()
	var n int
	if err := st2.QueryRowContext(ctx, 1).Scan(&n); err == nil || !strings.Contains(err.Error(), "25P02") {
		t.Fatalf("execution in the failed transaction: %v, want 25P02", err)
	}
	mustExec(ctx, t, c, "ROLLBACK")
}
