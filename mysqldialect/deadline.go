package mysqldialect

import (
	"context"
	"database/sql/driver"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sqlpool/sqlpool/internal/rawconn"
	"github.com/sqlpool/sqlpool/validate"
)

// The dialect implements the pool's statement-deadline contract: a statement run with a
// context deadline is sent with a server-side time limit, so that the server stops it before
// the client gives up, answers error 1969, and the connection stays usable.
//
//	MariaDB  SET STATEMENT max_statement_time=S FOR <statement>   SELECT, INSERT, UPDATE,
//	         DELETE, REPLACE, WITH (S in seconds, millisecond precision; the limit applies to
//	         this statement only, not to the transaction or the session)
//
// MySQL's equivalent, the MAX_EXECUTION_TIME optimizer hint (SELECT only, error 3024), is not
// sent: other servers that answer VERSION() like MySQL may reject it. 3024 is still classified.
//
// Only statements the driver sends as text get the limit (no arguments, or interpolateParams):
// a prepared statement's text is its identity in the statement cache. Price: 40-odd bytes per
// statement, and the server's slow log, processlist and digest see the longer text; MariaDB's
// query cache, keyed by text, misses.
//
// The methods below are that contract (pool/deadline.go).

// StatementLimiter asks a go-sql-driver connection's server for VERSION() (one round trip per
// new connection) and returns the limiter for MariaDB; nil for any other server or driver.
func (dialect) StatementLimiter(ctx context.Context, dc driver.Conn) (func(query string, limit time.Duration) string, error) {
	if rawconn.PkgPath(dc) != goSQLDriver {
		return nil, nil // another driver: its text protocol and errors are unknown
	}
	rows, err := rawconn.Query(ctx, dc, "SELECT VERSION()")
	if err != nil {
		if v := validate.Check(err, validate.Session{}); v.Fatal || ctx.Err() != nil {
			return nil, err
		}
		return nil, nil
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if len(dest) != 1 {
		return nil, nil
	}
	if err := rows.Next(dest); err != nil {
		if v := validate.Check(err, validate.Session{}); err != io.EOF && (v.Fatal || ctx.Err() != nil) {
			return nil, err
		}
		return nil, nil
	}
	var version string
	switch v := dest[0].(type) {
	case []byte:
		version = string(v)
	case string:
		version = v
	}
	if strings.Contains(version, "MariaDB") && setStatementSupported(version) {
		return limitMariaDB, nil
	}
	return nil, nil // MySQL's MAX_EXECUTION_TIME hint is not sent: servers that speak MySQL's protocol without it would fail the statement
}

// StatementTimedOut reports MariaDB's 1969 (max_statement_time exceeded) and MySQL's 3024
// (maximum statement execution time exceeded).
func (dialect) StatementTimedOut(err error) bool {
	n, ok := validate.ErrorNumber(err)
	return ok && (n == 1969 || n == 3024)
}

// firstWord returns query's first keyword, upper-cased, and the rest; "" when query starts
// with a comment or anything but a letter (left alone).
func firstWord(query string) (string, string) {
	q := strings.TrimLeft(query, " \t\r\n")
	i := 0
	for i < len(q) && (q[i] >= 'a' && q[i] <= 'z' || q[i] >= 'A' && q[i] <= 'Z') {
		i++
	}
	if i == 0 || i == len(q) || !(q[i] == ' ' || q[i] == '\t' || q[i] == '\r' || q[i] == '\n' || q[i] == '(') {
		return "", ""
	}
	return strings.ToUpper(q[:i]), q[i:]
}

// setStatementSupported reports whether a MariaDB VERSION() ("10.11.19-MariaDB-0+deb12u1")
// is 10.1.2 or later, where SET STATEMENT … FOR first appeared.
func setStatementSupported(version string) bool {
	var v [3]int
	rest := version
	for i := range v {
		j := 0
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		if j == 0 {
			return false
		}
		v[i], _ = strconv.Atoi(rest[:j])
		rest = rest[j:]
		if i < 2 {
			if len(rest) == 0 || rest[0] != '.' {
				return false
			}
			rest = rest[1:]
		}
	}
	return v[0] > 10 || v[0] == 10 && (v[1] > 1 || v[1] == 1 && v[2] >= 2)
}

func limitMariaDB(query string, limit time.Duration) string {
	switch w, _ := firstWord(query); w {
	case "SELECT", "INSERT", "UPDATE", "DELETE", "REPLACE", "WITH":
		ms := max(limit.Milliseconds(), 1)
		return "SET STATEMENT max_statement_time=" + strconv.FormatInt(ms/1000, 10) + "." +
			pad3(ms%1000) + " FOR " + query
	}
	return ""
}

func pad3(n int64) string {
	s := strconv.FormatInt(n, 10)
	return strings.Repeat("0", 3-len(s)) + s
}
