package txstate

import (
	"strings"
	"testing"
)

// lazyBase is testBase with sql_auto_is_null recorded off, as the baseline query records it.
func lazyBase(autoIsNull string) Baseline {
	b := testBase
	b.Variables.Set("sql_auto_is_null", autoIsNull)
	b.Variables.Set("time_zone", "SYSTEM")
	return b
}

// insertBorrow is a borrow whose INSERT generated id, then its release (EndBorrow, Clean).
func insertBorrow(t *testing.T, tr *Tracker, id int64) {
	t.Helper()
	q := "INSERT INTO t (v) VALUES (?)"
	if s := tr.BeforeStatement(q, true); s != "" {
		t.Fatalf("before an INSERT whose id is reported: %q; want nothing", s)
	}
	tr.Statement(q)
	tr.InsertID(id)
	tr.EndBorrow()
	if !tr.Clean() {
		t.Fatalf("a borrow whose only effect is a generated id is not clean: %+v", tr.Plan())
	}
}

func TestDeferInsertID(t *testing.T) {
	observers := []string{
		"SELECT LAST_INSERT_ID()", "select last_insert_id() + 1", "SELECT @@identity", "SELECT @@session.LAST_INSERT_ID",
		"SHOW SESSION VARIABLES LIKE 'last%'", "SHOW VARIABLES",
		"SELECT * FROM information_schema.SESSION_VARIABLES", "SELECT * FROM performance_schema.variables_by_thread",
		"SET sql_auto_is_null = 1", "SET STATEMENT sql_auto_is_null=1 FOR SELECT * FROM t WHERE id IS NULL",
		"CALL p()", "EXECUTE s", "EXECUTE IMMEDIATE 'SELECT 1'", "PREPARE s FROM @q", "SELECT 1; SELECT 2",
		"FLUSH TABLES", "'unreadable", "",
		"UPDATE t SET id = LAST_INSERT_ID(id + 1)",
	}
	quiet := []string{"SELECT 1", "SELECT a FROM t WHERE id = ?", "UPDATE t SET a = 1", "BEGIN", "COMMIT",
		"SET time_zone = '+00:00'", "INSERT INTO t (v) VALUES (1)", "SELECT @tenant", "DELETE FROM t WHERE id IS NULL"}
	for _, q := range observers {
		tr := NewTracker(lazyBase("0"))
		tr.SetDeferInsertID(true)
		insertBorrow(t, tr, 5)
		if s := tr.BeforeStatement(q, true); s != "SET last_insert_id=0" {
			t.Errorf("before %q on a stale id: %q; want SET last_insert_id=0", q, s)
			continue
		}
		tr.BeforeDone()
		if tr.LastInsertIDStale() || tr.BeforeStatement(q, true) != "" {
			t.Errorf("after the reset before %q: still stale", q)
		}
	}
	for _, q := range quiet {
		tr := NewTracker(lazyBase("0"))
		tr.SetDeferInsertID(true)
		insertBorrow(t, tr, 5)
		if s := tr.BeforeStatement(q, true); s != "" {
			t.Errorf("before %q: %q; want nothing (it cannot observe LAST_INSERT_ID())", q, s)
		}
	}

	t.Run("own ids kept", func(t *testing.T) {
		tr := NewTracker(lazyBase("0"))
		tr.SetDeferInsertID(true)
		insertBorrow(t, tr, 5)
		tr.Statement("INSERT INTO t (v) VALUES (1)")
		tr.InsertID(6)
		tr.Statement("INSERT INTO t (id, v) VALUES (100, 1)") // explicit: LAST_INSERT_ID() stays 6
		tr.InsertID(100)
		want := "SET last_insert_id=IF(LAST_INSERT_ID() IN (6,100),LAST_INSERT_ID(),0)"
		if s := tr.BeforeStatement("SELECT LAST_INSERT_ID()", false); s != want {
			t.Fatalf("reset: %q; want %q", s, want)
		}
	})
	t.Run("candidates bounded", func(t *testing.T) {
		tr := NewTracker(lazyBase("0"))
		tr.SetDeferInsertID(true)
		insertBorrow(t, tr, 5)
		for i := range maxIDCands {
			q := "INSERT INTO t (v) VALUES (1)"
			if s := tr.BeforeStatement(q, true); s != "" {
				t.Fatalf("insert %d: %q", i, s)
			}
			tr.Statement(q)
			tr.InsertID(int64(10 + i))
		}
		if s := tr.BeforeStatement("INSERT INTO t (v) VALUES (1)", true); !strings.HasPrefix(s, "SET last_insert_id=IF(") {
			t.Fatalf("the insert past the bound: %q; want the reset first", s)
		}
	})
	t.Run("INSERT through Query", func(t *testing.T) {
		tr := NewTracker(lazyBase("0"))
		tr.SetDeferInsertID(true)
		insertBorrow(t, tr, 5)
		if s := tr.BeforeStatement("INSERT INTO t (v) VALUES (1) RETURNING id", false); s != "SET last_insert_id=0" {
			t.Fatalf("before an INSERT whose id is not reported: %q; want the reset", s)
		}
	})
	t.Run("stale across clean borrows", func(t *testing.T) {
		tr := NewTracker(lazyBase("0"))
		tr.SetDeferInsertID(true)
		insertBorrow(t, tr, 5)
		for range 3 {
			tr.Statement("SELECT 1")
			tr.EndBorrow()
			if !tr.Clean() || !tr.LastInsertIDStale() {
				t.Fatal("a clean borrow after an insert: want clean and still stale")
			}
		}
	})
	t.Run("no id generated", func(t *testing.T) {
		tr := NewTracker(lazyBase("0"))
		tr.SetDeferInsertID(true)
		tr.Statement("INSERT INTO n (id) VALUES (1)")
		tr.InsertID(0)
		tr.EndBorrow()
		if tr.LastInsertIDStale() {
			t.Fatal("an INSERT that generated no id made LAST_INSERT_ID() stale")
		}
	})
	t.Run("reset in the release SET", func(t *testing.T) {
		tr := NewTracker(lazyBase("0"))
		tr.SetDeferInsertID(true)
		insertBorrow(t, tr, 5)
		tr.Statement("SET @tenant = 7")
		tr.EndBorrow()
		p := tr.Plan()
		if len(p.Statements) != 1 || !strings.Contains(p.Statements[0], "last_insert_id=0") {
			t.Fatalf("plan %q: want the one SET to reset LAST_INSERT_ID() too", p.Statements)
		}
		tr.Done()
		if tr.LastInsertIDStale() {
			t.Fatal("stale after a plan that reset it")
		}
	})
	t.Run("sql_auto_is_null on", func(t *testing.T) {
		for _, v := range []string{"1", ""} {
			b := lazyBase(v)
			if v == "" {
				b = testBase // not recorded
			}
			tr := NewTracker(b)
			tr.SetDeferInsertID(true)
			tr.Statement("INSERT INTO t (v) VALUES (1)")
			tr.InsertID(5)
			tr.EndBorrow()
			if p := tr.Plan(); tr.Clean() || len(p.Statements) != 1 || !strings.Contains(p.Statements[0], "last_insert_id=0") {
				t.Fatalf("sql_auto_is_null %q: plan %+v; want the reset at release", v, p)
			}
		}
	})
	t.Run("off", func(t *testing.T) {
		tr := NewTracker(lazyBase("0"))
		tr.Statement("INSERT INTO t (v) VALUES (1)")
		tr.InsertID(5)
		tr.EndBorrow()
		if tr.Clean() || tr.BeforeStatement("SELECT LAST_INSERT_ID()", false) != "" {
			t.Fatal("without SetDeferInsertID the reset is not at release")
		}
	})
}

func TestBeforeStatementDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not exact under -race")
	}
	tr := NewTracker(lazyBase("0"))
	tr.SetDeferInsertID(true)
	for _, s := range benchStatements {
		if n := testing.AllocsPerRun(100, func() { tr.BeforeStatement(s.q, true) }); n != 0 {
			t.Errorf("BeforeStatement(%.40q), nothing stale, allocates %v times", s.q, n)
		}
	}
	insertBorrow(t, tr, 5)
	for _, q := range []string{"SELECT a FROM t WHERE id = ?", "INSERT INTO t (v) VALUES (?)", "SELECT LAST_INSERT_ID()"} {
		if n := testing.AllocsPerRun(100, func() { tr.BeforeStatement(q, true) }); n != 0 {
			t.Errorf("BeforeStatement(%q), stale, allocates %v times", q, n)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		tr.Statement("INSERT INTO t (v) VALUES (?)")
		tr.InsertID(9)
		tr.EndBorrow()
		tr.Clean()
	}); n != 0 {
		t.Errorf("an insert borrow allocates %v times", n)
	}
}

func BenchmarkBeforeStatement(b *testing.B) {
	tr := NewTracker(lazyBase("0"))
	tr.SetDeferInsertID(true)
	q := "INSERT INTO zipkin_spans (trace_id, id, name, parent_id, start_ts) VALUES (?, ?, ?, ?, ?)"
	b.Run("clean", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tr.BeforeStatement(q, true)
		}
	})
	tr.Statement(q)
	tr.InsertID(1)
	tr.EndBorrow()
	b.Run("stale", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tr.BeforeStatement(q, true)
		}
	})
}

// observesLastID agrees with a plain case-insensitive search for its four words.
func TestObservesLastID(t *testing.T) {
	naive := func(s string) bool {
		l := strings.ToLower(s)
		for _, w := range []string{"last_insert_id", "identity", "variables", "auto_is_null"} {
			if strings.Contains(l, w) {
				return true
			}
		}
		return false
	}
	inputs := []string{"", "_", "y", "b", "last_insert_i", "LAST_INSERT_ID", "x Last_Insert_Id(", "@@IdEnTiTy", "identit",
		"SHOW VARIABLES", "variable", "VariableS", "auto_is_nul", "SET sql_AUTO_IS_NULL=1", "__last_insert_id__",
		"identityvariables", "ab_cd_ef", "bbbbbbbbbvariables", "yyyyyyyyidentity"}
	for _, s := range benchStatements {
		inputs = append(inputs, s.q)
	}
	for _, s := range inputs {
		for _, v := range []string{s, strings.ToUpper(s), strings.ToLower(s), "x" + s + "y"} {
			if got, want := observesLastID(v), naive(v); got != want {
				t.Errorf("observesLastID(%q) = %v, want %v", v, got, want)
			}
		}
	}
}

// A borrow whose session state became unknown (it will be discarded at release) still keeps its
// own ids through the reset (found by the differential fuzzer: HANDLER, then an INSERT, then a
// read of LAST_INSERT_ID()).
func TestDeferInsertIDAfterDiscard(t *testing.T) {
	tr := NewTracker(lazyBase("0"))
	tr.SetDeferInsertID(true)
	insertBorrow(t, tr, 5)
	tr.Statement("HANDLER n READ FIRST")
	tr.Failed()
	tr.Statement("INSERT INTO t (v) VALUES ('g')")
	tr.InsertID(4)
	want := "SET last_insert_id=IF(LAST_INSERT_ID() IN (4),LAST_INSERT_ID(),0)"
	if s := tr.BeforeStatement("SELECT LAST_INSERT_ID()", false); s != want {
		t.Fatalf("reset %q; want %q", s, want)
	}
}
