package pool_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
)

// embedded starts the embedded MySQL-protocol server for an example and returns a
// go-sql-driver/mysql connector to it and a function that stops it.
func embedded() (driver.Connector, func()) {
	dsn, stop, err := mysqltest.StartEmbedded()
	if err != nil {
		panic(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		panic(err)
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		panic(err)
	}
	return c, func() { _ = stop() }
}

func ExampleNew() {
	connector, stop := embedded()
	defer stop()

	p, err := pool.New(connector, pool.Config{Name: "example", MaxConns: 4, Logger: quietLog})
	if err != nil {
		fmt.Println("no database:", err)
		return
	}
	defer p.Close()
	// database/sql in front: a borrow takes a connection from database/sql's idle list,
	// which the pool checks (ResetSession) and cleans on return (IsValid); only when that list
	// is empty does database/sql acquire one from the pool (Connect).
	db := p.OpenDB()
	defer db.Close()

	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT 1 + 1").Scan(&n); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(n)
	// Output: 2
}

func ExamplePool_Stats() {
	connector, stop := embedded()
	defer stop()
	p, err := pool.New(connector, pool.Config{Name: "stats", MaxConns: 2, MinIdleConns: -1, Logger: quietLog})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	db := p.OpenDB()
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	s := p.Stats()
	fmt.Printf("%s: total=%d active=%d\n", s.Name, s.Total, s.Active)
	_ = conn.Close()
	s = p.Stats()
	fmt.Printf("%s: total=%d active=%d idle=%d\n", s.Name, s.Total, s.Active, s.Idle)
	// Output:
	// stats: total=1 active=1
	// stats: total=1 active=0 idle=1
}

func ExampleUnwrap() {
	connector, stop := embedded()
	defer stop()
	p, err := pool.New(connector, pool.Config{MaxConns: 1, Logger: quietLog})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	db := p.OpenDB()
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	_ = conn.Raw(func(dc any) error {
		// The driver's own connection. The pool cannot see what is done with it, so the
		// session is reset (or the connection discarded) when it is returned.
		_, isPinger := pool.Unwrap(dc).(driver.Pinger)
		fmt.Println("driver conn reached:", isPinger)
		return nil
	})
	// Output: driver conn reached: true
}

func ExampleAcquireTimeoutError() {
	connector, stop := embedded()
	defer stop()
	p, err := pool.New(connector, pool.Config{Name: "tiny", MaxConns: 1, AcquireTimeout: 250 * time.Millisecond, Logger: quietLog})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	db := p.OpenDB()
	defer db.Close()
	ctx := context.Background()
	held, _ := db.Conn(ctx) // the only connection
	defer held.Close()

	_, err = db.Conn(ctx)
	var te *pool.AcquireTimeoutError
	fmt.Println(errors.Is(err, pool.ErrAcquireTimeout), errors.As(err, &te) && te.Active == 1)
	// Output: true true
}

func ExamplePool_Redial() {
	connector, stop := embedded()
	defer stop()
	var rotated atomic.Bool // the secret store has caught up with the server's new password
	source := func(ctx context.Context, host string) (driver.Connector, error) {
		if !rotated.Load() {
			// What the server answers a stale password with.
			return nil, &mysql.MySQLError{Number: 1045, Message: "Access denied for user 'app'@'10.0.0.7' (using password: YES)"}
		}
		return connector, nil
	}
	p, err := pool.New(pool.WithCredentials("db", source), pool.Config{Name: "app", MaxConns: 2, InitializationFailTimeout: -1, Logger: quietLog})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	db := p.OpenDB()
	defer db.Close()

	// The pool retries a refused login after 1 s, 2 s, 4 s … (LoginBackoffMax); meanwhile a
	// query that finds no idle connection gets the refusal at once.
	err = db.PingContext(context.Background())
	var me *mysql.MySQLError
	fmt.Println(errors.As(err, &me) && me.Number == 1045, errors.Is(err, pool.ErrUnavailable))

	rotated.Store(true)
	p.Redial() // the new credentials are in place: dial now
	fmt.Println(db.PingContext(context.Background()))
	// Output:
	// true true
	// <nil>
}
