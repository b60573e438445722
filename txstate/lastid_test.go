package txstate

import (
	"database/sql/driver"
	"strings"
	"testing"
	"time"
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
	if s := tr.BeforeStatement(q, []driver.NamedValue{{Ordinal: 1, Value: "x"}}, true); s != "" {
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
		if s := tr.BeforeStatement(q, nil, true); s != "SET last_insert_id=0" {
			t.Errorf("before %q on a stale id: %q; want SET last_insert_id=0", q, s)
			continue
		}
		tr.BeforeDone()
		if tr.LastInsertIDStale() || tr.BeforeStatement(q, nil, true) != "" {
			t.Errorf("after the reset before %q: still stale", q)
		}
	}
	for _, q := range quiet {
		tr := NewTracker(lazyBase("0"))
		tr.SetDeferInsertID(true)
		insertBorrow(t, tr, 5)
		if s := tr.BeforeStatement(q, nil, true); s != "" {
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
		if s := tr.BeforeStatement("SELECT LAST_INSERT_ID()", nil, false); s != want {
			t.Fatalf("reset: %q; want %q", s, want)
		}
	})
	t.Run("candidates bounded", func(t *testing.T) {
		tr := NewTracker(lazyBase("0"))
		tr.SetDeferInsertID(true)
		insertBorrow(t, tr, 5)
		for i := range maxIDCands {
			q := "INSERT INTO t (v) VALUES (1)"
			if s := tr.BeforeStatement(q, nil, true); s != "" {
				t.Fatalf("insert %d: %q", i, s)
			}
			tr.Statement(q)
			tr.InsertID(int64(10 + i))
		}
		if s := tr.BeforeStatement("INSERT INTO t (v) VALUES (1)", nil, true); !strings.HasPrefix(s, "SET last_insert_id=IF(") {
			t.Fatalf("the insert past the bound: %q; want the reset first", s)
		}
	})
	t.Run("INSERT through Query", func(t *testing.T) {
		tr := NewTracker(lazyBase("0"))
		tr.SetDeferInsertID(true)
		insertBorrow(t, tr, 5)
		if s := tr.BeforeStatement("INSERT INTO t (v) VALUES (1) RETURNING id", nil, false); s != "SET last_insert_id=0" {
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
		if tr.Clean() || tr.BeforeStatement("SELECT LAST_INSERT_ID()", nil, false) != "" {
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
		if n := testing.AllocsPerRun(100, func() { tr.BeforeStatement(s.q, nil, true) }); n != 0 {
			t.Errorf("BeforeStatement(%.40q), nothing stale, allocates %v times", s.q, n)
		}
	}
	insertBorrow(t, tr, 5)
	for _, q := range []string{"SELECT a FROM t WHERE id = ?", "INSERT INTO t (v) VALUES (?)", "SELECT LAST_INSERT_ID()"} {
		if n := testing.AllocsPerRun(100, func() { tr.BeforeStatement(q, nil, true) }); n != 0 {
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
			tr.BeforeStatement(q, nil, true)
		}
	})
	tr.Statement(q)
	tr.InsertID(1)
	tr.EndBorrow()
	b.Run("stale", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tr.BeforeStatement(q, nil, true)
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
	if s := tr.BeforeStatement("SELECT LAST_INSERT_ID()", nil, false); s != want {
		t.Fatalf("reset %q; want %q", s, want)
	}
}

// TestDeferInsertIDExplicitStale: an INSERT that gives the AUTO_INCREMENT column the stale id
// reports it as its own (the OK packet's id is the explicit value), so the reset would keep the
// stale value; it gets the reset before it instead, and only it.
func TestDeferInsertIDExplicitStale(t *testing.T) {
	arg := func(vs ...any) []driver.NamedValue {
		a := make([]driver.NamedValue, len(vs))
		for i, v := range vs {
			a[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
		}
		return a
	}
	ts := time.Date(2026, 12, 4, 21, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		q     string
		args  []driver.NamedValue
		reset bool
	}{
		{"INSERT INTO t (v) VALUES (?)", arg("x"), false},
		{"INSERT INTO t (v) VALUES (1)", nil, false},
		{"INSERT INTO t (id, v) VALUES (?, ?)", arg(int64(-3), "x"), false},
		{"INSERT INTO t (id, v) VALUES (?, ?)", arg(int64(5), "x"), true},
		{"INSERT INTO t (id, v) VALUES (?, ?)", arg(uint64(5), "x"), true},
		{"INSERT INTO t (id, v) VALUES (?, ?)", arg(5.2, "x"), true},
		{"INSERT INTO t (id, v) VALUES (?, ?)", arg("5", "x"), true},
		{"INSERT INTO t (id, v) VALUES (?, ?)", arg([]byte(" 5abc"), "x"), true},
		{"INSERT INTO t (id, v) VALUES (?, ?)", arg(nil, ts), false},
		{"INSERT INTO t (id, v) VALUES (?, ?)", arg(struct{}{}, "x"), true},
		{"INSERT INTO t (id, v) VALUES (?)", arg(int64(4), "x"), true}, // placeholders do not match
		{"REPLACE INTO t (id, v) VALUES (5, 'r')", nil, true},
		{"REPLACE INTO t (id, v) VALUES (2, 'r')", nil, false},
		{"INSERT INTO t VALUES (NULL, '5x'), (DEFAULT, 'y')", nil, true},
		{"INSERT INTO t VALUES (NULL, 'x5'), (DEFAULT, 'y')", nil, false},
		{"insert low_priority ignore into `db`.`t` (`id`) value (6) -- 5\n", nil, false},
		{"INSERT INTO t (id) VALUES (5e0)", nil, true},
		{"INSERT INTO t (id) VALUES (0x5)", nil, true},
		{"INSERT INTO t (id) VALUES (2+3)", nil, true},
		{"INSERT INTO t (id) VALUES (@id)", nil, true},
		{"INSERT INTO t (id) SELECT 1", nil, true},
		{"INSERT INTO t SET id = 1", nil, true},
		{"INSERT INTO t (id) VALUES (1) ON DUPLICATE KEY UPDATE v = 'u'", nil, true},
		{"INSERT INTO t (v) VALUES ('a\\'5')", nil, true},
		{"INSERT INTO t (v) VALUES (\"x\")", nil, false}, // the baseline's sql_mode: a string
		{"INSERT INTO t (v) VALUES (\"5\")", nil, true},
		{"INSERT /*! HIGH_PRIORITY */ INTO t (v) VALUES ('x')", nil, true},
		{"INSERT INTO t SELECT 1 UNION VALUES (2)", nil, true},
	} {
		tr := NewTracker(lazyBase("0"))
		tr.SetDeferInsertID(true)
		insertBorrow(t, tr, 5)
		s := tr.BeforeStatement(tc.q, tc.args, true)
		if got := s != ""; got != tc.reset {
			t.Errorf("stale 5, before %q %v: %q; want a reset: %v", tc.q, tc.args, s, tc.reset)
		}
	}

	t.Run("unknown stale id", func(t *testing.T) {
		// An INSERT whose explicit value may be the id it reports leaves LAST_INSERT_ID() at
		// that id or at what it was: any positive explicit value gets the reset next time.
		tr := NewTracker(lazyBase("0"))
		tr.SetDeferInsertID(true)
		q := "INSERT INTO t (id, v) VALUES (?, 'x')"
		tr.BeforeStatement(q, arg(int64(9)), true)
		tr.Statement(q)
		tr.InsertID(9)
		tr.EndBorrow()
		if s := tr.BeforeStatement("INSERT INTO t (v) VALUES (?)", arg("x"), true); s != "" {
			t.Errorf("a string value: %q; want nothing", s)
		}
		if s := tr.BeforeStatement("INSERT INTO t (n) VALUES (?)", arg(int64(12)), true); s != "SET last_insert_id=0" {
			t.Errorf("a positive value: %q; want the reset", s)
		}
	})
	t.Run("generated id known", func(t *testing.T) {
		tr := NewTracker(lazyBase("0"))
		tr.SetDeferInsertID(true)
		insertBorrow(t, tr, 5)
		// an own generated id; then the stale value is 6, not 5
		q := "INSERT INTO t (n, v) VALUES (?, ?)"
		if s := tr.BeforeStatement(q, arg(int64(5+1), "x"), true); s != "" {
			t.Fatalf("%q", s)
		}
		tr.Statement(q)
		tr.InsertID(7)
		tr.EndBorrow()
		if s := tr.BeforeStatement(q, arg(int64(5), "x"), true); s != "" {
			t.Errorf("value 5, stale 7: %q; want nothing", s)
		}
		if s := tr.BeforeStatement(q, arg(int64(7), "x"), true); s != "" {
			t.Errorf("value 7 for n, stale 7: %q; want nothing (n is not the AUTO_INCREMENT column: the id 7 was generated with n = 6)", s)
		}
		if s := tr.BeforeStatement("INSERT INTO t (id, v) VALUES (?, ?)", arg(int64(7), "x"), true); s == "" {
			t.Errorf("value 7 for id, stale 7: want the reset")
		}
	})
	t.Run("a counter as the value", func(t *testing.T) {
		// Cycle i inserts the value i, and the previous cycle generated the id i: the first
		// collision gets the reset, then the INSERT is known to give v no id.
		tr := NewTracker(lazyBase("0"))
		tr.SetDeferInsertID(true)
		q := "INSERT INTO t (v) VALUES (?)"
		resets := 0
		for i := int64(0); i < 20; i++ {
			if s := tr.BeforeStatement(q, arg(i), true); s != "" {
				resets++
				tr.BeforeDone()
			}
			tr.Statement(q)
			tr.InsertID(i + 1)
			tr.EndBorrow()
			if !tr.Clean() {
				t.Fatal("not clean")
			}
		}
		if resets > 1 {
			t.Errorf("%d resets in 20 cycles; want at most 1", resets)
		}
		// A temporary table may shadow t with another AUTO_INCREMENT column: learned no more.
		tr.Statement("CREATE TEMPORARY TABLE t (v INT AUTO_INCREMENT PRIMARY KEY)")
		if s := tr.BeforeStatement(q, arg(int64(20)), true); s == "" {
			t.Errorf("value 20, stale 20, after CREATE TEMPORARY TABLE: want the reset")
		}
	})
	t.Run("a value stored as a type's bound", func(t *testing.T) {
		tr := NewTracker(lazyBase("0"))
		tr.SetDeferInsertID(true)
		insertBorrow(t, tr, 2147483647)
		for _, v := range []any{int64(99999999999), "1e20", 3e10} {
			if s := tr.BeforeStatement("INSERT INTO t (id) VALUES (?)", arg(v), true); s == "" {
				t.Errorf("value %v, stale 2147483647 (INT's bound): want the reset", v)
			}
		}
	})
}
