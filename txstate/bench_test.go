package txstate

import (
	"strings"
	"testing"
)

// benchStatements are typical statements on a pool's hot path.
var benchStatements = []struct{ name, q string }{
	{"select", "SELECT a FROM t WHERE id = ?"},
	{"insert", "INSERT INTO zipkin_spans (trace_id, id, name, parent_id, start_ts) VALUES (?, ?, ?, ?, ?)"},
	{"update", "UPDATE accounts SET balance = balance - ? WHERE account_id = ?"},
	{"select-semicolon", "SELECT a FROM t WHERE id = ?;"},
	{"select-comment", "/* app:42 */ SELECT a, b, c FROM t JOIN u ON t.x = u.x WHERE t.id IN (?, ?, ?)"},
	{"begin", "BEGIN"},
	{"commit", "COMMIT"},
	{"set-autocommit", "SET autocommit=0"},
	{"set-user-var", "SET @last := ?"},
	{"insert-1000-rows", "INSERT INTO zipkin_annotations (trace_id, span_id, a_key, a_value, a_type, a_timestamp) VALUES " +
		strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?),", 1000), ",")},
}

func BenchmarkStatement(b *testing.B) {
	for _, s := range benchStatements {
		b.Run(s.name, func(b *testing.B) {
			tr := NewTracker(testBase)
			b.ReportAllocs()
			b.SetBytes(int64(len(s.q)))
			for i := 0; i < b.N; i++ {
				tr.Statement(s.q)
			}
		})
	}
}

func BenchmarkClassify(b *testing.B) {
	for _, s := range benchStatements {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				Classify(s.q)
			}
		})
	}
}

// BenchmarkCycle is one borrow's worth of tracking for a committed
// transaction: the work a pool adds to a clean cycle.
func BenchmarkCycle(b *testing.B) {
	tr := NewTracker(testBase)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		tr.Statement("BEGIN")
		tr.Statement("UPDATE t SET a = ? WHERE id = ?")
		tr.Statement("COMMIT")
		if !tr.Clean() {
			b.Fatal("not clean")
		}
	}
}

func TestStatementDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not exact under -race")
	}
	tr := NewTracker(testBase)
	stmts := []string{"BEGIN", "ROLLBACK", "SET autocommit=0", "SET autocommit=1", "USE other", "USE app",
		"SELECT GET_LOCK('a', 1)", "LOCK TABLES t READ", "UNLOCK TABLES", "XA START 'x'", "XA END 'x'",
		"XA ROLLBACK 'x'", "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE", "SELECT 1; SELECT 2",
		"SELECT '\\'; x'", "CALL p()"}
	for _, s := range benchStatements {
		stmts = append(stmts, s.q)
	}
	for _, q := range stmts {
		if n := testing.AllocsPerRun(100, func() { tr.Statement(q); tr.Clean() }); n != 0 {
			t.Errorf("Statement(%.40q) allocates %v times", q, n)
		}
		tr.Done()
	}
	tr.Statement("BEGIN")
	if n := testing.AllocsPerRun(100, func() { tr.Plan() }); n != 0 {
		t.Errorf("Plan() for a ROLLBACK allocates %v times", n)
	}
}
