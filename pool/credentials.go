package pool

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
)

// CredentialSource returns the connector, with credentials valid now, for one dial to host
// (with its ctx); it must be safe for concurrent use.
type CredentialSource func(ctx context.Context, host string) (driver.Connector, error)

// WithCredentials returns a connector (for New or a cluster host) dialling with what source
// returns; see docs/lifecycle.md.
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
