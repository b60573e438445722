package replica_test

import (
	"context"
	"database/sql/driver"
	"errors"
)

// nopConnector fails every dial: a primary nothing is asked of.
type nopConnector struct{}

func (nopConnector) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("no server")
}
func (nopConnector) Driver() driver.Driver { return nil }
