package pool

import (
	"context"
	"database/sql/driver"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func TestChooseDialectMySQLByDefault(t *testing.T) {
	cfg := mysql.NewConfig()
	cfg.Addr = "127.0.0.1:1"
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mysqlD := mysqlDialect(t)
	if d, err := chooseDialect(c, nil); err != nil || d != mysqlD {
		t.Fatalf("chooseDialect(go-sql-driver) = %v, %v; want MySQL", d, err)
	}
	if d, err := chooseDialect(stubConnector{}, nil); err != nil || d != mysqlD {
		t.Fatalf("chooseDialect(unknown connector) = %v, %v; want MySQL", d, err)
	}
}

func TestChooseDialectConfigWins(t *testing.T) {
	cfg := mysql.NewConfig()
	cfg.Addr = "127.0.0.1:1"
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := stubDialect{}
	if got, err := chooseDialect(c, d); err != nil || got != d {
		t.Fatalf("chooseDialect with Config.Dialect = %v, %v", got, err)
	}
}

// TestChooseDialectPostgresUnregistered (PostgreSQL's connectors without pgdialect) is in the
// pgdialect module, pgdialect/internal/unregistered, whose test binary links pgx and lib/pq.

func TestRegisterDialect(t *testing.T) {
	d := stubDialect{}
	RegisterDialect(d, "github.com/sqlpool/sqlpool/pool")
	t.Cleanup(func() {
		dialectRegistry.mu.Lock()
		delete(dialectRegistry.m, "github.com/sqlpool/sqlpool/pool")
		dialectRegistry.mu.Unlock()
	})
	if got, err := chooseDialect(stubConnector{}, nil); err != nil || got != d {
		t.Fatalf("chooseDialect after RegisterDialect = %v, %v", got, err)
	}
}

type stubConnector struct{}

func (stubConnector) Connect(context.Context) (driver.Conn, error) { return nil, driver.ErrBadConn }
func (stubConnector) Driver() driver.Driver                        { return nil }

type stubDialect struct{}

func (stubDialect) Name() string                            { return "stub" }
func (stubDialect) Classify(error, ErrorContext) ErrorClass { return ErrorClass{} }
func (stubDialect) NewSession(context.Context, driver.Conn) (SessionTracker, error) {
	return nil, driver.ErrBadConn
}
func (stubDialect) Probe(context.Context, driver.Conn, time.Duration) error { return nil }
func (stubDialect) Commit(_ context.Context, _ driver.Conn, t driver.Tx) error {
	return t.Commit()
}

// TestChooseDialectMySQLUnregistered: without mysqldialect registered, New refuses
// go-sql-driver's connector, and any connector no dialect is registered for, with an error
// naming mysqldialect, instead of running without MySQL's session tracking.
func TestChooseDialectMySQLUnregistered(t *testing.T) {
	dialectRegistry.mu.Lock()
	saved := dialectRegistry.m
	dialectRegistry.m = nil
	dialectRegistry.mu.Unlock()
	t.Cleanup(func() {
		dialectRegistry.mu.Lock()
		dialectRegistry.m = saved
		dialectRegistry.mu.Unlock()
	})
	cfg := mysql.NewConfig()
	cfg.Addr = "127.0.0.1:1"
	mc, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]driver.Connector{"go-sql-driver": mc, "unknown": stubConnector{}} {
		_, err := chooseDialect(c, nil)
		if err == nil || !strings.Contains(err.Error(), "mysqldialect") {
			t.Errorf("%s: chooseDialect = %v; want an error naming mysqldialect", name, err)
		}
		if _, err := New(c, Config{InitializationFailTimeout: -1}); err == nil {
			t.Errorf("%s: New succeeded without a MySQL dialect", name)
		}
	}
}
