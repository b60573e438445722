package pool

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
)

// CredentialSource returns the connector for one new connection to host, built with the credentials
// valid now (an IAM token, a Vault lease, a rotated password). It is called before every dial with
// the dial's ctx and must be safe for concurrent use. Open connections keep working after a
// rotation until MaxLifetime or SoftEvict closes them.
type CredentialSource func(ctx context.Context, host string) (driver.Connector, error)

// WithCredentials returns a driver.Connector that calls source before every dial and dials with the
// connector it returns: give it to New, or to package cluster as one host's Connector. The source
// runs on the pool's creator goroutine; its error (or a nil connector) is a failed dial: logged,
// kept as Stats.LastError, and followed by backoff. Its Driver cannot Open. See docs/lifecycle.md
// for an example.
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
