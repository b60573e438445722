package retry_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/retry"
)

// mysqlDB returns a DB in front of a pool (the project's reference setup)
// of go-sql-driver/mysql connections to dsn, with the given session
// variables set on every connection through the DSN.
func mysqlDB(t *testing.T, dsn string, maxConns int, params map[string]string) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("ParseDSN: %v", err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	for k, v := range params {
		cfg.Params[k] = v
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatalf("NewConnector: %v", err)
	}
	p, err := pool.New(c, pool.Config{MaxConns: maxConns, Logger: quietLog})
	if err != nil {
		t.Fatalf("pool.New: %v", err)
	}
	db := p.OpenDB()
	t.Cleanup(func() {
		_ = db.Close()
		if err := p.Close(); err != nil {
			t.Errorf("pool Close: %v", err)
		}
	})
	return db
}

func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func mustCount(t *testing.T, db *sql.DB, query string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// arrive marks this goroutine's arrival (closes mine) and waits for the
// other's, or for ctx.
func arrive(ctx context.Context, mine, theirs chan struct{}) error {
	close(mine)
	select {
	case <-theirs:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The bar: two goroutines deadlock each other 100 times through retry.Tx;
// all 200 transactions commit exactly once.
//
// Goroutine 0 updates row 1 then row 2, goroutine 1 row 2 then row 1. In
// each round both first take their first row, meet at a barrier (on the
// first attempt only), then ask for the other's row: a lock cycle that
// InnoDB breaks by rolling one of them back with 1213. The victim's retry.Tx
// runs its transaction again; the rounds are kept in step by a second
// barrier after both committed.
func TestTxDeadlockMariaDB(t *testing.T) {
	mysqltest.RequireMariaDB(t, "InnoDB deadlock detection")
	// A stuck lock wait ends after 10 s instead of the default 50 s.
	db := mysqlDB(t, mysqltest.DSN(t), 4, map[string]string{"innodb_lock_wait_timeout": "10"})
	mustExec(t, db, "DROP TABLE IF EXISTS retry_deadlock_rows, retry_deadlock_log")
	mustExec(t, db, "CREATE TABLE retry_deadlock_rows (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB")
	mustExec(t, db, "CREATE TABLE retry_deadlock_log (g INT, i INT, attempt INT NOT NULL, PRIMARY KEY (g, i)) ENGINE=InnoDB")
	defer mustExec(t, db, "DROP TABLE IF EXISTS retry_deadlock_rows, retry_deadlock_log")
	mustExec(t, db, "INSERT INTO retry_deadlock_rows VALUES (1, 0), (2, 0)")

	const rounds = 100
	var locked, finished [rounds][2]chan struct{}
	for i := range rounds {
		for g := range 2 {
			locked[i][g], finished[i][g] = make(chan struct{}), make(chan struct{})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var mu sync.Mutex
	deadlocks, otherRetries, attemptsTotal := 0, 0, 0
	var otherErrs []error
	obs := &retry.Hooks{
		OnAttempt: func(retry.Op, int) { mu.Lock(); attemptsTotal++; mu.Unlock() },
		OnRetry: func(_ retry.Op, _ int, err error, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			if me, ok := errors.AsType[*mysql.MySQLError](err); ok && me.Number == 1213 {
				deadlocks++
			} else {
				otherRetries++
				otherErrs = append(otherErrs, err)
			}
		},
	}
	policy := retry.Policy{
		MaxAttempts: 10,
		Observer:    obs,
		// This test is a deliberate storm (a retry for every second
		// transaction): a private budget that allows it.
		Budget: retry.NewBudget(retry.BudgetConfig{Ratio: 1}),
	}

	start := time.Now()
	var wg sync.WaitGroup
	for g := range 2 {
		first, second := 1, 2
		if g == 1 {
			first, second = 2, 1
		}
		wg.Go(func() {
			for i := range rounds {
				attempt := 0
				err := retry.Tx(ctx, db, nil, policy, func(ctx context.Context, tx *sql.Tx) error {
					attempt++
					if _, err := tx.ExecContext(ctx, "UPDATE retry_deadlock_rows SET v = v + 1 WHERE id = ?", first); err != nil {
						return err
					}
					if attempt == 1 {
						if err := arrive(ctx, locked[i][g], locked[i][1-g]); err != nil {
							return err
						}
					}
					if _, err := tx.ExecContext(ctx, "UPDATE retry_deadlock_rows SET v = v + 1 WHERE id = ?", second); err != nil {
						return err
					}
					_, err := tx.ExecContext(ctx, "INSERT INTO retry_deadlock_log (g, i, attempt) VALUES (?, ?, ?)", g, i, attempt)
					return err
				})
				if err != nil {
					t.Errorf("goroutine %d, round %d: %v", g, i, err)
					cancel()
					return
				}
				if err := arrive(ctx, finished[i][g], finished[i][1-g]); err != nil {
					t.Errorf("goroutine %d, round %d: waiting for the other: %v", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if t.Failed() {
		return
	}

	rows := mustCount(t, db, "SELECT COUNT(*) FROM retry_deadlock_log")
	distinct := mustCount(t, db, "SELECT COUNT(DISTINCT g, i) FROM retry_deadlock_log")
	retried := mustCount(t, db, "SELECT COUNT(*) FROM retry_deadlock_log WHERE attempt > 1")
	v1 := mustCount(t, db, "SELECT v FROM retry_deadlock_rows WHERE id = 1")
	v2 := mustCount(t, db, "SELECT v FROM retry_deadlock_rows WHERE id = 2")
	t.Logf("%d rounds in %v: %d transactions committed (%d after a retry), %d attempts, %d deadlock retries, %d other retries %v; v = %d, %d",
		rounds, elapsed.Round(time.Millisecond), rows, retried, attemptsTotal, deadlocks, otherRetries, otherErrs, v1, v2)
	if rows != 2*rounds || distinct != 2*rounds {
		t.Fatalf("%d rows (%d distinct) in the log, want %d: every transaction commits exactly once", rows, distinct, 2*rounds)
	}
	// Each committed transaction added 1 to both rows, and a rolled-back
	// attempt added nothing.
	if v1 != 2*rounds || v2 != 2*rounds {
		t.Fatalf("v = %d, %d; want %d each: a transaction was applied twice or not at all", v1, v2, 2*rounds)
	}
	// Every round was a real deadlock, and its victim committed on a retry.
	if deadlocks < rounds || retried < rounds {
		t.Fatalf("%d deadlock retries and %d transactions committed after a retry, want at least %d each", deadlocks, retried, rounds)
	}
	if attemptsTotal != 2*rounds+deadlocks+otherRetries {
		t.Fatalf("%d attempts, want %d committed + %d retries", attemptsTotal, 2*rounds, deadlocks+otherRetries)
	}
}

// The bar: a lock wait timeout inside retry.Tx is rolled back and retried,
// and the retry succeeds once the lock is free.
func TestTxLockWaitTimeoutMariaDB(t *testing.T) {
	mysqltest.RequireMariaDB(t, "InnoDB lock wait timeout (1205)")
	db := mysqlDB(t, mysqltest.DSN(t), 4, map[string]string{"innodb_lock_wait_timeout": "1"})
	ctx := context.Background()
	mustExec(t, db, "DROP TABLE IF EXISTS retry_lockwait, retry_lockwait_marks")
	mustExec(t, db, "CREATE TABLE retry_lockwait (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB")
	mustExec(t, db, "CREATE TABLE retry_lockwait_marks (attempt INT PRIMARY KEY) ENGINE=InnoDB")
	defer mustExec(t, db, "DROP TABLE IF EXISTS retry_lockwait, retry_lockwait_marks")
	mustExec(t, db, "INSERT INTO retry_lockwait VALUES (1, 0)")

	// Another transaction holds the row.
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(ctx, "SELECT v FROM retry_lockwait WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}

	var retryErrs []error
	var released time.Time
	var release sync.Once
	policy := retry.Policy{
		Budget: retry.NewBudget(retry.BudgetConfig{}),
		Observer: &retry.Hooks{OnRetry: func(_ retry.Op, _ int, err error, _ time.Duration) {
			retryErrs = append(retryErrs, err)
			// The first attempt timed out waiting: now free the lock.
			release.Do(func() {
				released = time.Now()
				if err := holder.Rollback(); err != nil {
					t.Errorf("holder rollback: %v", err)
				}
			})
		}},
	}
	attempts := 0
	start := time.Now()
	err = retry.Tx(ctx, db, nil, policy, func(ctx context.Context, tx *sql.Tx) error {
		attempts++
		if _, err := tx.ExecContext(ctx, "INSERT INTO retry_lockwait_marks VALUES (?)", attempts); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE retry_lockwait SET v = v + 1 WHERE id = 1")
		return err
	})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("Tx = %v", err)
	}
	t.Logf("committed after %d attempts in %v (lock freed after %v); retried on %v",
		attempts, elapsed.Round(time.Millisecond), released.Sub(start).Round(time.Millisecond), retryErrs)
	if attempts != 2 || len(retryErrs) != 1 {
		t.Fatalf("%d attempts, %d retries; want 2 and 1", attempts, len(retryErrs))
	}
	if me, ok := errors.AsType[*mysql.MySQLError](retryErrs[0]); !ok || me.Number != 1205 {
		t.Fatalf("retried on %v, want 1205", retryErrs[0])
	}
	if elapsed < time.Second {
		t.Fatalf("took %v: the first attempt cannot have waited out innodb_lock_wait_timeout=1", elapsed)
	}
	// The first attempt's insert was rolled back with it; only the second's
	// work committed.
	if n := mustCount(t, db, "SELECT COUNT(*) FROM retry_lockwait_marks WHERE attempt = 1"); n != 0 {
		t.Fatalf("the first attempt's insert survived: the transaction was not rolled back")
	}
	if n := mustCount(t, db, "SELECT COUNT(*) FROM retry_lockwait_marks WHERE attempt = 2"); n != 1 {
		t.Fatalf("the second attempt's insert is missing")
	}
	if v := mustCount(t, db, "SELECT v FROM retry_lockwait WHERE id = 1"); v != 1 {
		t.Fatalf("v = %d, want 1", v)
	}
}

// retry.Tx against whichever server DSN names (the embedded one without
// MariaDB): a transient failure in fn, then a commit that sticks.
func TestTxRoundTrip(t *testing.T) {
	db := mysqlDB(t, mysqltest.DSN(t), 2, nil)
	mustExec(t, db, "DROP TABLE IF EXISTS retry_roundtrip")
	mustExec(t, db, "CREATE TABLE retry_roundtrip (id INT PRIMARY KEY, attempt INT NOT NULL)")
	defer mustExec(t, db, "DROP TABLE IF EXISTS retry_roundtrip")
	attempts := 0
	err := retry.Tx(context.Background(), db, nil, fast(3), func(ctx context.Context, tx *sql.Tx) error {
		attempts++
		if _, err := tx.ExecContext(ctx, "INSERT INTO retry_roundtrip VALUES (?, ?)", attempts, attempts); err != nil {
			return err
		}
		if attempts == 1 {
			return errDeadlock // as if the server had chosen this transaction as a deadlock victim
		}
		return nil
	})
	if err != nil || attempts != 2 {
		t.Fatalf("Tx = %v after %d attempts", err, attempts)
	}
	if n := mustCount(t, db, "SELECT COUNT(*) FROM retry_roundtrip WHERE attempt = 2"); n != 1 {
		t.Fatalf("the committed attempt's row is missing")
	}
	if mysqltest.IsMariaDB() {
		if n := mustCount(t, db, "SELECT COUNT(*) FROM retry_roundtrip"); n != 1 {
			t.Fatalf("%d rows: the first attempt was not rolled back", n)
		}
	}
}

// A connection killed in the middle of a transaction, before COMMIT: the
// server rolls that transaction back, so Tx runs it again on a new
// connection and only the second attempt's work is committed (the reason a
// lost connection outside COMMIT is Transient).
func TestTxConnectionKilledMariaDB(t *testing.T) {
	mysqltest.RequireMariaDB(t, "KILL CONNECTION and InnoDB rollback of a dropped connection")
	db := mysqlDB(t, mysqltest.DSN(t), 4, nil)
	ctx := context.Background()
	mustExec(t, db, "DROP TABLE IF EXISTS retry_killed")
	mustExec(t, db, "CREATE TABLE retry_killed (attempt INT PRIMARY KEY) ENGINE=InnoDB")
	defer mustExec(t, db, "DROP TABLE IF EXISTS retry_killed")

	var retryErrs []error
	policy := fast(3)
	policy.Observer = &retry.Hooks{OnRetry: func(_ retry.Op, _ int, err error, _ time.Duration) { retryErrs = append(retryErrs, err) }}
	attempts := 0
	err := retry.Tx(ctx, db, nil, policy, func(ctx context.Context, tx *sql.Tx) error {
		attempts++
		if _, err := tx.ExecContext(ctx, "INSERT INTO retry_killed VALUES (?)", attempts); err != nil {
			return err
		}
		if attempts == 1 {
			var id int64
			if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				return err
			}
			if _, err := db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10)); err != nil {
				return fmt.Errorf("KILL: %w", err) // permanent: fails the test
			}
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO retry_killed VALUES (?)", 100+attempts)
		return err
	})
	if err != nil {
		t.Fatalf("Tx = %v", err)
	}
	t.Logf("committed after %d attempts; retried on %v (class %v)", attempts, retryErrs, retry.Classify(retryErrs[0]))
	if attempts != 2 {
		t.Fatalf("%d attempts, want 2", attempts)
	}
	if n := mustCount(t, db, "SELECT COUNT(*) FROM retry_killed WHERE attempt IN (1, 101)"); n != 0 {
		t.Fatalf("%d rows of the killed attempt survived", n)
	}
	if n := mustCount(t, db, "SELECT COUNT(*) FROM retry_killed WHERE attempt IN (2, 102)"); n != 2 {
		t.Fatalf("%d rows of the second attempt, want 2", n)
	}
}
