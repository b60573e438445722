package mysqldialect_test

import (
	"database/sql/driver"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/mysqldialect"
)

// The dialect reads the address go-sql-driver's connector dials, so that the pool names the
// server in connection errors; any other connector gives "".
func TestConnectorAddr(t *testing.T) {
	ad, ok := mysqldialect.Dialect.(interface {
		ConnectorAddr(c driver.Connector) string
	})
	if !ok {
		t.Fatal("mysqldialect.Dialect has no ConnectorAddr method")
	}
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr = "tcp", "db.example:3307"
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := ad.ConnectorAddr(c); got != "db.example:3307" {
		t.Errorf("ConnectorAddr(go-sql-driver connector) = %q; want db.example:3307", got)
	}
	if got := ad.ConnectorAddr(fakedb.New()); got != "" {
		t.Errorf("ConnectorAddr(another connector) = %q; want \"\"", got)
	}
	if got := ad.ConnectorAddr(nil); got != "" {
		t.Errorf("ConnectorAddr(nil) = %q; want \"\"", got)
	}
}
