package txstate

import "testing"

// Resolution follows the current database for the pool's statement cache, says when it cannot,
// and changes its generation whenever a prepared statement may need preparing again.
func TestResolution(t *testing.T) {
	tr := NewTracker(Baseline{Database: "app", Autocommit: true, Isolation: "REPEATABLE-READ"})
	db, gen, known := tr.Resolution()
	if db != "app" || !known {
		t.Fatalf("after Reset: %q known %v; want app, known", db, known)
	}
	step := func(what string, do func(), wantDB string, wantKnown, wantNewGen bool) {
		t.Helper()
		do()
		d, g, k := tr.Resolution()
		if d != wantDB && wantKnown || k != wantKnown || (g != gen) != wantNewGen {
			t.Fatalf("%s: db %q known %v new generation %v; want %q %v %v", what, d, k, g != gen, wantDB, wantKnown, wantNewGen)
		}
		gen = g
	}
	st := func(q string) func() { return func() { tr.Statement(q) } }
	step("SELECT", st("SELECT 1"), "app", true, false)
	step("USE tenant1", st("USE tenant1"), "tenant1", true, true)
	step("USE tenant1 again", st("USE `tenant1`"), "tenant1", true, false)
	step("INSERT", st("INSERT INTO t VALUES (1)"), "tenant1", true, false)
	step("a failed USE", func() { tr.Statement("USE nosuchdb"); tr.Failed() }, "", false, true)
	step("USE app", st("USE app"), "app", true, true)
	step("DROP DATABASE", st("DROP DATABASE app"), "", false, true)
	step("Done", tr.Done, "app", true, true)
	step("a failed SELECT", func() { tr.Statement("SELECT 1"); tr.Failed() }, "app", true, false)
	step("SET sql_mode", st("SET sql_mode = 'ANSI_QUOTES'"), "app", false, true)
	step("USE after an unknown state", st("USE app2"), "app2", false, true)
	step("Done", tr.Done, "app", true, true)
	step("SET NAMES", st("SET NAMES latin1"), "app", false, true)
	step("Done", tr.Done, "app", true, true)
	step("Raw", tr.Unknown, "app", false, true)
	step("Done", tr.Done, "app", true, true)
	// MariaDB refuses to prepare a write in a read-only session or transaction (1792): a
	// statement cached under the baseline must not hide that.
	step("SET SESSION TRANSACTION READ ONLY", st("SET SESSION TRANSACTION READ ONLY"), "app", false, false)
	step("Done", tr.Done, "app", true, true)
	step("SET TRANSACTION READ ONLY", st("SET TRANSACTION READ ONLY"), "app", false, false)
	step("Done", tr.Done, "app", true, true)
	step("START TRANSACTION READ ONLY", st("START TRANSACTION READ ONLY"), "app", false, false)
	step("COMMIT", st("COMMIT"), "app", true, false)
	step("BEGIN", st("BEGIN"), "app", true, false)
	step("ROLLBACK", st("ROLLBACK"), "app", true, false)
	// Under LOCK TABLES a statement on a table not locked fails to prepare (1100).
	step("LOCK TABLES", st("LOCK TABLES t READ"), "app", false, false)
	step("UNLOCK TABLES", st("UNLOCK TABLES"), "app", true, false)
	step("XA START", st("XA START 'x'"), "app", false, false)
	step("XA ROLLBACK", func() { tr.Statement("XA END 'x'"); tr.Statement("XA ROLLBACK 'x'") }, "app", true, false)
	// A statement prepared against a temporary table would outlive the DROP at release, and the
	// next borrower's Prepare of the same text would succeed where a new connection's fails with
	// 1146 (found by the differential fuzzer, seed 30349).
	tr.Statement("CREATE TEMPORARY TABLE tmp1 (x INT)")
	if _, _, k := tr.Resolution(); k {
		t.Fatal("CREATE TEMPORARY TABLE: known; want unknown while a temporary table exists")
	}
	tr.Done()
	if d, _, k := tr.Resolution(); d != "app" || !k {
		t.Fatalf("Done after a temporary table: %q known %v; want app, known", d, k)
	}

	var zero Tracker // no baseline: the database at connect is "", known until changed
	if d, _, k := zero.Resolution(); d != "" || !k {
		t.Fatalf("zero Tracker: %q known %v; want \"\", known", d, k)
	}
	if n := testing.AllocsPerRun(100, func() { tr.Resolution() }); n != 0 {
		t.Fatalf("Resolution allocates %v times", n)
	}
}
