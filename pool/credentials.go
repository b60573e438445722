package pool

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
)

// CredentialSource returns the connector for one new connection to host, with the credentials valid
// now. It is called before every dial with the dial's ctx and must be safe for concurrent use.
type CredentialSource func(ctx context.Context, host string) (driver.Connector, error)

// WithCredentials returns a driver.Connector that calls source before every dial, on the pool's
// creator goroutine, and dials with the connector it returns; an error from source is a failed
// dial. Give it to New, or to package cluster as one host's Connector. See docs/lifecycle.md.
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
