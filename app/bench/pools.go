package bench

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"log/slog"
	"time"

	_ "github.com/sqlpool/sqlpool/mysqldialect" // MySQL's pool.Dialect, registered on import
	"github.com/sqlpool/sqlpool/pool"
)

// The pools compared side by side. Each is a *sql.DB of size connections over the same
// driver.Connector.
const (
	// PoolSqlpool is p.OpenDB(): database/sql keeps the pool's idle connections in its own
	// list (the pool checks each checkout in ResetSession and cleans each return in IsValid),
	// and a borrow that finds none waits in the pool, first come, first served.
	PoolSqlpool = "sqlpool"
	// PoolDatabaseSQL is plain database/sql, MaxOpen = MaxIdle = size: no validation on
	// borrow, no cleanup on return.
	PoolDatabaseSQL = "database-sql"
	// PoolNaiveSafe is plain database/sql made safe the naive way, as DBCP2 with testOnBorrow
	// and rollbackOnReturn: a Ping on every borrow and a ROLLBACK on every return. It is done
	// in Borrow and Return (the benchmark body), not in a wrapping driver.
	PoolNaiveSafe = "naive-safe"
)

// AllPools lists the pools in their report order.
var AllPools = []string{PoolSqlpool, PoolDatabaseSQL, PoolNaiveSafe}

// DB is one pool under test.
type DB struct {
	Name  string
	DB    *sql.DB
	Pool  *pool.Pool // nil for the plain database/sql pools
	naive bool
	// paramSQL is cycleParamStatement's statement with one placeholder ("" means "SELECT ?").
	paramSQL string
	// closeAlso, if not nil, is called after DB.Close (pgxpool's Close).
	closeAlso func()
}

// OpenPool opens pool kind over c with size connections and fills it, so that the first
// measured operation does not dial. logTo receives the pool's warnings (nil: discarded).
func OpenPool(kind string, c driver.Connector, size int, logTo io.Writer) (*DB, error) {
	d := &DB{Name: kind}
	switch kind {
	case PoolSqlpool:
		if logTo == nil {
			logTo = io.Discard
		}
		p, err := pool.New(c, pool.Config{
			Name:     "bench-" + kind,
			MaxConns: size,
			Logger:   slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		if err != nil {
			return nil, err
		}
		d.Pool = p
		deadline := time.Now().Add(30 * time.Second)
		for p.Stats().Idle < size {
			if time.Now().After(deadline) {
				_ = p.Close()
				return nil, fmt.Errorf("%s: pool not filled within 30s: %v", kind, p.Stats())
			}
			time.Sleep(time.Millisecond)
		}
		d.DB = p.OpenDB()
	case PoolDatabaseSQL, PoolNaiveSafe:
		d.DB = sql.OpenDB(c)
		d.DB.SetMaxOpenConns(size)
		d.DB.SetMaxIdleConns(size)
		d.naive = kind == PoolNaiveSafe
	default:
		return nil, fmt.Errorf("unknown pool %q (want one of %v)", kind, AllPools)
	}
	if err := d.fill(size); err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

// fill borrows size connections at once and returns them, so that database/sql (plain, or in
// front of the pool through p.OpenDB()) has them open and idle in its own list.
func (d *DB) fill(size int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conns := make([]*sql.Conn, 0, size)
	var err error
	for range size {
		var c *sql.Conn
		if c, err = d.DB.Conn(ctx); err != nil {
			err = fmt.Errorf("%s: filling the pool: %w", d.Name, err)
			break
		}
		if err = c.PingContext(ctx); err != nil {
			err = fmt.Errorf("%s: filling the pool: %w", d.Name, err)
			_ = c.Close()
			break
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		_ = c.Close()
	}
	return err
}

// Borrow takes a connection: db.Conn, and for naive-safe a Ping.
func (d *DB) Borrow(ctx context.Context) (*sql.Conn, error) {
	c, err := d.DB.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if d.naive {
		if err := c.PingContext(ctx); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Return gives a connection back: for naive-safe a ROLLBACK, then Close.
func (d *DB) Return(ctx context.Context, c *sql.Conn) error {
	if d.naive {
		if _, err := c.ExecContext(ctx, "ROLLBACK"); err != nil {
			_ = c.Close()
			return err
		}
	}
	return c.Close()
}

// Close closes the DB and, for the sqlpool kinds, the pool.
func (d *DB) Close() error {
	err := d.DB.Close()
	if d.closeAlso != nil {
		d.closeAlso()
	}
	if d.Pool != nil {
		if e := d.Pool.Close(); err == nil {
			err = e
		}
	}
	return err
}
