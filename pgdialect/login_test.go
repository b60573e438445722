package pgdialect

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/lib/pq"

	"github.com/sqlpool/sqlpool/pool"
)

// A refused login (28P01, 28000, 3D000) is ErrorClass.Login, from either driver and wrapped;
// other FATAL errors are not.
func TestClassifyLogin(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"pgx 28P01", &pgconn.PgError{Severity: "FATAL", Code: "28P01", Message: "password authentication failed"}, true},
		{"pgx 28000 wrapped", fmt.Errorf("connect: %w", &pgconn.PgError{Severity: "FATAL", Code: "28000"}), true},
		{"pgx 3D000", &pgconn.PgError{Severity: "FATAL", Code: "3D000"}, true},
		{"lib/pq 28P01", &pq.Error{Severity: "FATAL", Code: "28P01"}, true},
		{"too many connections", &pgconn.PgError{Severity: "FATAL", Code: "53300"}, false},
		{"cannot connect now", &pgconn.PgError{Severity: "FATAL", Code: "57P03"}, false},
		{"other FATAL", &pgconn.PgError{Severity: "FATAL", Code: "XX000"}, false},
		{"refused", errors.New("dial tcp: connection refused"), false},
	} {
		c := Dialect.Classify(tc.err, pool.ErrorContext{})
		if c.Login != tc.want {
			t.Errorf("%s: Classify = %+v; want Login %v", tc.name, c, tc.want)
		}
	}
}
