package pgdialect_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlpool/sqlpool/internal/pgtest"
	"github.com/sqlpool/sqlpool/pgdialect"
	"github.com/sqlpool/sqlpool/pool"
)

// A wrong password on PostgreSQL (28P01) is not a login storm: 16 goroutines querying through
// p.OpenDB() for 3 s cost at most one login attempt a second, and every query the 28P01 within
// 1 s; with the password fixed, Redial brings the pool back at once. A private server, whose
// pg_hba.conf asks one role for a password (the others keep trust).
func TestWrongPasswordIsNotALoginStormPG(t *testing.T) {
	s := pgtest.Start(t)
	admin := s.Admin(t)
	const role = "sqlpool_pw"
	s.Exec(t, "CREATE ROLE "+role+" LOGIN PASSWORD 'right'")
	var hba string
	if err := admin.QueryRow("SHOW hba_file").Scan(&hba); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hba, append([]byte("host all "+role+" 127.0.0.1/32 scram-sha-256\n"), old...), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Exec(t, "SELECT pg_reload_conf()")

	cfg, err := pgx.ParseConfig(s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.User = role
	var passwd atomic.Value
	passwd.Store("wrong")
	var dials atomic.Int64
	src := func(ctx context.Context, host string) (driver.Connector, error) {
		dials.Add(1)
		c := cfg.Copy()
		c.Password = passwd.Load().(string)
		return stdlib.GetConnector(*c), nil
	}
	isRefused := func(err error) bool {
		var pge *pgconn.PgError
		return errors.As(err, &pge) && pge.Code == "28P01"
	}
	// The reload is asynchronous: wait until the server asks the role for its password.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, _ := src(context.Background(), "")
		dc, err := c.Connect(context.Background())
		if isRefused(err) {
			break
		}
		if err == nil {
			_ = dc.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server still lets %s in without its password 10 s after pg_reload_conf: %v", role, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	dials.Store(0)

	p, err := pool.New(pool.WithCredentials("pg", src), pool.Config{InitializationFailTimeout: -1, Dialect: pgdialect.Dialect, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	db := p.OpenDB()
	t.Cleanup(func() { _ = db.Close() })

	const callers, window = 16, 3 * time.Second
	start := time.Now()
	var mu sync.Mutex
	var queries int
	var slowest time.Duration
	var wrong error
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < window {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				began := time.Now()
				var one int
				err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
				took := time.Since(began)
				cancel()
				mu.Lock()
				queries++
				slowest = max(slowest, took)
				if !isRefused(err) && wrong == nil {
					wrong = err
				}
				mu.Unlock()
				time.Sleep(10 * time.Millisecond) // a client's next request, not a spin
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	n := dials.Load()
	t.Logf("wrong password, %d callers for %v: %d login attempts (%.2f/s); %d queries, slowest error after %v",
		callers, elapsed.Round(time.Millisecond), n, float64(n)/elapsed.Seconds(), queries, slowest.Round(time.Millisecond))
	if wrong != nil {
		t.Errorf("a query failed with %v; want the 28P01", wrong)
	}
	if limit := int64(elapsed/time.Second) + 2; n > limit {
		t.Errorf("%d login attempts in %v; want at most one a second (%d)", n, elapsed.Round(time.Millisecond), limit)
	}
	if slowest > time.Second {
		t.Errorf("a query got the refused login after %v; want within 1s", slowest.Round(time.Millisecond))
	}

	passwd.Store("right")
	p.Redial()
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var one int
	if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("a query after Redial with the right password: %v", err)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("the first query after Redial took %v; want within 1s", took.Round(time.Millisecond))
	}
}
