package pool

import (
	"testing"

	"github.com/sqlpool/sqlpool/internal/fakedb"
)

// mysqlDialect returns MySQL's dialect, which package mysqldialect registers for go-sql-driver's
// connector and for every connector no other dialect is registered for (such as the fake
// driver's). This package's internal tests cannot import mysqldialect (it imports pool), but its
// external tests do (mysql_test.go), so it is linked into, and registered in, every test binary
// of package pool: the internal tests that use the fake driver run with MySQL's rules, as they
// did when MySQL was built into the pool.
func mysqlDialect(t testing.TB) Dialect {
	t.Helper()
	d, err := chooseDialect(fakedb.New(), nil)
	if err != nil || d.Name() != "mysql" {
		t.Fatalf("MySQL's dialect is not registered for the fake driver (%v, %v): mysql_test.go must import mysqldialect", d, err)
	}
	return d
}
