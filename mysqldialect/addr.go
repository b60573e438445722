package mysqldialect

import (
	"database/sql/driver"
	"reflect"

	"github.com/sqlpool/sqlpool/internal/rawconn"
)

// ConnectorAddr implements pool.AddrDialect: the address go-sql-driver's connector dials (its
// Config.Addr, or the socket path for Net "unix"), so that the pool names the server in
// connection errors and outage logs. The driver keeps its Config unexported; ConnectorAddr reads
// it without changing it, and returns "" for any other connector or a driver version whose
// connector is laid out differently.
func (dialect) ConnectorAddr(c driver.Connector) string {
	if c == nil || rawconn.PkgPath(c) != goSQLDriver {
		return ""
	}
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return ""
	}
	v = v.Elem()
	if v.Kind() != reflect.Struct {
		return ""
	}
	cfg := v.FieldByName("cfg")
	if !cfg.IsValid() || cfg.Kind() != reflect.Pointer || cfg.IsNil() {
		return ""
	}
	cfg = cfg.Elem()
	if cfg.Kind() != reflect.Struct {
		return ""
	}
	addr := cfg.FieldByName("Addr")
	if !addr.IsValid() || addr.Kind() != reflect.String {
		return ""
	}
	return addr.String()
}
