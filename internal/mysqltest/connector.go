package mysqltest

import (
	"database/sql/driver"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// QuietLogger is a go-sql-driver/mysql Logger that discards the driver's own
// log lines ("unexpected EOF", "closing bad idle connection" and the like),
// which fault tests cause on purpose and check through the errors instead.
type QuietLogger struct{}

// Print discards its arguments.
func (QuietLogger) Print(...any) {}

// QuietConnector returns a go-sql-driver/mysql connector for dsn whose
// driver logs nothing (QuietLogger). It fails the test when dsn does not
// parse.
func QuietConnector(tb testing.TB, dsn string) driver.Connector {
	tb.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		tb.Fatalf("ParseDSN: %v", err)
	}
	cfg.Logger = QuietLogger{}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		tb.Fatalf("NewConnector: %v", err)
	}
	return c
}
