package metrics

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParseStatementName(t *testing.T) {
	for _, tc := range []struct{ q, want string }{
		{"SELECT 1", "select"},
		{"select * from users where id = ?", "select users"},
		{"  /* c */ SELECT a, b FROM `users` u JOIN orders o ON o.u = u.id", "select users"},
		{"SELECT (SELECT COUNT(*) FROM orders) FROM users", "select users"},
		{"SELECT * FROM (SELECT id FROM inner_t) AS d", "select inner_t"},
		{"SELECT 'from x' AS s, `from` FROM real_t", "select real_t"},
		{"SELECT a.from_date FROM zipkin.spans", "select zipkin.spans"},
		{"(SELECT a FROM t1) UNION (SELECT a FROM t2)", "select t1"},
		{"-- comment\nSELECT * FROM t -- from u", "select t"},
		{"# comment\nselect x from t", "select t"},
		{"INSERT INTO spans (a, b) VALUES (?, ?)", "insert spans"},
		{"insert ignore into `zipkin`.`spans` values (1)", "insert `zipkin`.`spans`"},
		{"INSERT LOW_PRIORITY spans VALUES (1)", "insert spans"},
		{"REPLACE INTO kv VALUES (1, 2)", "replace kv"},
		{"UPDATE LOW_PRIORITY IGNORE users SET a = 1", "update users"},
		{"update users u join t on 1 set a = 1", "update users"},
		{"DELETE FROM sessions WHERE id = ?", "delete sessions"},
		{"DELETE s FROM sessions s JOIN u", "delete sessions"},
		{"WITH c AS (SELECT * FROM base) SELECT * FROM c", "with c"},
		{"CALL refresh_stats(1)", "call refresh_stats"},
		{"BEGIN", "begin"},
		{"commit", "commit"},
		{"SET autocommit = 0", "set"},
		{"CREATE TABLE t (a INT)", "create"},
		{"frobnicate the database", "other"},
		{"", "other"},
		{"12345", "other"},
		{"SELECT * FROM " + strings.Repeat("x", 200), "select " + strings.Repeat("x", MaxStatementNameLen-len("select "))},
		{"SELECT * FROM ta\xffble", "select ta"},
		{"SELECT * FROM " + strings.Repeat("é", 60), "select " + strings.Repeat("é", (MaxStatementNameLen-len("select "))/2)},
	} {
		var buf [MaxStatementNameLen]byte
		got := string(parseStatementName(buf[:0], tc.q))
		if got != tc.want {
			t.Errorf("parseStatementName(%q) = %q; want %q", tc.q, got, tc.want)
		}
		if !utf8.ValidString(got) || len(got) > MaxStatementNameLen {
			t.Errorf("parseStatementName(%q) = %q: not a valid label", tc.q, got)
		}
	}
}

func TestParseStatementNameAllocatesNothing(t *testing.T) {
	q := "SELECT a, b, c FROM `users` WHERE id = ? AND name = 'from'"
	var buf [MaxStatementNameLen]byte
	if n := testing.AllocsPerRun(100, func() { _ = parseStatementName(buf[:0], q) }); n != 0 {
		t.Errorf("parseStatementName allocates %v times", n)
	}
}

func TestWindowMaxConcurrent(t *testing.T) {
	var w windowMax
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func(g int) {
			for i := 0; i < 10000; i++ {
				w.record(time.Duration(g*10000 + i))
			}
			done <- struct{}{}
		}(g)
	}
	for g := 0; g < 4; g++ {
		<-done
	}
	if got := w.read(time.Now(), time.Minute); got != 39999 {
		t.Errorf("max %v; want 39999", int64(got))
	}
}
