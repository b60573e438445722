package pgdialect_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/internal/pgtest"
	"github.com/sqlpool/sqlpool/internal/testutil"
	"github.com/sqlpool/sqlpool/pgdialect"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/retry"
)

// retryCase is one PostgreSQL failure that retry.Tx must run again: fail makes attempt 1 of the
// transaction fail (on the retried transaction's own connection, or through admin), and the
// transaction then bumps row 1 of table by one.
type retryCase struct {
	name string
	// state is the SQLSTATE the failed attempt must carry; "" when the driver may report the
	// loss without one.
	state string
	// drivers limits the case to these drivers; nil for both.
	drivers []string
	opts    *sql.TxOptions
	fail    func(t *testing.T, ctx context.Context, tx *sql.Tx, admin *sql.DB, table string) error
}

// TestRetryPostgresTransient: 40001, 40P01, 55P03, 57P01 and 08P01, each made to happen on a
// real server in the first attempt of a retry.Tx through the pool, with pgx and lib/pq: the
// error carries the code, retry classifies it Transient with and without the pool's dialect, and
// the second attempt commits exactly once.
func TestRetryPostgresTransient(t *testing.T) {
	s := pgtest.Shared(t)
	admin := s.Admin(t)
	cases := []retryCase{
		{name: "40001 serialization failure", state: "40001",
			opts: &sql.TxOptions{Isolation: sql.LevelRepeatableRead},
			fail: func(t *testing.T, ctx context.Context, tx *sql.Tx, admin *sql.DB, table string) error {
				var v int
				if err := tx.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v); err != nil {
					return err // the snapshot is taken
				}
				if _, err := admin.ExecContext(ctx, "UPDATE "+table+" SET v = v + 100 WHERE id = 1"); err != nil {
					t.Fatal(err)
				}
				_, err := tx.ExecContext(ctx, "UPDATE "+table+" SET v = v + 1 WHERE id = 1")
				return err
			}},
		{name: "40P01 deadlock", state: "40P01",
			fail: func(t *testing.T, ctx context.Context, tx *sql.Tx, admin *sql.DB, table string) error {
				// This transaction takes row 1, another row 2 and then waits for row 1; this one then
				// asks for row 2. Its deadlock_timeout is the shorter, so its own check finds the
				// cycle and it is the victim.
				if _, err := tx.ExecContext(ctx, "SET LOCAL deadlock_timeout = '20ms'"); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, "UPDATE "+table+" SET v = v WHERE id = 1"); err != nil {
					return err
				}
				other, err := admin.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				var pid int
				if err := other.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
					t.Fatal(err)
				}
				for _, q := range []string{"SET LOCAL deadlock_timeout = '30s'", "UPDATE " + table + " SET v = v + 100 WHERE id = 2"} {
					if _, err := other.ExecContext(ctx, q); err != nil {
						t.Fatal(err)
					}
				}
				done := make(chan error, 1)
				go func() {
					_, err := other.ExecContext(ctx, "UPDATE "+table+" SET v = v + 100 WHERE id = 1")
					if err != nil {
						_ = other.Rollback()
						done <- err
						return
					}
					done <- other.Commit()
				}()
				t.Cleanup(func() {
					if err := <-done; err != nil {
						t.Errorf("the other transaction: %v", err)
					}
				})
				waitLockWait(t, admin, pid)
				_, err = tx.ExecContext(ctx, "UPDATE "+table+" SET v = v + 1 WHERE id = 2")
				return err
			}},
		{name: "55P03 lock not available", state: "55P03",
			fail: func(t *testing.T, ctx context.Context, tx *sql.Tx, admin *sql.DB, table string) error {
				holder, err := admin.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := holder.ExecContext(ctx, "UPDATE "+table+" SET v = v + 100 WHERE id = 1"); err != nil {
					t.Fatal(err)
				}
				defer func() {
					if err := holder.Commit(); err != nil {
						t.Error(err)
					}
				}()
				if _, err := tx.ExecContext(ctx, "SET LOCAL lock_timeout = '50ms'"); err != nil {
					return err
				}
				_, err = tx.ExecContext(ctx, "UPDATE "+table+" SET v = v + 1 WHERE id = 1")
				return err
			}},
		{name: "57P01 backend terminated", state: "57P01", drivers: []string{"pgx"},
			fail: func(t *testing.T, ctx context.Context, tx *sql.Tx, admin *sql.DB, table string) error {
				terminateOwnBackend(t, ctx, tx, admin)
				_, err := tx.ExecContext(ctx, "UPDATE "+table+" SET v = v + 1 WHERE id = 1")
				return err
			}},
		// lib/pq reads the FATAL 57P01 and returns driver.ErrBadConn in its place.
		{name: "57P01 backend terminated, as driver.ErrBadConn", drivers: []string{"pq"},
			fail: func(t *testing.T, ctx context.Context, tx *sql.Tx, admin *sql.DB, table string) error {
				terminateOwnBackend(t, ctx, tx, admin)
				_, err := tx.ExecContext(ctx, "UPDATE "+table+" SET v = v + 1 WHERE id = 1")
				return err
			}},
	}
	for _, d := range drivers {
		for _, tc := range cases {
			if tc.drivers != nil && !strings.Contains(strings.Join(tc.drivers, " "), d.name) {
				continue
			}
			t.Run(d.name+"/"+tc.name, func(t *testing.T) {
				table := fmt.Sprintf("sqlpool_retry_%s_%d", d.name, time.Now().UnixNano())
				s.Exec(t, "CREATE TABLE "+table+" (id int PRIMARY KEY, v int NOT NULL)",
					"INSERT INTO "+table+" VALUES (1, 0), (2, 0)")
				defer s.Exec(t, "DROP TABLE "+table)
				p := newPool(t, d.conn(t, s), pool.Config{MaxConns: 2, AcquireTimeout: 10 * time.Second})
				if p.Dialect() != pgdialect.Dialect {
					t.Fatalf("p.Dialect() = %v; want pgdialect.Dialect", p.Dialect())
				}
				db := p.OpenDB()
				defer db.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				runRetried(t, ctx, d.name, tc, table, admin, func(tx retry.Policy, fn func(context.Context, *sql.Tx) error) error {
					return retry.Tx(ctx, db, tc.opts, tx, fn)
				})
			})
		}
	}
}

// runRetried runs tc's transaction through run, and checks what the first attempt failed with,
// how retry classified it, and that the second attempt committed once.
func runRetried(t *testing.T, ctx context.Context, driverName string, tc retryCase, table string, admin *sql.DB,
	run func(retry.Policy, func(context.Context, *sql.Tx) error) error) {
	t.Helper()
	var seen []error
	policy := retry.Policy{MaxAttempts: 3, Budget: retry.NewBudget(retry.BudgetConfig{}), Dialect: pgdialect.Dialect,
		Observer: &retry.Hooks{OnRetry: func(_ retry.Op, _ int, err error, _ time.Duration) { seen = append(seen, err) }}}
	attempts := 0
	err := run(policy, func(ctx context.Context, tx *sql.Tx) error {
		attempts++
		if attempts == 1 {
			return tc.fail(t, ctx, tx, admin, table)
		}
		_, err := tx.ExecContext(ctx, "UPDATE "+table+" SET v = v + 1 WHERE id = 1")
		return err
	})
	if err != nil || attempts != 2 || len(seen) != 1 {
		t.Fatalf("retry.Tx = %v after %d attempt(s), retried after %v; want nil after 2", err, attempts, seen)
	}
	first := seen[0]
	t.Logf("%s: attempt 1 failed with %T: %v", driverName, first, first)
	if tc.state != "" {
		if got := sqlState(first); got != tc.state {
			t.Errorf("attempt 1 failed with SQLSTATE %q (%v); want %s", got, first, tc.state)
		}
	}
	if c := retry.Classify(first); c != retry.Transient {
		t.Errorf("retry.Classify(%v) = %v; want transient", first, c)
	}
	if c := policy.Classify(first); c != retry.Transient {
		t.Errorf("with pgdialect.Dialect: %v = %v; want transient", first, c)
	}
	if ec := pgdialect.Dialect.Classify(first, pool.ErrorContext{}); !ec.Transient && !ec.Fatal {
		t.Errorf("pgdialect.Dialect.Classify(%v) = %+v; want transient or fatal", first, ec)
	}
	var v int
	if err := admin.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v%100 != 1 {
		t.Errorf("row 1 is %d: the retried transaction's +1 is applied %d times; want once", v, v%100)
	}
}

// sqlState is the SQLSTATE of the first PostgreSQL error in err's chain, or "".
func sqlState(err error) string {
	if st, ok := errors.AsType[interface {
		error
		SQLState() string
	}](err); ok {
		return st.SQLState()
	}
	return ""
}

// waitLockWait waits until backend pid waits for a lock.
func waitLockWait(t *testing.T, admin *sql.DB, pid int) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("backend %d to wait for a lock", pid), func() bool {
		var n int
		if err := admin.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
}

// terminateOwnBackend terminates the backend of tx's connection (pg_terminate_backend) and waits
// until it is gone, so that tx's next statement meets the FATAL 57P01 it sent.
func terminateOwnBackend(t *testing.T, ctx context.Context, tx *sql.Tx, admin *sql.DB) {
	t.Helper()
	var pid int
	if err := tx.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	var ok bool
	if err := admin.QueryRowContext(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("backend %d to exit", pid), func() bool {
		var n int
		if err := admin.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
}

// beginOnConn is the begin function of retry.TxWith for connTx: a connection of db's, and a
// transaction on it.
func beginOnConn(db *sql.DB) func(context.Context, *sql.TxOptions) (connTx, error) {
	return func(ctx context.Context, opts *sql.TxOptions) (connTx, error) {
		conn, err := db.Conn(ctx)
		if err != nil {
			return connTx{}, err
		}
		tx, err := conn.BeginTx(ctx, opts)
		if err != nil {
			_ = conn.Close()
			return connTx{}, err
		}
		return connTx{Tx: tx, conn: conn}, nil
	}
}

// TestRetryTxWithCommitAnswerLost: the connection is cut right after COMMIT has been forwarded
// to the server, which commits, and before its answer comes back. retry.TxWith, like retry.Tx,
// must report an ambiguous commit and not run the transaction again, with both drivers: a second
// attempt would meet the row the first committed.
func TestRetryTxWithCommitAnswerLost(t *testing.T) {
	s := pgtest.Shared(t)
	admin := s.Admin(t)
	table := fmt.Sprintf("sqlpool_txwith_commit_lost_%d", time.Now().UnixNano())
	s.Exec(t, "CREATE TABLE "+table+" (driver text, id int, PRIMARY KEY (driver, id))")
	defer s.Exec(t, "DROP TABLE "+table)
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			proxy := mysqltest.NewProxy(t, s.Addr())
			p := newPool(t, d.conn(t, s.Via(proxy.Addr())), pool.Config{MaxConns: 1, AcquireTimeout: 2 * time.Second})
			db := p.OpenDB()
			defer db.Close()
			attempts := 0
			policy := retry.Policy{MaxAttempts: 3, Budget: retry.NewBudget(retry.BudgetConfig{}), Dialect: p.Dialect(),
				Observer: &retry.Hooks{OnRetry: func(_ retry.Op, n int, err error, _ time.Duration) {
					t.Logf("retry after attempt %d: %v", n, err)
					proxy.CloseAfter(0)
				}}}
			err := retry.TxWith(context.Background(), beginOnConn(db), nil, policy, func(ctx context.Context, tx connTx) error {
				attempts++
				if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+" VALUES ($1, 1)", d.name); err != nil {
					return err
				}
				if attempts == 1 {
					proxy.CloseAfter(12) // COMMIT's Query message is 12 bytes: forwarded, then both sides closed
				}
				return nil
			})
			proxy.CloseAfter(0)
			t.Logf("%s: %d attempt(s): %v", d.name, attempts, err)
			if !errors.Is(err, retry.ErrAmbiguousCommit) || attempts != 1 {
				t.Fatalf("retry.TxWith after the COMMIT's answer was lost: %v after %d attempt(s); want an ambiguous commit after 1", err, attempts)
			}
			// lib/pq's driver.ErrBadConn alone would read "nothing was sent": pgdialect's Commit
			// reports it as a pool.CommitUnknownError. pgx's "conn closed" at COMMIT is ambiguous
			// by retry's own rule (a failed COMMIT without a SQLSTATE).
			if cu, ok := errors.AsType[*pool.CommitUnknownError](err); d.name == "pq" && !ok {
				t.Errorf("lib/pq: %v is not a pool.CommitUnknownError", err)
			} else if ok {
				t.Logf("%s: %v", d.name, cu.Reason)
			}
			testutil.Eventually(t, 10*time.Second, "the server to commit the COMMIT it received", func() bool {
				var n int
				if err := admin.QueryRow("SELECT count(*) FROM "+table+" WHERE driver = $1", d.name).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n == 1
			})
		})
	}
}

// connTx is a transaction on a connection of its own, for retry.TxWith: Commit and Rollback
// also return the connection to the pool. It lets a test reach the driver connection under the
// transaction (sql.Conn.Raw), which *sql.Tx does not.
type connTx struct {
	*sql.Tx
	conn *sql.Conn
}

func (c connTx) Commit() error {
	err := c.Tx.Commit()
	_ = c.conn.Close()
	return err
}

func (c connTx) Rollback() error {
	err := c.Tx.Rollback()
	_ = c.conn.Close()
	return err
}

// TestRetryPostgresConnectionException: the server answers a protocol violation with FATAL
// 08P01 (SQLSTATE class 08, connection exception) and closes the connection. Attempt 1 writes
// a malformed message on its own socket (pgx: the one driver whose socket a test can reach);
// retry.TxWith runs the transaction again on another connection and it commits once.
func TestRetryPostgresConnectionException(t *testing.T) {
	s := pgtest.Shared(t)
	admin := s.Admin(t)
	table := fmt.Sprintf("sqlpool_retry_08_%d", time.Now().UnixNano())
	s.Exec(t, "CREATE TABLE "+table+" (id int PRIMARY KEY, v int NOT NULL)", "INSERT INTO "+table+" VALUES (1, 0), (2, 0)")
	defer s.Exec(t, "DROP TABLE "+table)
	p := newPool(t, s.PgxConnector(t), pool.Config{MaxConns: 2, AcquireTimeout: 10 * time.Second})
	db := p.OpenDB()
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	begin := beginOnConn(db)
	tc := retryCase{name: "08P01", state: "08P01",
		fail: func(t *testing.T, ctx context.Context, tx *sql.Tx, admin *sql.DB, table string) error {
			return nil // set below: it needs the connTx
		}}
	runRetried(t, ctx, "pgx", tc, table, admin, func(policy retry.Policy, fn func(context.Context, *sql.Tx) error) error {
		attempts := 0
		return retry.TxWith(ctx, begin, nil, policy, func(ctx context.Context, tx connTx) error {
			attempts++
			if attempts > 1 {
				return fn(ctx, tx.Tx)
			}
			_ = fn(ctx, tx.Tx) // counts the attempt
			err := tx.conn.Raw(func(dc any) error {
				sc, ok := pool.Unwrap(dc).(*stdlib.Conn)
				if !ok {
					return fmt.Errorf("driver connection is %T, not pgx's", pool.Unwrap(dc))
				}
				// A message of type 'z', which the protocol does not have.
				_, err := sc.Conn().PgConn().Conn().Write([]byte{'z', 0, 0, 0, 4})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = tx.ExecContext(ctx, "UPDATE "+table+" SET v = v + 1 WHERE id = 1")
			return err
		})
	})
}
