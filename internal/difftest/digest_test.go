package difftest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// The digest that stands for the session variables changes with any of them, the clock set
// back included, and not with the per-connection ones.
func TestDigestSeesSessionVariables(t *testing.T) {
	mysqltest.RequireMariaDB(t, "information_schema.SESSION_VARIABLES")
	ctx := context.Background()
	db, err := sql.Open("mysql", mysqltest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxIdleConns(0)
	fresh := func() *sql.Conn {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := fresh(), fresh()
	defer a.Close()
	defer b.Close()
	da, err := digest(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if db, _ := digest(ctx, b); db != da {
		t.Fatalf("two fresh connections: %s, %s", da, db)
	}
	for _, set := range []string{"SET group_concat_max_len = 4", "SET timestamp = 1", "SET sql_mode = 'ANSI_QUOTES'", "SET NAMES latin1", "SET sql_select_limit = 1", "SET foreign_key_checks = 0", "SET @@last_insert_id = 5", "SET max_statement_time = 0.5"} {
		c := fresh()
		if _, err := c.ExecContext(ctx, set); err != nil {
			t.Fatal(err)
		}
		if d, err := digest(ctx, c); err != nil || d == da {
			t.Errorf("after %s: digest %s (%v), the same as a fresh connection's", set, d, err)
		}
		_ = c.Close()
	}
}
