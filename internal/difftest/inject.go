package difftest

import (
	"context"
	"database/sql/driver"
	"strings"
	"sync/atomic"
)

// injectConnector wraps the pool side's driver so that no statement without arguments run
// through Exec that starts with prefix is sent: the pool runs its release plan through Exec, so
// this makes it skip one kind of reset (Options.Inject). The borrowers' statements the
// vocabulary sends with that prefix go through Query, so only the pool's are skipped.
type injectConnector struct {
	driver.Connector
	prefix  string
	skipped atomic.Int64
}

func (c *injectConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &injectConn{Conn: dc, c: c}, nil
}

// injectConn forwards every optional interface go-sql-driver/mysql's connection has.
type injectConn struct {
	driver.Conn
	c *injectConnector
}

func (ic *injectConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	if len(args) == 0 && strings.HasPrefix(q, ic.c.prefix) {
		ic.c.skipped.Add(1)
		return driver.ResultNoRows, nil
	}
	return ic.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (ic *injectConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return ic.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (ic *injectConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	return ic.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
}

func (ic *injectConn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	return ic.Conn.(driver.ConnBeginTx).BeginTx(ctx, o)
}

func (ic *injectConn) Ping(ctx context.Context) error { return ic.Conn.(driver.Pinger).Ping(ctx) }

func (ic *injectConn) ResetSession(ctx context.Context) error {
	return ic.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (ic *injectConn) IsValid() bool { return ic.Conn.(driver.Validator).IsValid() }

func (ic *injectConn) CheckNamedValue(nv *driver.NamedValue) error {
	return ic.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}
