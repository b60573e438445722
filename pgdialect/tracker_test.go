package pgdialect

import (
	"database/sql/driver"
	"regexp"
	"strings"
	"testing"
)

func planOf(t *testing.T, stmts ...string) (string, bool) {
	t.Helper()
	tr := &tracker{}
	for _, s := range stmts {
		tr.Statement(s)
	}
	p := tr.Plan()
	if p.Discard {
		return "DISCARD CONNECTION", tr.Clean()
	}
	plan := strings.Join(p.Statements, " | ")
	plan = checkRE.ReplaceAllString(plan, "CHECK")
	return plan, tr.Clean()
}

var checkRE = regexp.MustCompile(`DO \$sqlpool\$.*\$sqlpool\$`)

// everythingPlan is the plan for a session state the tracker cannot follow.
const everythingPlan = "CLOSE ALL; RESET SESSION AUTHORIZATION; RESET ROLE; RESET ALL; UNLISTEN *; SELECT pg_advisory_unlock_all(); DISCARD SEQUENCES; RESET transaction_isolation; RESET transaction_read_only; RESET transaction_deferrable; CHECK"

func TestTrackerPlans(t *testing.T) {
	tests := []struct {
		name  string
		stmts []string
		plan  string
	}{
		{"plain select", []string{"SELECT 1", "select * from t where a = $1", "INSERT INTO t VALUES (1)"}, ""},
		{"set", []string{"SET work_mem = '1MB'"}, "RESET work_mem"},
		{"set session to", []string{"set session statement_timeout to 5"}, "RESET statement_timeout"},
		{"set custom", []string{"SET app.tenant_id = '42'"}, "DISCARD CONNECTION"},
		{"set local custom", []string{"BEGIN", "SET LOCAL app.tenant_id = '42'", "COMMIT"}, "DISCARD CONNECTION"},
		{"reset custom", []string{"RESET app.x"}, "DISCARD CONNECTION"},
		{"set twice", []string{"SET work_mem = '1MB'", "SET work_mem='2MB'", "SET search_path TO a, public"}, "RESET work_mem; RESET search_path"},
		{"set local", []string{"BEGIN", "SET LOCAL work_mem = '1MB'", "COMMIT"}, ""},
		{"set role", []string{"SET ROLE r1"}, "RESET ROLE"},
		{"set role guc", []string{"SET role = 'r1'"}, "RESET ROLE"},
		{"session authorization", []string{"SET SESSION AUTHORIZATION r1"}, "RESET SESSION AUTHORIZATION; RESET ROLE"},
		{"schema", []string{"SET SCHEMA 'x'"}, "RESET search_path"},
		{"time zone", []string{"SET TIME ZONE 'UTC'"}, "RESET timezone"},
		{"characteristics", []string{"SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"}, "RESET default_transaction_isolation; RESET default_transaction_deferrable; RESET default_transaction_read_only"},
		{"set transaction", []string{"BEGIN", "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", "COMMIT"}, ""},
		{"set transaction outside", []string{"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"}, "RESET transaction_isolation; RESET transaction_read_only; RESET transaction_deferrable"},
		{"set transaction_isolation", []string{"BEGIN", "SET transaction_isolation = 'serializable'", "COMMIT"}, "RESET transaction_isolation; RESET transaction_read_only; RESET transaction_deferrable"},
		{"function", []string{"SELECT my_func($1)"}, everythingPlan},
		{"known functions", []string{"SELECT count(*), coalesce(max(v), '') FROM t WHERE id IN ($1, $2)", "INSERT INTO t (a, b) VALUES ($1, lower($2))", "select pg_catalog.myfn(1)", "WITH x (a) AS (SELECT 1) SELECT a::numeric(10, 2) FROM x"}, ""},
		{"copy with columns", []string{"COPY t (a, b) FROM STDIN BINARY", "copy public.t ( a ) to stdout", "SELECT host(a), jsonb_exists(j, 'k') FROM t"}, ""},
		{"copy query with function", []string{"COPY (SELECT my_func()) TO STDOUT"}, everythingPlan},
		{"create function", []string{"CREATE FUNCTION f(a int) RETURNS int AS 'select 1' LANGUAGE sql"}, ""},
		{"do set_config custom", []string{"DO $$BEGIN PERFORM set_config('app.tenant', 'from_do', false); END$$"}, "DISCARD CONNECTION"},
		{"do set custom", []string{"DO $$BEGIN SET app.tenant = 'x'; END$$"}, "DISCARD CONNECTION"},
		{"listen", []string{"LISTEN ch"}, "UNLISTEN *"},
		{"listen unlisten", []string{"LISTEN ch", "UNLISTEN *"}, ""},
		{"advisory", []string{"SELECT pg_advisory_lock(1)"}, "SELECT pg_advisory_unlock_all()"},
		{"try advisory", []string{"select PG_TRY_ADVISORY_LOCK($1, $2)"}, "SELECT pg_advisory_unlock_all()"},
		{"xact advisory", []string{"BEGIN", "SELECT pg_advisory_xact_lock(1)", "COMMIT"}, ""},
		{"temp table", []string{"CREATE TEMP TABLE tt (a int)"}, "DISCARD CONNECTION"},
		{"temporary table", []string{"create global temporary table tt (a int)"}, "DISCARD CONNECTION"},
		{"select into temp", []string{"SELECT 1 AS a INTO TEMP tt"}, "DISCARD CONNECTION"},
		{"pg_temp mention", []string{"SELECT * FROM pg_temp.x"}, "CHECK"},
		{"pg_temp", []string{"CREATE FUNCTION pg_temp.f() RETURNS int AS 'select 1' LANGUAGE sql"}, "DISCARD CONNECTION"},
		{"prepare", []string{"PREPARE q1 AS SELECT 1", `PREPARE "Q 2" (int) AS SELECT $1`}, `DEALLOCATE "q1"; DEALLOCATE "Q 2"`},
		{"prepare deallocate", []string{"PREPARE q1 AS SELECT 1", "DEALLOCATE q1"}, ""},
		{"cursor with hold", []string{"BEGIN", "DECLARE c CURSOR WITH HOLD FOR SELECT 1", "COMMIT"}, "CLOSE ALL"},
		{"cursor", []string{"BEGIN", "DECLARE c CURSOR FOR SELECT 1", "COMMIT"}, ""},
		{"set_config session", []string{"SELECT set_config('app.user', 'bob', false)"}, "DISCARD CONNECTION"},
		{"set_config work_mem", []string{"SELECT set_config('work_mem', '1MB', false)"}, "RESET work_mem"},
		{"set_config local", []string{"SELECT set_config('app.user', 'bob', true)"}, "DISCARD CONNECTION"},
		{"set_config local work_mem", []string{"SELECT set_config('work_mem', '1MB', true)"}, ""},
		{"set_config unknown", []string{"SELECT set_config($1, $2, false)"}, everythingPlan},
		{"set_config role", []string{"SELECT set_config('role', 'r1', false)"}, "RESET ROLE"},
		{"open tx", []string{"BEGIN"}, "ROLLBACK"},
		{"committed tx", []string{"BEGIN", "SELECT 1", "END"}, ""},
		{"rollback to savepoint", []string{"BEGIN", "SAVEPOINT a", "ROLLBACK TO SAVEPOINT a"}, "ROLLBACK"},
		{"commit and chain", []string{"BEGIN", "COMMIT AND CHAIN"}, "ROLLBACK"},
		{"multi", []string{"SELECT 1; SET work_mem = '2MB'; LISTEN x"}, "RESET work_mem; UNLISTEN *"},
		{"comment hides nothing", []string{"/* SET x = 1 */ SELECT 1 -- ; LISTEN y"}, ""},
		{"string hides", []string{"SELECT 'LISTEN x; SET y = 1'"}, ""},
		{"dollar hides", []string{"SELECT $q$ ; LISTEN x $q$"}, ""},
		{"do", []string{"DO $$ BEGIN PERFORM 1; END $$"}, everythingPlan},
		{"nextval", []string{"SELECT nextval('s')"}, "DISCARD SEQUENCES"},
		{"load", []string{"LOAD 'auto_explain'"}, "DISCARD CONNECTION"},
		{"discard all", []string{"SET x.y = 1", "LISTEN a", "DISCARD ALL"}, "DISCARD CONNECTION"},
		{"deallocate all", []string{"PREPARE q AS SELECT 1", "DEALLOCATE ALL"}, "DISCARD CONNECTION"},
		{"discard temp inside a transaction", []string{"CREATE TEMP TABLE tt (a int)", "BEGIN", "DISCARD TEMP", "ROLLBACK"}, "DISCARD CONNECTION"},
		{"unlisten inside a transaction", []string{"LISTEN a", "BEGIN", "UNLISTEN *", "COMMIT"}, "UNLISTEN *"},
		{"unterminated", []string{"LISTEN x; SELECT 'abc"}, everythingPlan},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, clean := planOf(t, tt.stmts...)
			if plan != tt.plan {
				t.Fatalf("plan = %q, want %q", plan, tt.plan)
			}
			if clean != (tt.plan == "") {
				t.Fatalf("Clean = %v with plan %q", clean, plan)
			}
		})
	}
}

func TestTrackerTxFromDatabaseSQL(t *testing.T) {
	tr := &tracker{}
	tr.Begin(driver.TxOptions{ReadOnly: true})
	if !tr.ReadOnlyTx() || tr.Clean() {
		t.Fatal("after Begin(ReadOnly): want read-only, not clean")
	}
	tr.Commit()
	tr.Failed() // a failed COMMIT may leave the transaction open
	if p := tr.Plan(); len(p.Statements) != 1 || p.Statements[0] != "ROLLBACK" {
		t.Fatalf("after a failed Commit: plan %v, want ROLLBACK", p.Statements)
	}
	tr.Done()
	if !tr.Clean() || tr.ReadOnlyTx() {
		t.Fatal("Done must leave the tracker clean")
	}
}

// A failed statement that would have undone state (UNLISTEN * in an aborted transaction)
// leaves the state in the plan.
func TestTrackerFailedClearKeepsState(t *testing.T) {
	tr := &tracker{}
	tr.Statement("LISTEN ch")
	tr.Statement("UNLISTEN *")
	tr.Failed()
	if p := tr.Plan(); len(p.Statements) != 1 || p.Statements[0] != "UNLISTEN *" {
		t.Fatalf("plan %v, want UNLISTEN *", p.Statements)
	}
}

func TestTrackerTxStatusWins(t *testing.T) {
	status := byte('I')
	tr := &tracker{txStatus: func() byte { return status }}
	tr.Statement("BEGIN") // say, inside a DO block the tracker does not see ending it
	if !tr.Clean() {
		t.Fatal("protocol status idle: want clean")
	}
	status = 'E'
	if tr.Clean() {
		t.Fatal("failed transaction ('E'): want not clean")
	}
	if p := tr.Plan(); len(p.Statements) != 1 || p.Statements[0] != "ROLLBACK" {
		t.Fatalf("plan %v", p.Statements)
	}
}

func TestFastPathDoesNotAllocate(t *testing.T) {
	tr := &tracker{pgxOK: true}
	for _, q := range []string{
		"SELECT id, name FROM users WHERE id = $1",
		"INSERT INTO users (id, name) VALUES ($1, lower($2))",
		"INSERT INTO app.users (id) VALUES ($1)",
		"SELECT count(*), max(v) FROM t WHERE id IN ($1, $2)",
	} {
		if !fastPath(q) {
			t.Errorf("%q: not on the fast path", q)
		}
		if n := testing.AllocsPerRun(100, func() { tr.Statement(q); tr.Clean() }); n != 0 {
			t.Fatalf("Statement(%q) allocates %.1f times", q, n)
		}
	}
	for _, q := range []string{"SELECT my_fn($1)", "SELECT app.my_fn(1)", "SELECT * FROM t WHERE v = f(1)"} {
		if fastPath(q) {
			t.Errorf("%q: on the fast path, which does not look at unknown functions", q)
		}
	}
}
