package bench

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// PingTimeout bounds the reachability check of a -dsn before any benchmark runs.
const PingTimeout = 5 * time.Second

// Target is what the benchmarks run against: the stub driver, or a MySQL/MariaDB server
// reached through a byte- and packet-counting proxy (the same proxy for every pool, so every
// pool pays the same overhead).
type Target struct {
	Stub      bool
	connector driver.Connector
	proxy     *mysqltest.Proxy
	pg        bool   // a PostgreSQL server (OpenPostgres)
	pgDriver  string // DriverPgx or DriverPq
	pgDSN     string // the PostgreSQL URL, through the proxy when there is one
}

// OpenStub returns the stub target.
func OpenStub() *Target { return &Target{Stub: true, connector: StubConnector{}} }

// OpenServer returns a target for dsn (go-sql-driver/mysql syntax). With withProxy, and a TCP
// DSN, connections go through a counting proxy; otherwise Counts reports nothing.
func OpenServer(dsn string, withProxy bool) (*Target, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parsing -dsn: %w", err)
	}
	t := &Target{}
	if withProxy && (cfg.Net == "tcp" || cfg.Net == "") {
		addr := cfg.Addr
		if addr == "" {
			addr = "127.0.0.1:3306"
		}
		if t.proxy, err = mysqltest.StartProxy(addr); err != nil {
			return nil, fmt.Errorf("starting the counting proxy: %w", err)
		}
		if cfg, err = mysql.ParseDSN(t.proxy.DSN(dsn)); err != nil {
			_ = t.proxy.Close()
			return nil, fmt.Errorf("parsing proxied DSN: %w", err)
		}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = PingTimeout
	}
	if t.connector, err = mysql.NewConnector(cfg); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// Connector is the target's driver.Connector (through the proxy when there is one).
func (t *Target) Connector() driver.Connector { return t.connector }

// Counting reports whether Counts measures traffic.
func (t *Target) Counting() bool { return t.proxy != nil }

// Counts returns the proxy's counters (zero without a proxy).
func (t *Target) Counts() mysqltest.Counts {
	if t.proxy == nil {
		return mysqltest.Counts{}
	}
	return t.proxy.Counts()
}

// ResetCounts zeroes the proxy's counters.
func (t *Target) ResetCounts() {
	if t.proxy != nil {
		t.proxy.Reset()
	}
}

// Close stops the proxy.
func (t *Target) Close() error {
	if t.proxy != nil {
		return t.proxy.Close()
	}
	return nil
}

// Ping opens one connection to the target and pings it within timeout, so that an
// unreachable server fails the run at once with the driver's error.
func (t *Target) Ping(timeout time.Duration) error {
	db := sql.OpenDB(t.connector)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- db.PingContext(ctx) }()
	select {
	case err := <-done:
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("no answer within %v: %w", timeout, err)
		}
		return err
	case <-time.After(timeout + 2*time.Second):
		return fmt.Errorf("no answer within %v (the driver ignored the deadline)", timeout)
	}
}
