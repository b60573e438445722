package mysqltest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/testutil"
)

func openDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("open %q: %v", dsn, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	return testutil.Context(t, d)
}

func mustExec(t *testing.T, ex interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, q string, args ...any) {
	t.Helper()
	if _, err := ex.ExecContext(ctxT(t, 10*time.Second), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
