package pgdialect_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strings"
	"testing"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/internal/pgtest"
	"github.com/sqlpool/sqlpool/pgdialect"
	"github.com/sqlpool/sqlpool/pool"
)

// drivers are the two database/sql drivers every PostgreSQL test runs with.
var drivers = []struct {
	name string
	conn func(tb testing.TB, s *pgtest.Server) driver.Connector
}{
	{"pgx", func(tb testing.TB, s *pgtest.Server) driver.Connector { return s.PgxConnector(tb) }},
	{"pq", func(tb testing.TB, s *pgtest.Server) driver.Connector { return s.PqConnector(tb) }},
}

func newPool(t *testing.T, c driver.Connector, cfg pool.Config) *pool.Pool {
	t.Helper()
	p, err := pool.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func setupRoles(t *testing.T, s *pgtest.Server) {
	s.Exec(t,
		`DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'sqlpool_r1') THEN CREATE ROLE sqlpool_r1; END IF; END $$`,
		`CREATE SCHEMA IF NOT EXISTS sqlpool_s1`,
		`CREATE TABLE IF NOT EXISTS sqlpool_sess (id int)`,
		`GRANT ALL ON sqlpool_sess TO sqlpool_r1`,
		`CREATE SEQUENCE IF NOT EXISTS sqlpool_seq`,
		`CREATE OR REPLACE FUNCTION sqlpool_currval() RETURNS text LANGUAGE plpgsql AS
		 $$ BEGIN RETURN currval('sqlpool_seq')::text; EXCEPTION WHEN others THEN RETURN 'undefined'; END $$`,
	)
}

// sessionCase is one item of session state: what a borrower does, and a query whose answer
// the next borrower must find as at the baseline.
type sessionCase struct {
	name  string
	stmts []string
	check string // one row, one text column
	// replaced: the connection is closed at release (PostgreSQL removes a custom setting and
	// the temporary schema only with the session) and the next borrower gets a new one.
	replaced bool
}

var sessionCases = []sessionCase{
	{"SET", []string{"SET work_mem = '1234kB'"}, "SHOW work_mem", false},
	{"SET SESSION", []string{"SET SESSION statement_timeout = '7s'"}, "SHOW statement_timeout", false},
	{"SET custom", []string{"SET app.tenant_id = '42'"}, "SELECT coalesce(current_setting('app.tenant_id', true), 'NULL')", true},
	{"RESET then SET", []string{"SET work_mem = '2MB'", "RESET work_mem", "SET work_mem = '3MB'"}, "SHOW work_mem", false},
	{"SET LOCAL in an open transaction", []string{"BEGIN", "SET LOCAL work_mem = '5MB'"}, "SHOW work_mem", false},
	{"SET ROLE", []string{"SET ROLE sqlpool_r1"}, "SELECT current_user", false},
	{"SET SESSION AUTHORIZATION", []string{"SET SESSION AUTHORIZATION sqlpool_r1"}, "SELECT session_user || ' ' || current_user", false},
	{"search_path", []string{"SET search_path TO sqlpool_s1"}, "SHOW search_path", false},
	{"SET SCHEMA", []string{"SET SCHEMA 'sqlpool_s1'"}, "SHOW search_path", false},
	{"SET SESSION CHARACTERISTICS", []string{"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ ONLY"},
		"SELECT current_setting('default_transaction_isolation') || ' ' || current_setting('default_transaction_read_only')", false},
	{"LISTEN", []string{"LISTEN sqlpool_ch"}, "SELECT count(*)::text FROM pg_listening_channels()", false},
	{"advisory lock", []string{"SELECT pg_advisory_lock(4242)", "SELECT pg_advisory_lock_shared(4343)"},
		"SELECT count(*)::text FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()", false},
	{"try advisory lock", []string{"SELECT pg_try_advisory_lock(1, 2)"},
		"SELECT count(*)::text FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()", false},
	{"temporary table", []string{"CREATE TEMP TABLE sqlpool_tmp (a int)", "INSERT INTO sqlpool_tmp VALUES (1)"},
		"SELECT pg_my_temp_schema()::text", true},
	{"SELECT INTO TEMP", []string{"SELECT 1 AS a INTO TEMP sqlpool_tmp2"},
		"SELECT pg_my_temp_schema()::text", true},
	{"SQL PREPARE", []string{"PREPARE sqlpool_q1 AS SELECT 1", `PREPARE "SqlPool Q2" (int) AS SELECT $1`},
		"SELECT count(*)::text FROM pg_prepared_statements WHERE from_sql", false},
	{"DECLARE WITH HOLD", []string{"BEGIN", "DECLARE sqlpool_c CURSOR WITH HOLD FOR SELECT 1", "COMMIT"},
		"SELECT count(*)::text FROM pg_cursors", false},
	{"set_config session", []string{"SELECT set_config('app.user_id', '7', false)"}, "SELECT coalesce(current_setting('app.user_id', true), 'NULL')", true},
	{"set_config role", []string{"SELECT set_config('role', 'sqlpool_r1', false)"}, "SELECT current_user", false},
	{"open transaction", []string{"BEGIN", "INSERT INTO sqlpool_sess VALUES (1)"},
		"SELECT coalesce(pg_current_xact_id_if_assigned()::text, 'none') || ' ' || (SELECT count(*) FROM sqlpool_sess)::text", false},
	{"failed transaction", []string{"BEGIN", "SELECT 1/0"}, "SELECT 'usable'", false},
	{"DO block", []string{"DO $$ BEGIN PERFORM set_config('app.do', 'x', false); EXECUTE 'LISTEN sqlpool_do'; END $$"},
		"SELECT coalesce(current_setting('app.do', true), 'NULL') || ' ' || (SELECT count(*) FROM pg_listening_channels())::text", true},
	{"DO block without custom settings", []string{"DO $$ BEGIN PERFORM set_config('work_mem', '3MB', false); EXECUTE 'LISTEN sqlpool_do2'; END $$"},
		"SELECT current_setting('work_mem') || ' ' || (SELECT count(*) FROM pg_listening_channels())::text", false},
	{"SET TRANSACTION outside a transaction", []string{"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"},
		"SELECT count(*)::text FROM pg_settings WHERE source = 'session'", false},
	{"nextval", []string{"SELECT nextval('sqlpool_seq')"}, "SELECT sqlpool_currval()", false},
	{"multi-statement", []string{"SELECT 1; SET work_mem = '6MB'; LISTEN sqlpool_m"},
		"SELECT current_setting('work_mem') || ' ' || (SELECT count(*) FROM pg_listening_channels())::text", false},
}

// TestSessionStateNeverReachesTheNextBorrower: for every item of session state, with pgx
// stdlib and lib/pq, through p.OpenDB() and through sql.OpenDB(p), the next borrower of the same
// backend (same pid: the connection was reset, not replaced) sees the baseline, and a
// statement prepared before still works after the reset.
func TestSessionStateNeverReachesTheNextBorrower(t *testing.T) {
	s := pgtest.Shared(t)
	setupRoles(t, s)
	ctx := context.Background()
	for _, d := range drivers {
		for _, mode := range []string{"OpenDB", "sql.OpenDB"} {
			for _, tc := range sessionCases {
				t.Run(d.name+"/"+mode+"/"+tc.name, func(t *testing.T) {
					s.Exec(t, "DELETE FROM sqlpool_sess")
					p := newPool(t, d.conn(t, s), pool.Config{MaxConns: 1})
					var db *sql.DB
					if mode == "OpenDB" {
						db = p.OpenDB()
					} else {
						db = sql.OpenDB(p)
					}
					defer db.Close()
					stmt, err := db.PrepareContext(ctx, "SELECT $1::int + 1")
					if err != nil {
						t.Fatal(err)
					}
					defer stmt.Close()
					c, err := db.Conn(ctx)
					if err != nil {
						t.Fatal(err)
					}
					var pid int
					if err := c.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
						t.Fatal(err)
					}
					var baseline string
					if err := c.QueryRowContext(ctx, tc.check).Scan(&baseline); err != nil {
						t.Fatal(err)
					}
					for _, q := range tc.stmts {
						_, err := c.ExecContext(ctx, q)
						if err != nil && !(tc.name == "failed transaction" && strings.Contains(err.Error(), "22012")) &&
							!(tc.name == "failed transaction" && strings.Contains(err.Error(), "division by zero")) {
							t.Fatalf("%s: %v", q, err)
						}
					}
					if err := c.Close(); err != nil {
						t.Fatal(err)
					}
					c, err = db.Conn(ctx)
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					var pid2 int
					var got string
					if err := c.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid2); err != nil {
						t.Fatal(err)
					}
					if err := c.QueryRowContext(ctx, tc.check).Scan(&got); err != nil {
						t.Fatalf("next borrower: %s: %v", tc.check, err)
					}
					if got != baseline {
						t.Errorf("next borrower sees %q, baseline %q", got, baseline)
					}
					if pid2 != pid && !tc.replaced {
						t.Errorf("the connection was replaced (pid %d, then %d): want it reset in place", pid, pid2)
					}
					if pid2 == pid && tc.replaced {
						t.Errorf("the connection was reset in place (pid %d): want it replaced", pid)
					}
					c.Close()
					var n int
					if err := stmt.QueryRowContext(ctx, 41).Scan(&n); err != nil || n != 42 {
						t.Errorf("prepared statement after the reset: %d, %v", n, err)
					}
				})
			}
		}
	}
}

// TestCleanCycleSendsNothing: borrow, query, return, borrow again: the pool adds no byte to the
// statement's own, with both drivers, counted by a proxy in front of the server.
func TestCleanCycleSendsNothing(t *testing.T) {
	s := pgtest.Shared(t)
	ctx := context.Background()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			px := mysqltest.NewProxy(t, s.Addr())
			p := newPool(t, d.conn(t, s.Via(px.Addr())), pool.Config{MaxConns: 1})
			db := p.OpenDB()
			defer db.Close()
			one := func() {
				c, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var n int
				if err := c.QueryRowContext(ctx, "SELECT 1").Scan(&n); err != nil {
					t.Fatal(err)
				}
				c.Close()
			}
			one()
			px.Reset()
			one()
			per := px.Counts().ClientBytes
			px.Reset()
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			if b := px.Counts().ClientBytes; b != 0 {
				t.Errorf("an empty borrow/return cycle sent %d bytes", b)
			}
			px.Reset()
			for range 20 {
				one()
			}
			if b := px.Counts().ClientBytes; b != 20*per {
				t.Errorf("20 cycles sent %d bytes, want 20 × %d (the query's own)", b, per)
			}
		})
	}
}

func TestDialectIsChosenFromTheConnector(t *testing.T) {
	s := pgtest.Shared(t)
	for _, d := range drivers {
		p := newPool(t, d.conn(t, s), pool.Config{MaxConns: 1})
		if p == nil {
			t.Fatal("no pool")
		}
	}
	_ = pgdialect.Dialect
}
