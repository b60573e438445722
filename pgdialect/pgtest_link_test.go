package pgdialect_test

import (
	"database/sql/driver"

	"github.com/lib/pq"

	"github.com/sqlpool/sqlpool/internal/pgtest"
)

// internal/pgtest links no driver (the library module requires none): this binary gives it
// lib/pq's connector constructor.
func init() {
	pgtest.RegisterConnector("postgres", func(dsn string) (driver.Connector, error) { return pq.NewConnector(dsn) })
}
