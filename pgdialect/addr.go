package pgdialect

import (
	"database/sql/driver"
	"net"
	"reflect"
	"strconv"

	"github.com/sqlpool/sqlpool/internal/rawconn"
)

// ConnectorAddr implements the pool's address lookup (pool names the server in connection
// errors and outage logs): host:port of pgx's stdlib connector (its ConnConfig's Host and
// Port), read without changing it; "" for any other connector (lib/pq keeps its options
// private: set pool.Config.Addr) or a pgx version laid out differently.
func (dialect) ConnectorAddr(c driver.Connector) string {
	if c == nil || rawconn.PkgPath(c) != "github.com/jackc/pgx/v5/stdlib" {
		return ""
	}
	v := reflect.ValueOf(c)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return ""
	}
	host, port := v.FieldByName("Host"), v.FieldByName("Port")
	if !host.IsValid() || host.Kind() != reflect.String || host.String() == "" {
		return ""
	}
	if !port.IsValid() || !port.CanUint() || port.Uint() == 0 {
		return host.String()
	}
	return net.JoinHostPort(host.String(), strconv.FormatUint(port.Uint(), 10))
}
