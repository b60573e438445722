package pgdialect

import "testing"

// BenchmarkTrackerCleanCycle is the tracker's share of a clean borrow/return with the jmh
// statements: Statement for each, then Clean at the return.
func BenchmarkTrackerCleanCycle(b *testing.B) {
	for _, bc := range []struct {
		name string
		t    *tracker
	}{{"pq", &tracker{}}, {"pgx", &tracker{pgxOK: true}}} {
		b.Run(bc.name, func(b *testing.B) {
			tr := bc.t
			b.ReportAllocs()
			for b.Loop() {
				tr.Statement("SELECT 1")
				tr.Statement("SELECT $1::int8")
				tr.Statement("SELECT id, name FROM users WHERE id = $1 AND tenant IN ($2, $3)")
				if !tr.Clean() {
					b.Fatal("not clean")
				}
			}
		})
	}
}
