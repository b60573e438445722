package pool_test

// The statement cache must be invisible: a statement gives the results plain database/sql would
// give, in every session state. A statement the borrower prepared runs where it was prepared
// (as the server statement plain database/sql prepared would); one prepared or run as a
// parameterized query is shared only under the database, sql_mode and character set it was
// prepared under.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
)

// prepares returns the PREPAREs of q the fake connection received.
func prepares(fc *fakedb.Connector, q string) int {
	n := 0
	for _, l := range fc.Conns()[0].Log() {
		if l == "PREPARE "+q {
			n++
		}
	}
	return n
}

// With the fake driver (which records every PREPARE): a statement cached under one database is
// not reused under another, across borrows and within one, and nothing is cached or reused
// while a SET the tracker cannot follow (sql_mode, NAMES) may have changed how it would be
// prepared. Fails on a cache keyed by query text only.
func TestStmtCacheFollowsUse(t *testing.T) {
	fc := fakedb.New() // baseline database "test"
	p, err := pool.New(fc, pool.Config{MaxConns: 1, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	db := p.OpenDB()
	defer db.Close()
	ctx := context.Background()
	const q = "SELECT a FROM t WHERE id = ?"
	prep := func(c *sql.Conn) *sql.Stmt {
		t.Helper()
		st, err := c.PrepareContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	exec := func(c *sql.Conn, stmt string) {
		t.Helper()
		if _, err := c.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	query := func(st *sql.Stmt) {
		t.Helper()
		var v int
		if err := st.QueryRowContext(ctx, 1).Scan(&v); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(step string, want int) {
		t.Helper()
		if got := prepares(fc, q); got != want {
			t.Fatalf("%s: %d PREPAREs of the statement so far; want %d", step, got, want)
		}
	}

	// Borrow 1: prepared in "tenant1".
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exec(c, "USE tenant1")
	st := prep(c)
	query(st)
	expect("first prepare", 1)
	_ = st.Close()
	st = prep(c)
	query(st)
	expect("same database, same borrow", 1) // the cache's point
	_ = st.Close()
	_ = c.Close() // the release plan runs USE `test`

	// Borrow 2, back in the baseline database: tenant1's statement must not be reused.
	c, err = db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st = prep(c)
	query(st)
	expect("next borrower, baseline database", 2)
	// Within one borrow: a statement prepared before USE runs where it was prepared, as under
	// plain database/sql (the server fixes the database into a statement at prepare), and a
	// statement prepared after the USE is the new database's own.
	exec(c, "USE tenant2")
	query(st)
	expect("statement prepared before USE, run after it", 2)
	st3 := prep(c)
	query(st3)
	expect("prepared after USE", 3)
	query(st3)
	expect("run again in the same database", 3)
	_ = st3.Close()
	exec(c, "USE `test`")
	query(st)
	expect("back in the baseline database", 3)
	st3 = prep(c)
	query(st3)
	expect("prepared again in the baseline database: the cached one", 3)
	_ = st3.Close()
	// A SET the tracker cannot follow: nothing shared until the session is reset; a statement
	// prepared before it keeps running as prepared.
	exec(c, "SET sql_mode = 'ANSI_QUOTES'")
	query(st)
	expect("after SET sql_mode", 3)
	st2 := prep(c)
	query(st2)
	expect("prepared after SET sql_mode", 4)
	_ = st2.Close()
	_ = st.Close()
	_ = c.Close() // discarded: the session variable cannot be restored

	// A new connection, a fresh cache.
	c, err = db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st = prep(c)
	query(st)
	_ = st.Close()
	st = prep(c)
	query(st)
	_ = st.Close()
	if got := prepares(fc, q); got != 4 {
		t.Fatalf("the first connection saw %d PREPAREs after it was discarded; want 4", got)
	}
	if n := len(fc.Conns()); n != 2 {
		t.Fatalf("%d connections; want 2 (the one with a changed sql_mode discarded)", n)
	}
	var n int
	for _, l := range fc.Conns()[1].Log() {
		if l == "PREPARE "+q {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the new connection prepared the statement %d times; want 1 (cached)", n)
	}
}

// useBaseDB returns the database the DSN selects.
func useBaseDB(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DBName == "" {
		t.Skip("the test DSN selects no database")
	}
	return cfg.DBName
}

// useOutcome runs one step on c: a statement starting with "?" is a query run with the two
// arguments 1, 1 (so that go-sql-driver/mysql prepares it: the statement cache's case), anything
// else is executed. It returns the rows or the error number, for comparison.
func useOutcome(ctx context.Context, c *sql.Conn, step string) string {
	q, isQuery := strings.CutPrefix(step, "?")
	if !isQuery {
		if _, err := c.ExecContext(ctx, step); err != nil {
			return "exec error " + errText(err)
		}
		return "ok"
	}
	rows, err := c.QueryContext(ctx, q, 1, 1)
	if err != nil {
		return "error " + errText(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "scan error " + errText(err)
		}
		var row []string
		for _, v := range vals {
			row = append(row, string(v))
		}
		out = append(out, strings.Join(row, ","))
	}
	if err := rows.Err(); err != nil {
		return "rows error " + errText(err)
	}
	return fmt.Sprintf("%d cols: %s", len(cols), strings.Join(out, ";"))
}

func errText(err error) string {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return fmt.Sprint(me.Number)
	}
	return err.Error()
}

// Every session change that affects how a server prepares a statement, run through the pool's
// cached statements and through plain database/sql (which prepares a parameterized query anew
// every time, and with a fresh connection after RELEASE, so it is the oracle): the same steps
// must give the same results. On MariaDB the
// USE steps fail on a cache keyed by query text only; ALTER/DROP TABLE and a temporary table
// shadowing a base table are handled by the server (it re-prepares a statement whose tables
// changed), and sql_mode and character set changes make the pool bypass the cache.
func TestStmtCacheSessionChanges(t *testing.T) {
	dsn := mysqltest.DSN(t)
	base := useBaseDB(t, dsn)
	tbl := "sqlpool_stmtcache_use"
	scenarios := []struct {
		name  string
		steps []string
	}{
		{"use", []string{
			"USE information_schema",
			"?SELECT COUNT(*) > 0 FROM ENGINES WHERE ? = ?",
			"USE `" + base + "`",
			"?SELECT COUNT(*) > 0 FROM ENGINES WHERE ? = ?",
			"USE information_schema",
			"?SELECT COUNT(*) > 0 FROM ENGINES WHERE ? = ?",
		}},
		{"alter-table", []string{
			"DROP TABLE IF EXISTS " + tbl,
			"CREATE TABLE " + tbl + " (id INT PRIMARY KEY)",
			"INSERT INTO " + tbl + " VALUES (1)",
			"?SELECT * FROM " + tbl + " WHERE ? = ?",
			"ALTER TABLE " + tbl + " ADD COLUMN b INT NOT NULL DEFAULT 7",
			"?SELECT * FROM " + tbl + " WHERE ? = ?",
			"DROP TABLE " + tbl,
		}},
		{"drop-recreate", []string{
			"DROP TABLE IF EXISTS " + tbl,
			"CREATE TABLE " + tbl + " (id INT PRIMARY KEY)",
			"INSERT INTO " + tbl + " VALUES (1)",
			"?SELECT * FROM " + tbl + " WHERE ? = ?",
			"DROP TABLE " + tbl,
			"CREATE TABLE " + tbl + " (x VARCHAR(5) PRIMARY KEY, y INT)",
			"INSERT INTO " + tbl + " VALUES ('x', 2)",
			"?SELECT * FROM " + tbl + " WHERE ? = ?",
			"DROP TABLE " + tbl,
		}},
		{"temporary-shadow", []string{
			"DROP TABLE IF EXISTS " + tbl,
			"CREATE TABLE " + tbl + " (id INT PRIMARY KEY)",
			"INSERT INTO " + tbl + " VALUES (1)",
			"?SELECT * FROM " + tbl + " WHERE ? = ?",
			"CREATE TEMPORARY TABLE " + tbl + " (id INT PRIMARY KEY, z INT)",
			"INSERT INTO " + tbl + " VALUES (5, 6)",
			"?SELECT * FROM " + tbl + " WHERE ? = ?",
			"DROP TEMPORARY TABLE " + tbl,
			"?SELECT * FROM " + tbl + " WHERE ? = ?",
			"DROP TABLE " + tbl,
		}},
		{"sql_mode", []string{
			"DROP TABLE IF EXISTS " + tbl,
			"CREATE TABLE " + tbl + " (id INT PRIMARY KEY)",
			"INSERT INTO " + tbl + " VALUES (4)",
			`?SELECT "id" FROM ` + tbl + " WHERE ? = ?",
			"SET SESSION sql_mode = 'ANSI_QUOTES'",
			`?SELECT "id" FROM ` + tbl + " WHERE ? = ?",
			"DROP TABLE " + tbl,
		}},
		{"character-set", []string{
			"?SELECT CHARSET('x'), COLLATION('x') FROM DUAL WHERE ? = ?",
			"SET NAMES latin1",
			"?SELECT CHARSET('x'), COLLATION('x') FROM DUAL WHERE ? = ?",
			"SET collation_connection = latin1_bin",
			"?SELECT CHARSET('x'), COLLATION('x') FROM DUAL WHERE ? = ?",
		}},
		// The variables the release plan restores (dropin). sql_mode and the connection's
		// character set and collation are fixed when a statement is prepared (checked on
		// MariaDB 10.11 with PREPARE/EXECUTE: a statement prepared before SET sql_mode =
		// 'ANSI_QUOTES' or SET collation_connection keeps the old meaning), so the cache
		// must not share statements while they differ from the baseline; time_zone,
		// character_set_results, the statement timeout and @@variables are read when a
		// statement executes, so a statement cached under the baseline stays right. RELEASE
		// gives the connection back and borrows again: the pool's next borrower (same
		// physical connection, restored) must see what database/sql's fresh one sees.
		{"sql_mode-pipes-backslashes", []string{
			`?SELECT 1 || 0, 'a\\b', LENGTH('a\\b'), @@sql_mode = @@GLOBAL.sql_mode FROM DUAL WHERE ? = ?`,
			"SET SESSION sql_mode = 'PIPES_AS_CONCAT,NO_BACKSLASH_ESCAPES'",
			`?SELECT 1 || 0, 'a\\b', LENGTH('a\\b'), @@sql_mode = @@GLOBAL.sql_mode FROM DUAL WHERE ? = ?`,
			"SET @@session.sql_mode = DEFAULT",
			`?SELECT 1 || 0, 'a\\b', LENGTH('a\\b'), @@sql_mode = @@GLOBAL.sql_mode FROM DUAL WHERE ? = ?`,
			"SET LOCAL sql_mode = 'ANSI_QUOTES'",
			`?SELECT "x", 1 || 0 FROM DUAL WHERE ? = ?`,
			"RELEASE",
			`?SELECT 1 || 0, 'a\\b', LENGTH('a\\b'), @@sql_mode = @@GLOBAL.sql_mode FROM DUAL WHERE ? = ?`,
			`?SELECT "x", 1 || 0 FROM DUAL WHERE ? = ?`,
		}},
		{"names-collate", []string{
			"?SELECT CHARSET('x'), COLLATION('x'), 'a' = 'A', @@collation_connection FROM DUAL WHERE ? = ?",
			"SET NAMES latin1 COLLATE latin1_bin",
			"?SELECT CHARSET('x'), COLLATION('x'), 'a' = 'A', @@collation_connection FROM DUAL WHERE ? = ?",
			"SET CHARACTER SET utf8mb4",
			"?SELECT CHARSET('x'), COLLATION('x'), 'a' = 'A', @@collation_connection FROM DUAL WHERE ? = ?",
			"SET NAMES utf8mb4",
			"?SELECT CHARSET('x'), COLLATION('x'), 'a' = 'A', @@collation_connection FROM DUAL WHERE ? = ?",
			"SET character_set_connection = latin1",
			"?SELECT CHARSET('x'), COLLATION('x'), 'a' = 'A', @@collation_connection FROM DUAL WHERE ? = ?",
			"RELEASE",
			"?SELECT CHARSET('x'), COLLATION('x'), 'a' = 'A', @@collation_connection FROM DUAL WHERE ? = ?",
			"SET collation_connection = utf8mb4_bin",
			"RELEASE",
			"?SELECT CHARSET('x'), COLLATION('x'), 'a' = 'A', @@collation_connection FROM DUAL WHERE ? = ?",
			// {coll} is the connection's collation at connect: on the embedded server not
			// its character set's default, so restoring character_set_connection alone
			// would leave the default behind.
			"SET character_set_connection = latin1",
			"SET collation_connection = '{coll}'",
			"?SELECT CHARSET('x'), COLLATION('x'), 'a' = 'A', @@collation_connection FROM DUAL WHERE ? = ?",
			"RELEASE",
			"?SELECT CHARSET('x'), COLLATION('x'), 'a' = 'A', @@collation_connection FROM DUAL WHERE ? = ?",
			"SET character_set_connection = latin1, collation_connection = '{coll}'",
			"RELEASE",
			"?SELECT CHARSET('x'), COLLATION('x'), 'a' = 'A', @@collation_connection FROM DUAL WHERE ? = ?",
		}},
		{"time_zone", []string{
			"DROP TABLE IF EXISTS " + tbl,
			"CREATE TABLE " + tbl + " (id INT PRIMARY KEY, ts TIMESTAMP NULL)",
			"SET time_zone = '+00:00'",
			"INSERT INTO " + tbl + " VALUES (1, '2020-01-01 00:00:00')",
			"SET time_zone = DEFAULT",
			"?SELECT ts, UNIX_TIMESTAMP(ts), FROM_UNIXTIME(0), UNIX_TIMESTAMP('2020-01-01 00:00:00'), ts = '2020-01-01 00:00:00', @@time_zone FROM " + tbl + " WHERE ? = ?",
			"SET time_zone = '+05:30'",
			"?SELECT ts, UNIX_TIMESTAMP(ts), FROM_UNIXTIME(0), UNIX_TIMESTAMP('2020-01-01 00:00:00'), ts = '2020-01-01 00:00:00', @@time_zone FROM " + tbl + " WHERE ? = ?",
			"RELEASE",
			"?SELECT ts, UNIX_TIMESTAMP(ts), FROM_UNIXTIME(0), UNIX_TIMESTAMP('2020-01-01 00:00:00'), ts = '2020-01-01 00:00:00', @@time_zone FROM " + tbl + " WHERE ? = ?",
			"DROP TABLE " + tbl,
		}},
		{"results-timeouts", []string{
			"?SELECT 'é', HEX('é'), IFNULL(@@character_set_results, 'NULL'), @@wait_timeout, @@interactive_timeout FROM DUAL WHERE ? = ?",
			"SET character_set_results = latin1, wait_timeout = 77, SESSION interactive_timeout = 78",
			"?SELECT 'é', HEX('é'), IFNULL(@@character_set_results, 'NULL'), @@wait_timeout, @@interactive_timeout FROM DUAL WHERE ? = ?",
			"SET @@session.character_set_results = NULL",
			"?SELECT 'é', HEX('é'), IFNULL(@@character_set_results, 'NULL'), @@wait_timeout, @@interactive_timeout FROM DUAL WHERE ? = ?",
			"RELEASE",
			"?SELECT 'é', HEX('é'), IFNULL(@@character_set_results, 'NULL'), @@wait_timeout, @@interactive_timeout FROM DUAL WHERE ? = ?",
		}},
	}
	if mysqltest.IsMariaDB() {
		// The statement timeout (MariaDB's max_statement_time; the embedded server has none).
		scenarios = append(scenarios, struct {
			name  string
			steps []string
		}{"max_statement_time", []string{
			"?SELECT SLEEP(0.5), @@max_statement_time FROM DUAL WHERE ? = ?",
			"SET max_statement_time = 0.05",
			"?SELECT SLEEP(0.5), @@max_statement_time FROM DUAL WHERE ? = ?",
			"RELEASE",
			"?SELECT SLEEP(0.5), @@max_statement_time FROM DUAL WHERE ? = ?",
		}})
	}
	ctx := context.Background()
	var coll string
	{
		plain := sql.OpenDB(mysqlConnector(t, dsn))
		err := plain.QueryRowContext(ctx, "SELECT @@collation_connection").Scan(&coll)
		_ = plain.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, sc := range scenarios {
		for i, s := range sc.steps {
			sc.steps[i] = strings.ReplaceAll(s, "{coll}", coll)
		}
	}
	run := func(t *testing.T, db *sql.DB, steps []string) []string {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		var out []string
		for _, s := range steps {
			if s == "RELEASE" {
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				if c, err = db.Conn(ctx); err != nil {
					t.Fatal(err)
				}
				out = append(out, "ok")
				continue
			}
			out = append(out, useOutcome(ctx, c, s))
		}
		return out
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			plain := sql.OpenDB(mysqlConnector(t, dsn))
			plain.SetMaxOpenConns(1)
			plain.SetMaxIdleConns(-1) // a fresh connection after each RELEASE: the baseline
			want := run(t, plain, sc.steps)
			_ = plain.Close()
			p := newMySQLPool(t, dsn, pool.Config{MaxConns: 1})
			db := p.OpenDB()
			defer db.Close()
			got := run(t, db, sc.steps)
			if !slices.Equal(got, want) {
				var b strings.Builder
				for i, s := range sc.steps {
					mark := "  "
					if got[i] != want[i] {
						mark = "✗ "
					}
					fmt.Fprintf(&b, "\n%s%-70.70s pool: %-30s database/sql: %s", mark, s, got[i], want[i])
				}
				t.Fatalf("the pool's cached statements differ from database/sql:%s", b.String())
			}
			t.Logf("%q", got)
		})
	}
}

// The reproduction: borrower A runs USE information_schema and a parameterized query
// on ENGINES; the next borrower's identical query runs in the baseline database and must see
// what a fresh connection sees there (no such table), not information_schema.ENGINES.
func TestStmtCacheUseAcrossBorrows(t *testing.T) {
	dsn := mysqltest.DSN(t)
	base := useBaseDB(t, dsn)
	ctx := context.Background()
	const q = "?SELECT COUNT(*) > 0 FROM ENGINES WHERE ? = ?"
	plain := sql.OpenDB(mysqlConnector(t, dsn))
	pc, err := plain.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := useOutcome(ctx, pc, q)
	_ = pc.Close()
	_ = plain.Close()

	p := newMySQLPool(t, dsn, pool.Config{MaxConns: 1})
	db := p.OpenDB()
	defer db.Close()
	a, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := useOutcome(ctx, a, "USE information_schema"); got != "ok" {
		t.Fatal(got)
	}
	inSchema := useOutcome(ctx, a, q)
	_ = a.Close()
	b, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got := useOutcome(ctx, b, q)
	if got != want {
		t.Fatalf("next borrower (database %s) got %q; a fresh connection gets %q (borrower A in information_schema got %q)",
			base, got, want, inSchema)
	}
	if got == inSchema {
		t.Fatalf("the test cannot tell the databases apart: both %q", got)
	}
}
