package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/lib/pq"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	_ "github.com/sqlpool/sqlpool/pgdialect" // the pool's PostgreSQL rules for pgx's and lib/pq's connectors
)

// The PostgreSQL drivers a PostgreSQL target can use (-pg-driver).
const (
	// DriverPgx is pgx v5's database/sql driver: stdlib.GetConnector(*pgx.ConnConfig).
	DriverPgx = "pgx"
	// DriverPq is lib/pq: pq.NewConnector(dsn).
	DriverPq = "pq"
)

// PoolPgxpool is pgx's own pool behind database/sql: stdlib.OpenDBFromPool(pgxpool) with
// MaxConns = MinConns = size. OpenDBFromPool sets database/sql's MaxIdleConns to 0, so every
// db.Conn acquires from pgxpool and every Close releases to it. PostgreSQL targets on pgx only.
const PoolPgxpool = "pgxpool"

// pgParamSQL is cycleParamStatement's statement on PostgreSQL: one int8 parameter.
const pgParamSQL = "SELECT $1::int8"

// OpenPostgres returns a PostgreSQL target for dsn (a postgres:// URL) through driver
// (DriverPgx or DriverPq). With withProxy, connections go through a counting proxy that counts
// bytes (its packet counts are MySQL framing and are not reported); otherwise Counts reports
// nothing. The URL must name a TCP host and port (the port defaults to 5432).
func OpenPostgres(dsn, driver string, withProxy bool) (*Target, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("-pg wants a postgres:// URL such as postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable, not %q", dsn)
	}
	if driver != DriverPgx && driver != DriverPq {
		return nil, fmt.Errorf("unknown -pg-driver %q (want %s or %s)", driver, DriverPgx, DriverPq)
	}
	t := &Target{pg: true, pgDriver: driver}
	if withProxy {
		host, port := u.Hostname(), u.Port()
		if host == "" {
			host = "127.0.0.1"
		}
		if port == "" {
			port = "5432"
		}
		if t.proxy, err = mysqltest.StartProxy(net.JoinHostPort(host, port)); err != nil {
			return nil, fmt.Errorf("starting the counting proxy: %w", err)
		}
		u.Host = t.proxy.Addr()
	}
	q := u.Query()
	if q.Get("connect_timeout") == "" {
		q.Set("connect_timeout", fmt.Sprint(int(PingTimeout/time.Second)))
	}
	u.RawQuery = q.Encode()
	t.pgDSN = u.String()
	switch driver {
	case DriverPgx:
		cfg, err := pgx.ParseConfig(t.pgDSN)
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("parsing -pg for pgx: %w", err)
		}
		t.connector = stdlib.GetConnector(*cfg)
	case DriverPq:
		c, err := pq.NewConnector(t.pgDSN)
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("parsing -pg for lib/pq: %w", err)
		}
		t.connector = c
	}
	return t, nil
}

// Postgres reports whether the target is a PostgreSQL server.
func (t *Target) Postgres() bool { return t.pg }

// PgDriver is the PostgreSQL target's driver (DriverPgx or DriverPq; "" for MySQL targets).
func (t *Target) PgDriver() string { return t.pgDriver }

// PostgresPools lists the pools a PostgreSQL target on driver is measured with by default:
// sqlpool, database-sql, and with pgx also pgxpool.
func PostgresPools(driver string) []string {
	if driver == DriverPgx {
		return []string{PoolSqlpool, PoolDatabaseSQL, PoolPgxpool}
	}
	return []string{PoolSqlpool, PoolDatabaseSQL}
}

// openPoolOn opens pool kind on t: OpenPool over t's connector, or pgxpool over t's URL; on a
// PostgreSQL target the workloads use PostgreSQL's placeholders.
func openPoolOn(kind string, t *Target, size int, logTo io.Writer) (*DB, error) {
	var (
		d   *DB
		err error
	)
	if kind == PoolPgxpool {
		d, err = openPgxpool(t, size)
	} else {
		d, err = OpenPool(kind, t.Connector(), size, logTo)
	}
	if err != nil {
		return nil, err
	}
	if t.pg {
		d.paramSQL = pgParamSQL
	}
	return d, nil
}

func openPgxpool(t *Target, size int) (*DB, error) {
	if !t.pg || t.pgDriver != DriverPgx {
		return nil, fmt.Errorf("pool %s needs a PostgreSQL target on -pg-driver %s", PoolPgxpool, DriverPgx)
	}
	cfg, err := pgxpool.ParseConfig(t.pgDSN)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", PoolPgxpool, err)
	}
	cfg.MaxConns, cfg.MinConns = int32(size), int32(size)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pp, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", PoolPgxpool, err)
	}
	// Fill pgxpool: acquire size connections at once and release them.
	conns := make([]*pgxpool.Conn, 0, size)
	for range size {
		c, err := pp.Acquire(ctx)
		if err != nil {
			for _, c := range conns {
				c.Release()
			}
			pp.Close()
			return nil, fmt.Errorf("%s: filling the pool: %w", PoolPgxpool, err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	db := stdlib.OpenDBFromPool(pp)
	db.SetMaxOpenConns(size)
	return &DB{Name: PoolPgxpool, DB: db, closeAlso: pp.Close}, nil
}
