package pgdialect_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/internal/pgtest"
	"github.com/sqlpool/sqlpool/pool"
)

// TestCacheFirstLibPQ: with lib/pq, a parameterized db.QueryRow or db.Exec that ran on a
// connection before goes through the pool's statement cache (Bind and Execute only, one round
// trip), while its answers stay plain database/sql's: after ALTER TABLE changes the columns a
// cached SELECT * returns (0A000 "cached plan must not change result type"), after DEALLOCATE
// ALL dropped the server's statements (26000), and inside a transaction, where the cache is not
// used first.
func TestCacheFirstLibPQ(t *testing.T) {
	// Longer than a Bind, Execute and Sync together, so that bytes tell whether it was sent.
	const cfQuery = "SELECT * FROM sqlpool_cf WHERE id = $1 /* the text of this query is longer than Bind + Execute + Sync */"
	s := pgtest.Shared(t)
	ctx := context.Background()
	s.Exec(t, `DROP TABLE IF EXISTS sqlpool_cf`, `CREATE TABLE sqlpool_cf (id int PRIMARY KEY, v text)`,
		`INSERT INTO sqlpool_cf VALUES (1, 'one'), (2, 'two')`)
	px := mysqltest.NewProxy(t, s.Addr())
	p := newPool(t, s.Via(px.Addr()).PqConnector(t), pool.Config{MaxConns: 1})
	db := p.OpenDB()
	defer db.Close()
	plain := sql.OpenDB(s.PqConnector(t))
	defer plain.Close()
	plain.SetMaxOpenConns(1)

	row := func(db *sql.DB, id int) string {
		t.Helper()
		rows, err := db.QueryContext(ctx, cfQuery, id)
		if err != nil {
			return "error: " + err.Error()
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		var out []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return "error: " + err.Error()
			}
			out = append(out, fmt.Sprint(vals...))
		}
		if err := rows.Err(); err != nil {
			return "error: " + err.Error()
		}
		return strings.Join(cols, ",") + " " + strings.Join(out, ";")
	}
	same := func(what string, id int) {
		t.Helper()
		if got, want := row(db, id), row(plain, id); got != want {
			t.Fatalf("%s: pool %q, plain database/sql %q", what, got, want)
		}
	}
	same("first run (direct)", 1)
	same("second run (cached now)", 2)
	px.Reset()
	for range 10 {
		same("cached", 1)
	}
	// Bind + Execute + Sync only: lib/pq's direct path sends Parse (with the query's text),
	// Describe and Sync first.
	if per := px.Counts().ClientBytes / 10; per == 0 || per >= int64(len(cfQuery)) {
		t.Fatalf("a cached run sent %d bytes; want more than 0 and fewer than the query's %d", per, len(cfQuery))
	}

	s.Exec(t, `ALTER TABLE sqlpool_cf ADD COLUMN w int DEFAULT 7`)
	same("after ALTER TABLE (stale cached plan)", 1)
	same("after ALTER TABLE, again", 2)

	if _, err := db.ExecContext(ctx, "DEALLOCATE ALL"); err != nil {
		t.Fatal(err)
	}
	same("after DEALLOCATE ALL", 1)

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Exec(t, `ALTER TABLE sqlpool_cf DROP COLUMN w`)
	var v string
	if err := tx.QueryRowContext(ctx, "SELECT v FROM sqlpool_cf WHERE id = $1", 2).Scan(&v); err != nil || v != "two" {
		t.Fatalf("in a transaction: %q, %v", v, err)
	}
	rows, err := tx.QueryContext(ctx, "SELECT * FROM sqlpool_cf WHERE id = $1", 1)
	if err != nil {
		t.Fatalf("SELECT * in a transaction after the table changed: %v", err)
	}
	rows.Close()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	same("after the transaction", 1)
	if _, err := db.ExecContext(ctx, "UPDATE sqlpool_cf SET v = $1 WHERE id = $2", "uno", 1); err != nil {
		t.Fatal(err)
	}
	if r, err := db.ExecContext(ctx, "UPDATE sqlpool_cf SET v = $1 WHERE id = $2", "eins", 1); err != nil {
		t.Fatal(err)
	} else if n, _ := r.RowsAffected(); n != 1 {
		t.Fatalf("cached UPDATE affected %d rows", n)
	}
	same("after cached UPDATEs", 1)
}
