package pgdialect_test

import (
	"database/sql/driver"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlpool/sqlpool/pgdialect"
)

// The dialect reads host:port from pgx's stdlib connector, so that the pool names the server in
// connection errors.
func TestConnectorAddr(t *testing.T) {
	ad, ok := pgdialect.Dialect.(interface {
		ConnectorAddr(c driver.Connector) string
	})
	if !ok {
		t.Fatal("pgdialect.Dialect has no ConnectorAddr method")
	}
	cfg, err := pgx.ParseConfig("postgres://u:p@db.example:5433/app")
	if err != nil {
		t.Fatal(err)
	}
	if got := ad.ConnectorAddr(stdlib.GetConnector(*cfg)); got != "db.example:5433" {
		t.Errorf("ConnectorAddr(pgx connector) = %q; want db.example:5433", got)
	}
	if got := ad.ConnectorAddr(nil); got != "" {
		t.Errorf("ConnectorAddr(nil) = %q; want \"\"", got)
	}
}
