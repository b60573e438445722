package pool_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
)

// globalStatus reads one counter of SHOW GLOBAL STATUS.
func globalStatus(t *testing.T, db *sql.DB, name string) int64 {
	t.Helper()
	var n string
	var v int64
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(&n, &v); err != nil {
		t.Fatalf("SHOW GLOBAL STATUS LIKE '%s': %v", name, err)
	}
	return v
}

// A wrong password on a real MariaDB is not a login storm: 16 goroutines querying through
// p.OpenDB() for 4 s, each query with a 3 s context, cost the server at most one failed login a
// second (Access_denied_errors; before: ~10 a second) and every query the 1045 within 1 s (before:
// each waited its 3 s). With the password fixed, Redial brings the pool back at once.
func TestWrongPasswordIsNotALoginStorm(t *testing.T) {
	mysqltest.RequireMariaDB(t, "failed logins counted by a real server")
	dsn := mysqltest.DSN(t)
	admin := openAdmin(t, dsn)
	base, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	base.Logger = mysqltest.QuietLogger{}
	right := base.Passwd
	var passwd atomic.Value
	passwd.Store("wrong-" + right)
	var dials atomic.Int64
	src := func(ctx context.Context, host string) (driver.Connector, error) {
		dials.Add(1)
		c := base.Clone()
		c.Passwd = passwd.Load().(string)
		return mysql.NewConnector(c)
	}

	const callers, window = 16, 4 * time.Second
	denied0 := globalStatus(t, admin, "Access_denied_errors")
	aborted0 := globalStatus(t, admin, "Aborted_connects")
	p, err := pool.New(pool.WithCredentials(base.Addr, src), pool.Config{InitializationFailTimeout: -1, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	db := p.OpenDB()
	t.Cleanup(func() { _ = db.Close() })

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
				var me *mysql.MySQLError
				mu.Lock()
				queries++
				slowest = max(slowest, took)
				if (!errors.As(err, &me) || me.Number != 1045) && wrong == nil {
					wrong = err
				}
				mu.Unlock()
				time.Sleep(10 * time.Millisecond) // a client's next request, not a spin
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	denied := globalStatus(t, admin, "Access_denied_errors") - denied0
	aborted := globalStatus(t, admin, "Aborted_connects") - aborted0
	t.Logf("wrong password, %d callers for %v: %d failed logins at the server (Access_denied_errors; Aborted_connects +%d; %d dials), %.2f/s; %d queries, slowest error after %v",
		callers, elapsed.Round(time.Millisecond), denied, aborted, dials.Load(), float64(denied)/elapsed.Seconds(), queries, slowest.Round(time.Millisecond))
	if wrong != nil {
		t.Errorf("a query failed with %v; want the 1045", wrong)
	}
	if limit := int64(elapsed/time.Second) + 2; denied > limit {
		t.Errorf("%d failed logins in %v; want at most one a second (%d)", denied, elapsed.Round(time.Millisecond), limit)
	}
	if slowest > time.Second {
		t.Errorf("a query got the refused login after %v; want within 1s", slowest.Round(time.Millisecond))
	}

	// The password fixed, Redial dials at once: the next query succeeds well before the
	// creator's backoff (by now 4 s) ends.
	passwd.Store(right)
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
