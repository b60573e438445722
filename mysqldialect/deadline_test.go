package mysqldialect

import (
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/pool"
)

// MariaDB's limiter prefixes the statements SET STATEMENT applies to and leaves the others
// (and anything starting with a comment) alone; the time is in seconds, millisecond precision.
func TestLimitMariaDB(t *testing.T) {
	for _, tc := range []struct {
		q     string
		limit time.Duration
		want  string
	}{
		{"SELECT 1", 900 * time.Millisecond, "SET STATEMENT max_statement_time=0.900 FOR SELECT 1"},
		{"  select a from t", 1500 * time.Millisecond, "SET STATEMENT max_statement_time=1.500 FOR   select a from t"},
		{"UPDATE t SET a = 1", 42 * time.Millisecond, "SET STATEMENT max_statement_time=0.042 FOR UPDATE t SET a = 1"},
		{"WITH x AS (SELECT 1) SELECT * FROM x", 2 * time.Second, "SET STATEMENT max_statement_time=2.000 FOR WITH x AS (SELECT 1) SELECT * FROM x"},
		{"INSERT INTO t VALUES (1)", 100 * time.Microsecond, "SET STATEMENT max_statement_time=0.001 FOR INSERT INTO t VALUES (1)"},
		{"SET STATEMENT max_statement_time=1 FOR SELECT 1", time.Second, ""},
		{"BEGIN", time.Second, ""},
		{"COMMIT", time.Second, ""},
		{"/* tag */ SELECT 1", time.Second, ""},
		{"SELECT", time.Second, ""},
		{"CALL p()", time.Second, ""},
	} {
		if got := limitMariaDB(tc.q, tc.limit); got != tc.want {
			t.Errorf("limitMariaDB(%q, %v) = %q; want %q", tc.q, tc.limit, got, tc.want)
		}
	}
}

func TestStatementTimedOut(t *testing.T) {
	d := dialect{}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: 1969, Message: "Query execution was interrupted (max_statement_time exceeded)"}, true},
		{&mysql.MySQLError{Number: 3024, Message: "Query execution was interrupted, maximum statement execution time exceeded"}, true},
		{&mysql.MySQLError{Number: 1317, Message: "Query execution was interrupted"}, false},
		{errors.New("other"), false},
	} {
		if got := d.StatementTimedOut(tc.err); got != tc.want {
			t.Errorf("StatementTimedOut(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
	// 1969 keeps the connection (not fatal).
	if c := d.Classify(&mysql.MySQLError{Number: 1969}, pool.ErrorContext{}); c.Fatal {
		t.Errorf("Classify(1969) = %+v; want not fatal", c)
	}
}

func TestSetStatementSupported(t *testing.T) {
	for v, want := range map[string]bool{
		"10.11.19-MariaDB-0+deb12u1": true,
		"11.4.2-MariaDB":             true,
		"10.1.2-MariaDB":             true,
		"10.1.1-MariaDB":             false,
		"10.0.38-MariaDB":            false,
		"5.5.68-MariaDB":             false,
		"MariaDB":                    false,
	} {
		if got := setStatementSupported(v); got != want {
			t.Errorf("setStatementSupported(%q) = %v; want %v", v, got, want)
		}
	}
}
