package pool_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"strconv"
	"testing"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
)

// The LAST_INSERT_ID() an AUTO_INCREMENT insert leaves is reset only before a later borrow's
// statement that could observe it, and every way of observing it sees 0, as on a new connection;
// the borrower's own ids stay visible to it.
func TestLastInsertIDDeferred(t *testing.T) {
	mysqltest.RequireMariaDB(t, "the embedded server ignores SET last_insert_id")
	dsn := mysqltest.DSN(t)
	ctx := context.Background()
	admin := sql.OpenDB(mysqlConnector(t, dsn))
	defer admin.Close()
	mustExec(t, admin, "DROP TABLE IF EXISTS sqlpool_lazyid")
	mustExec(t, admin, "CREATE TABLE sqlpool_lazyid (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)")
	defer mustExec(t, admin, "DROP TABLE IF EXISTS sqlpool_lazyid")
	p := newMySQLPool(t, dsn, pool.Config{MaxConns: 1})
	db := p.OpenDB()
	defer db.Close()

	insert := func(t *testing.T, c *sql.Conn) int64 {
		t.Helper()
		r, err := c.ExecContext(ctx, "INSERT INTO sqlpool_lazyid (v) VALUES (1)")
		if err != nil {
			t.Fatal(err)
		}
		id, _ := r.LastInsertId()
		if id == 0 {
			t.Fatal("no AUTO_INCREMENT id generated")
		}
		return id
	}
	scalar := func(t *testing.T, c *sql.Conn, q string, args ...any) string {
		t.Helper()
		rows, err := c.QueryContext(ctx, q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if !rows.Next() {
			t.Fatalf("%s: no row (%v)", q, rows.Err())
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		return vals[len(vals)-1].String // SHOW VARIABLES: the value column
	}
	explicit := int64(0) // negative ids: no effect on the AUTO_INCREMENT counter
	cases := []struct {
		name string
		// run is the second borrow; it returns what it read and what a new connection reads.
		run func(t *testing.T, c *sql.Conn) (got, want string)
	}{
		{"LAST_INSERT_ID()", func(t *testing.T, c *sql.Conn) (string, string) { return scalar(t, c, "SELECT LAST_INSERT_ID()"), "0" }},
		{"@@identity", func(t *testing.T, c *sql.Conn) (string, string) { return scalar(t, c, "SELECT @@identity"), "0" }},
		{"@@session.last_insert_id", func(t *testing.T, c *sql.Conn) (string, string) {
			return scalar(t, c, "select @@session.last_insert_id"), "0"
		}},
		{"SHOW VARIABLES", func(t *testing.T, c *sql.Conn) (string, string) {
			return scalar(t, c, "SHOW SESSION VARIABLES LIKE 'last_insert_id'"), "0"
		}},
		{"SESSION_VARIABLES", func(t *testing.T, c *sql.Conn) (string, string) {
			return scalar(t, c, "SELECT VARIABLE_VALUE FROM information_schema.SESSION_VARIABLES WHERE VARIABLE_NAME = 'IDENTITY'"), "0"
		}},
		{"parameterized", func(t *testing.T, c *sql.Conn) (string, string) {
			return scalar(t, c, "SELECT LAST_INSERT_ID() + ?", 0), "0"
		}},
		{"sql.Stmt prepared before", func(t *testing.T, c *sql.Conn) (string, string) {
			st, err := c.PrepareContext(ctx, "SELECT LAST_INSERT_ID()")
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var v string
			if err := st.QueryRowContext(ctx).Scan(&v); err != nil {
				t.Fatal(err)
			}
			return v, "0"
		}},
		{"sql_auto_is_null", func(t *testing.T, c *sql.Conn) (string, string) {
			if _, err := c.ExecContext(ctx, "SET sql_auto_is_null = 1"); err != nil {
				t.Fatal(err)
			}
			return scalar(t, c, "SELECT COUNT(*) FROM sqlpool_lazyid WHERE id IS NULL"), "0"
		}},
		{"own insert", func(t *testing.T, c *sql.Conn) (string, string) {
			id := insert(t, c)
			return scalar(t, c, "SELECT LAST_INSERT_ID()"), strconv.FormatInt(id, 10)
		}},
		{"own insert then explicit id", func(t *testing.T, c *sql.Conn) (string, string) {
			id := insert(t, c)
			explicit--
			if _, err := c.ExecContext(ctx, "INSERT INTO sqlpool_lazyid (id, v) VALUES (?, 2)", explicit); err != nil {
				t.Fatal(err)
			}
			return scalar(t, c, "SELECT LAST_INSERT_ID()"), strconv.FormatInt(id, 10)
		}},
		{"explicit id only", func(t *testing.T, c *sql.Conn) (string, string) {
			explicit--
			if _, err := c.ExecContext(ctx, "INSERT INTO sqlpool_lazyid (id, v) VALUES ("+strconv.FormatInt(explicit, 10)+", 2)"); err != nil {
				t.Fatal(err)
			}
			return scalar(t, c, "SELECT LAST_INSERT_ID()"), "0"
		}},
		{"nine inserts", func(t *testing.T, c *sql.Conn) (string, string) {
			var id int64
			for range 9 {
				id = insert(t, c)
			}
			return scalar(t, c, "SELECT LAST_INSERT_ID()"), strconv.FormatInt(id, 10)
		}},
		{"insert by Query", func(t *testing.T, c *sql.Conn) (string, string) {
			rows, err := c.QueryContext(ctx, "INSERT INTO sqlpool_lazyid (v) VALUES (3)")
			if err != nil {
				t.Fatal(err)
			}
			_ = rows.Close()
			return scalar(t, c, "SELECT LAST_INSERT_ID()"), scalar(t, c, "SELECT MAX(id) FROM sqlpool_lazyid WHERE v = 3")
		}},
		{"Raw", func(t *testing.T, c *sql.Conn) (got, want string) {
			err := c.Raw(func(dc any) error {
				rc := pool.Unwrap(dc)
				rows, err := rc.(driver.QueryerContext).QueryContext(ctx, "SELECT LAST_INSERT_ID()", nil)
				if err != nil {
					return err
				}
				defer rows.Close()
				dest := make([]driver.Value, 1)
				if err := rows.Next(dest); err != nil && err != io.EOF {
					return err
				}
				got = fmt.Sprint(dest[0])
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			return got, "0"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			insert(t, c)
			_ = c.Close()
			c, err = db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got, want := tc.run(t, c); got != want {
				t.Fatalf("the next borrower read %s; want %s, as on a new connection", got, want)
			}
		})
	}

	// A statement cached on the connection (here, a parameterized query the borrower before ran)
	// gets the reset before it runs on a later borrow.
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		scalar(t, c, "SELECT LAST_INSERT_ID() * ?", 1)
	}
	_ = c.Close()
	c, err = db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	insert(t, c)
	_ = c.Close()
	c, err = db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := scalar(t, c, "SELECT LAST_INSERT_ID() * ?", 1); got != "0" {
		t.Fatalf("a cached statement read LAST_INSERT_ID() = %s on the next borrow; want 0", got)
	}
}

// Insert cycles — autocommit, and a transaction with one INSERT — run exactly the statements plain
// database/sql runs, counted at the server (the session's Questions), but one: the INSERT's value
// is the cycle's number i, and cycle 1's 1 equals the id cycle 0 generated, so the pool resets
// that stale id before it (the value could be an explicit id, which the OK packet would report
// as the INSERT's own); its generated id 2 shows that v is not the AUTO_INCREMENT column, and the
// INSERT costs nothing more.
func TestInsertCycleServerStatements(t *testing.T) {
	mysqltest.RequireMariaDB(t, "the embedded server keeps no session status counters")
	dsn := mysqltest.DSN(t)
	ctx := context.Background()
	admin := sql.OpenDB(mysqlConnector(t, dsn))
	defer admin.Close()
	mustExec(t, admin, "DROP TABLE IF EXISTS sqlpool_cycleid")
	mustExec(t, admin, "CREATE TABLE sqlpool_cycleid (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)")
	defer mustExec(t, admin, "DROP TABLE IF EXISTS sqlpool_cycleid")

	const cycles = 200
	// status runs the workload on db (one session) and returns the session's Questions and
	// Com_set_option before and after it.
	status := func(db *sql.DB) (questions, sets int64) {
		read := func() (q, s int64) {
			rows, err := db.QueryContext(ctx, "SHOW SESSION STATUS WHERE Variable_name IN ('Questions', 'Com_set_option')")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var name string
				var v int64
				if err := rows.Scan(&name, &v); err != nil {
					t.Fatal(err)
				}
				if name == "Questions" {
					q = v
				} else {
					s = v
				}
			}
			return q, s
		}
		q0, s0 := read()
		for i := range cycles {
			if i%2 == 0 {
				if _, err := db.ExecContext(ctx, "INSERT INTO sqlpool_cycleid (v) VALUES (?)", i); err != nil {
					t.Fatal(err)
				}
				continue
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO sqlpool_cycleid (v) VALUES (?)", i); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		q1, s1 := read()
		return q1 - q0, s1 - s0
	}
	p := newMySQLPool(t, dsn, pool.Config{MaxConns: 1})
	db := p.OpenDB()
	defer db.Close()
	plain := sql.OpenDB(mysqlConnector(t, dsn))
	defer plain.Close()
	plain.SetMaxOpenConns(1)
	pq, ps := status(db)
	dq, ds := status(plain)
	if pq != dq+1 || ps != 1 || ds != 0 {
		t.Fatalf("%d insert cycles: %d statements (%d SET) at the server through the pool, %d (%d SET) through plain database/sql; want one SET more",
			cycles, pq, ps, dq, ds)
	}
	t.Logf("%d insert cycles: %d statements at the server through the pool and through plain database/sql", cycles, pq)
}
