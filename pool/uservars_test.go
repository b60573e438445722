package pool_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
)

// borrowTwice runs first on one borrow and then reads q on the next (MaxConns 1: the same
// physical connection), returning what the second borrower saw.
func borrowTwice(t *testing.T, db *sql.DB, first []string, q string) sql.NullString {
	t.Helper()
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range first {
		rows, err := c.QueryContext(ctx, s)
		if err != nil {
			_ = c.Close()
			t.Fatalf("%s: %v", s, err)
		}
		_ = rows.Close()
	}
	_ = c.Close()
	c, err = db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var v sql.NullString
	if err := c.QueryRowContext(ctx, q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

// User variables a borrower assigned, in every form, are NULL for the next borrower, as on a
// fresh connection, and the connection is reset, not discarded.
func TestUserVariablesReset(t *testing.T) {
	dsn := mysqltest.DSN(t)
	p := newMySQLPool(t, dsn, pool.Config{MaxConns: 1})
	db := p.OpenDB()
	defer db.Close()
	cases := map[string][]string{
		"SET":              {"SET @tenant = 64"},
		"SET two":          {"SET @a = 1, @Tenant := 64"},
		"quoted":           {"SET @`tenant` = 64"},
		"in a transaction": {"BEGIN", "SET @tenant = 64", "COMMIT"},
	}
	if mysqltest.IsMariaDB() {
		cases["INTO"] = []string{"SELECT 64 INTO @tenant"} // the embedded server has neither
		cases["SELECT :="] = []string{"SELECT @tenant := 64"}
	}
	for name, first := range cases {
		t.Run(name, func(t *testing.T) {
			before := p.Stats().Closed
			if v := borrowTwice(t, db, first, "SELECT @tenant"); v.Valid {
				t.Fatalf("after %q the next borrower's @tenant = %q; want NULL", first, v.String)
			}
			if n := p.Stats().Closed - before; n != 0 {
				t.Fatalf("%d connections closed; want 0 (reset, not discarded)", n)
			}
		})
	}
}

// LAST_INSERT_ID() of the previous borrower is 0 for the next one, as on a fresh connection:
// after SELECT LAST_INSERT_ID(77), and after an INSERT into an AUTO_INCREMENT table (Exec and
// a prepared statement).
func TestLastInsertIDReset(t *testing.T) {
	mysqltest.RequireMariaDB(t, "the embedded server ignores SET last_insert_id")
	dsn := mysqltest.DSN(t)
	ctx := context.Background()
	admin := sql.OpenDB(mysqlConnector(t, dsn))
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS sqlpool_lastid (id INT AUTO_INCREMENT PRIMARY KEY, v INT)"); err != nil {
		t.Fatal(err)
	}
	defer admin.ExecContext(ctx, "DROP TABLE IF EXISTS sqlpool_lastid")
	p := newMySQLPool(t, dsn, pool.Config{MaxConns: 1})
	db := p.OpenDB()
	defer db.Close()
	if v := borrowTwice(t, db, []string{"SELECT LAST_INSERT_ID(77)"}, "SELECT LAST_INSERT_ID()"); v.String != "0" {
		t.Fatalf("after SELECT LAST_INSERT_ID(77): next borrower's LAST_INSERT_ID() = %q; want 0", v.String)
	}
	for _, args := range [][]any{nil, {5}} {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		q := "INSERT INTO sqlpool_lastid (v) VALUES (1)"
		if args != nil {
			q = "INSERT INTO sqlpool_lastid (v) VALUES (?)"
		}
		res, err := c.ExecContext(ctx, q, args...)
		if err != nil {
			t.Fatal(err)
		}
		if id, _ := res.LastInsertId(); id == 0 {
			t.Fatal("no id generated")
		}
		_ = c.Close()
		if v := borrowTwice(t, db, nil, "SELECT LAST_INSERT_ID()"); v.String != "0" {
			t.Fatalf("after %s: next borrower's LAST_INSERT_ID() = %q; want 0", q, v.String)
		}
	}
}
