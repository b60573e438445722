package pool

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
)

// CredentialSource returns the connector for one new connection to host, built with the
// credentials valid now: an IAM auth token that expires in 15 minutes, a Vault lease, a password
// read from a rotated secret. It is called before every dial and must be safe for concurrent use;
// ctx is the dial's (it ends at ConnectTimeout). Credentials are checked by the server only when
// a connection is opened, so connections already open keep working after a rotation until they
// are closed (MaxLifetime, SoftEvict).
type CredentialSource func(ctx context.Context, host string) (driver.Connector, error)

// WithCredentials returns a driver.Connector that asks source for a connector before every
// dial and dials with it: give it to New as the pool's connector, or as one host's Connector in
// package cluster (one per host, with that host's name). The pool's creator dials, so the source
// runs on the creator's goroutine, never on a borrower's; an error from it (or a nil connector)
// is a failed dial like any other: logged, recorded as Stats.LastError, and followed by the
// creator's backoff, while borrowers keep using the open connections and wait (bounded by
// AcquireTimeout) only when none is idle.
//
// With go-sql-driver/mysql, build the connector from a copy of a base *mysql.Config:
//
//	src := func(ctx context.Context, host string) (driver.Connector, error) {
//		pw, err := secrets.Password(ctx) // the current password, token or lease
//		if err != nil {
//			return nil, err
//		}
//		c := base.Clone()
//		c.Passwd = pw
//		return mysql.NewConnector(c)
//	}
//	p, err := pool.New(pool.WithCredentials(base.Addr, src), pool.Config{})
//
// mysql.NewConnector costs a few small allocations per dial, nothing per borrow. The driver's
// own mysql.BeforeConnect option (a func that edits the Config copy before each dial) does the
// same for go-sql-driver/mysql alone; WithCredentials works with any driver.Connector (pgx's
// stdlib, lib/pq), and lets the source also change the user or the address.
//
// Driver returns a driver whose Open fails: database/sql does not call it through a pool.
func WithCredentials(host string, source CredentialSource) driver.Connector {
	return &credConnector{host: host, source: source}
}

type credConnector struct {
	host   string
	source CredentialSource
}

func (c *credConnector) Connect(ctx context.Context) (driver.Conn, error) {
	if c.source == nil {
		return nil, errors.New("sqlpool: WithCredentials: the CredentialSource is nil")
	}
	conn, err := c.source(ctx, c.host)
	if err != nil {
		return nil, fmt.Errorf("credentials for %q: %w", c.host, err)
	}
	if conn == nil {
		return nil, fmt.Errorf("credentials for %q: the CredentialSource returned a nil connector and no error", c.host)
	}
	return conn.Connect(ctx)
}

func (c *credConnector) Driver() driver.Driver { return credDriver{} }

type credDriver struct{}

func (credDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("sqlpool: a WithCredentials connector cannot open connections by name; give it to pool.New")
}
