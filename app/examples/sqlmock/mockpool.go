package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	_ "github.com/sqlpool/sqlpool/mysqldialect" // MySQL's pool.Dialect, registered on import
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/txstate"
)

// mockConnector hands the pool go-sqlmock's connection for one DSN. go-sqlmock returns the
// same connection for every open of a DSN, so the pool must have one connection: MaxConns 1.
type mockConnector struct {
	drv driver.Driver
	dsn string
}

func (c mockConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c mockConnector) Driver() driver.Driver                        { return c.drv }

// ExpectBaseline expects the query the pool runs once after opening a connection, to record
// the session state it restores at release (txstate.BaselineQuery), and answers it: database
// "app", autocommit on, sql_mode, REPEATABLE-READ, read-write. (A row of these five columns is
// enough; the full row also records the session variables the pool restores.)
func ExpectBaseline(mock sqlmock.Sqlmock) {
	mock.ExpectQuery(txstate.BaselineQuery).WillReturnRows(
		sqlmock.NewRows([]string{"db", "autocommit", "sql_mode", "isolation", "read_only"}).
			AddRow("app", int64(1), "STRICT_TRANS_TABLES", "REPEATABLE-READ", int64(0)))
}

// NewMockPool returns a pool of one connection in front of go-sqlmock, and the *sql.DB to give
// the code under test. Expectations match statements exactly (QueryMatcherEqual); the first
// is the pool's baseline query, already set here. The pool opens its connection before
// NewMockPool returns. Close the pool, then the returned mock DB, when done.
func NewMockPool(dsn string) (p *pool.Pool, db *sql.DB, mock sqlmock.Sqlmock, mockDB *sql.DB, err error) {
	mockDB, mock, err = sqlmock.NewWithDSN(dsn, sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ExpectBaseline(mock)
	p, err = pool.New(mockConnector{mockDB.Driver(), dsn}, pool.Config{
		Name:     "mock",
		MaxConns: 1,
		// Never probe a connection on borrow (a probe is a Ping, which go-sqlmock can be told
		// to expect with MonitorPingsOption).
		AliveBypassWindow: time.Hour,
	})
	if err != nil {
		_ = mockDB.Close()
		return nil, nil, nil, nil, err
	}
	return p, p.OpenDB(), mock, mockDB, nil
}
