package difftest

import (
	"context"
	"database/sql"
	"os"
	"testing"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// regressions are step sequences that once diverged (or stand for a class that did), run as
// they are on every test run: the random programs may not draw them again.
var regressions = []struct {
	name string
	p    Program
}{
	// An INSERT giving the AUTO_INCREMENT column the id the previous borrow generated, which the
	// pool had not reset yet (deferred): the OK packet reports the explicit id as if generated,
	// and the deferred reset kept LAST_INSERT_ID() at it (pool 4, plain database/sql 0).
	{"explicit id equal to the stale one", Program{
		{Op: OpExec, SQL: "INSERT INTO t (v) VALUES ('g')"},
		{Op: OpBorrow},
		{Op: OpExec, SQL: "REPLACE INTO t (id, v) VALUES (?, 'x')", Args: []any{int64(4)}},
		{Op: OpQuery, SQL: "SELECT LAST_INSERT_ID()"},
	}},
	{"explicit id equal to the stale one, INSERT ... SELECT", Program{
		{Op: OpExec, SQL: "INSERT INTO t (v) VALUES ('g')"},
		{Op: OpBorrow},
		{Op: OpExec, SQL: "REPLACE INTO t (id, v) SELECT MAX(id), 'x' FROM t"},
		{Op: OpQuery, SQL: "SELECT @@identity"},
	}},
	{"explicit id equal to the stale one, a string literal, a prepared statement", Program{
		{Op: OpExec, SQL: "INSERT INTO t (v) VALUES ('g')"},
		{Op: OpBorrow},
		{Op: OpPrepare, Slot: 0, SQL: "INSERT INTO t (id, v) VALUES ('4', ?) ON DUPLICATE KEY UPDATE v = 'k'"},
		{Op: OpStmtExec, Slot: 0, Args: []any{"y"}},
		{Op: OpQuery, SQL: "SELECT LAST_INSERT_ID()"},
		{Op: OpExec, SQL: "INSERT INTO t (v) VALUES ('own')"},
		{Op: OpStmtExec, Slot: 0, Args: []any{"z"}},
		{Op: OpQuery, SQL: "SELECT LAST_INSERT_ID()"},
	}},
	// Seed 24508's divergence (DIFFTEST_CHUNK=5000, step 2330, before the vocabulary change), in
	// the form the vocabulary now draws: LAST_INSERT_ID(expr) sets a value no row has. MariaDB
	// substitutes WHERE id IS NULL (sql_auto_is_null) with LAST_INSERT_ID() only while a flag
	// that an INSERT generating an id sets is up; SET last_insert_id=0 leaves it, and a new
	// connection inherits it from the server thread it reuses (thread_cache_size), so a fresh
	// connection is no fixed reference for it (TestAutoIsNullFlag; docs/design/lazy-insert-id.md).
	{"sql_auto_is_null after LAST_INSERT_ID(expr)", Program{
		{Op: OpExec, SQL: "INSERT INTO t (v) VALUES ('g')"},
		{Op: OpBorrow},
		{Op: OpExec, SQL: "UPDATE t SET id = LAST_INSERT_ID(id + 1000000000) - 1000000000 WHERE id = 1"},
		{Op: OpExec, SQL: "SET sql_auto_is_null = 1"},
		{Op: OpQuery, SQL: "SELECT id, v FROM t WHERE id IS NULL"},
		{Op: OpQuery, SQL: "SELECT LAST_INSERT_ID()"},
	}},
}

// TestDifferentialRegressions runs the enumerated sequences through the fuzzer's runner.
func TestDifferentialRegressions(t *testing.T) {
	mysqltest.RequireMariaDB(t, "the differential fuzzer's full vocabulary")
	r, err := NewRunner(Options{DSN: mysqltest.DSN(t), Prefix: "difftest_reg"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tc := range regressions {
		t.Run(tc.name, func(t *testing.T) {
			d, err := r.Run(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if d != nil {
				t.Fatalf("diverges:\n%s%v", tc.p, d)
			}
		})
	}
}

// TestAutoIsNullFlag shows what made seed 24508 diverge: on MariaDB, WHERE id IS NULL under
// sql_auto_is_null reads LAST_INSERT_ID() only while a flag is up that an INSERT generating an
// id raises and the first such read lowers; SET last_insert_id=0 (the pool's reset) leaves it
// up. So a later LAST_INSERT_ID(expr) makes WHERE id IS NULL read that row on this connection,
// as it does on a new connection whose server thread (from the thread cache) last served one
// that generated an id: a fresh connection is no fixed reference for this flag.
func TestAutoIsNullFlag(t *testing.T) {
	mysqltest.RequireMariaDB(t, "sql_auto_is_null")
	db, err := sql.Open("mysql", mysqltest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, q := range []string{
		"CREATE TEMPORARY TABLE difftest_flag (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
		"INSERT INTO difftest_flag (v) VALUES (1)", // generates 1: the flag goes up
		"SET last_insert_id=0",
		"SELECT LAST_INSERT_ID(1)",
		"SET sql_auto_is_null=1",
	} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	read := func() int {
		rows, err := c.QueryContext(ctx, "SELECT id FROM difftest_flag WHERE id IS NULL")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := read(); n != 1 {
		t.Fatalf("first WHERE id IS NULL after SET last_insert_id=0 and LAST_INSERT_ID(1): %d rows; want 1 (the flag outlives the reset)", n)
	}
	if n := read(); n != 0 {
		t.Fatalf("second WHERE id IS NULL: %d rows; want 0 (the first read lowers the flag)", n)
	}
}

// TestAutoIsNullFlagNewConnections (DIFFTEST_FLAG_PROBE=1, by hand: it reports, it does not
// check) counts, in runs of ten connections, how often the sql_auto_is_null flag is up on the
// same connection after its INSERT and SET last_insert_id=0, on a new connection after one that
// inserted, and on a new connection alone; the last two depend on the server's thread cache.
func TestAutoIsNullFlagNewConnections(t *testing.T) {
	if os.Getenv("DIFFTEST_FLAG_PROBE") == "" {
		t.Skip("DIFFTEST_FLAG_PROBE=1 runs it")
	}
	mysqltest.RequireMariaDB(t, "sql_auto_is_null")
	ctx := context.Background()
	db, err := sql.Open("mysql", mysqltest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxIdleConns(0) // every Conn a new connection
	for _, q := range []string{"DROP TABLE IF EXISTS difftest_flag", "CREATE TABLE difftest_flag (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
		"INSERT INTO difftest_flag (id, v) VALUES (1, 0)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	defer db.ExecContext(ctx, "DROP TABLE IF EXISTS difftest_flag")
	run := func(insert, probe bool) string {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if insert {
			if _, err := c.ExecContext(ctx, "INSERT INTO difftest_flag (v) VALUES (1)"); err != nil {
				t.Fatal(err)
			}
			if _, err := c.ExecContext(ctx, "SET last_insert_id=0"); err != nil {
				t.Fatal(err)
			}
		}
		if !probe {
			return ""
		}
		var id int
		if _, err := c.ExecContext(ctx, "SET last_insert_id=1"); err != nil {
			t.Fatal(err)
		}
		err = c.QueryRowContext(ctx, "SET STATEMENT sql_auto_is_null=1 FOR SELECT id FROM difftest_flag WHERE id IS NULL").Scan(&id)
		switch {
		case err == sql.ErrNoRows:
			return "F"
		case err != nil:
			t.Fatal(err)
		}
		return "T"
	}
	var same, after, alone string
	for range 10 {
		same += run(true, true)
	}
	for range 10 {
		run(true, false)
		after += run(false, true)
	}
	for range 10 {
		alone += run(false, true)
	}
	t.Logf("flag up (T): same connection after INSERT and SET last_insert_id=0 %s; new connection after one that inserted %s; new connection %s", same, after, alone)
}
