package mysqlstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	_ "github.com/sqlpool/sqlpool/mysqldialect" // MySQL's pool.Dialect, registered on import
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// quietLogger drops the store's log lines; tests that check them use their own.
var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// nopDriverLogger discards go-sql-driver/mysql's own log lines.
type nopDriverLogger = mysqltest.QuietLogger

// server is one MySQL-protocol server a test runs against.
type server struct {
	name string // "embedded" or "mariadb"
	dsn  string
}

// servers returns the embedded server and, when MYSQL_TEST_DSN is set, MariaDB.
func servers(t *testing.T) []server {
	t.Helper()
	s := []server{{"embedded", mysqltest.EmbeddedDSN(t)}}
	if mysqltest.IsMariaDB() {
		s = append(s, server{"mariadb", mysqltest.DSN(t)})
	}
	return s
}

// forEachServer runs f as a subtest per server; on MariaDB a missing DSN skips
// (or fails with SQLPOOL_REQUIRE_MARIADB=1) a subtest named mariadb.
func forEachServer(t *testing.T, f func(t *testing.T, srv server)) {
	t.Helper()
	for _, srv := range servers(t) {
		t.Run(srv.name, func(t *testing.T) { f(t, srv) })
	}
	if !mysqltest.IsMariaDB() {
		t.Run("mariadb", func(t *testing.T) {
			mysqltest.RequireMariaDB(t, "MariaDB runs this test with InnoDB semantics")
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// freshDatabase creates a database of the test's own (zipkin_<random>) on the
// server of dsn, drops it at cleanup, and returns a DSN that selects it.
func freshDatabase(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("ParseDSN: %v", err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	name := "zipkin_" + hex.EncodeToString(rnd[:])
	admin := openPlain(t, dsn)
	ctx := ctxT(t)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("CREATE DATABASE %s: %v", name, err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Logf("DROP DATABASE %s: %v", name, err)
		}
	})
	cfg.DBName = name
	cfg.Logger = nopDriverLogger{}
	return cfg.FormatDSN()
}

// openPlain opens a plain database/sql handle (go-sql-driver), closed at cleanup.
func openPlain(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db := sql.OpenDB(quietConnector(t, dsn))
	t.Cleanup(func() { db.Close() })
	return db
}

// quietConnector is go-sql-driver's connector for dsn, without its log.
func quietConnector(t testing.TB, dsn string) driver.Connector {
	t.Helper()
	return mysqltest.QuietConnector(t, dsn)
}
