package pgdialect_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/internal/pgtest"
	"github.com/sqlpool/sqlpool/internal/testutil"
	"github.com/sqlpool/sqlpool/internal/txsoak"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/retry"
)

// envSoakSeconds sets how long TestRetrySoakExactAccounting runs per driver (default 4 s, 1 s
// with -short).
const envSoakSeconds = "SQLPOOL_PG_SOAK_SECONDS"

// TestRetrySoakExactAccounting is internal/txsoak's fault soak on PostgreSQL, with both drivers:
// 8 goroutines run retry.Tx transactions on a pool of 4 at REPEATABLE READ (so that
// serialization failures, 40001, and deadlocks, 40P01, come by themselves) while one of the
// pool's backends is terminated every 10–60 ms (pg_terminate_backend): between statements,
// mid-transaction or during COMMIT. Every transaction is accounted for against the tables.
func TestRetrySoakExactAccounting(t *testing.T) {
	dur := txsoak.Duration(t, envSoakSeconds, 4*time.Second)
	s := pgtest.Shared(t)
	admin := s.Admin(t)
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			app := fmt.Sprintf("sqlpool_soak_%s_%d", d.name, time.Now().UnixNano())
			logT, counterT := app+"_log", app+"_counter"
			s.Exec(t,
				"CREATE TABLE "+logT+" (worker int, seq int, PRIMARY KEY (worker, seq))",
				"CREATE TABLE "+counterT+" (id int PRIMARY KEY, n bigint NOT NULL)",
				"INSERT INTO "+counterT+" SELECT g, 0 FROM generate_series(0, 3) g")
			defer s.Exec(t, "DROP TABLE "+logT, "DROP TABLE "+counterT)
			var c driver.Connector
			if d.name == "pgx" {
				c = s.PgxConnector(t, "application_name="+app)
			} else {
				c = s.PqConnector(t, "application_name="+app)
			}
			p := newPool(t, c, pool.Config{MaxConns: 4, AcquireTimeout: 30 * time.Second, ConnectTimeout: 5 * time.Second})
			db := p.OpenDB()
			defer db.Close()
			txsoak.Run(t, txsoak.Config{
				DB: db, Admin: admin, Duration: dur, Iso: sql.LevelRepeatableRead,
				Insert: "INSERT INTO " + logT + " (worker, seq) VALUES ($1, $2)",
				Bump:   "UPDATE " + counterT + " SET n = n + 1 WHERE id = $1",
				Rows:   "SELECT worker, seq FROM " + logT,
				Sum:    "SELECT sum(n) FROM " + counterT,
				Kill: func(ctx context.Context) (int, error) {
					var n int
					err := admin.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM (SELECT pid FROM pg_stat_activity
						WHERE application_name = $1 ORDER BY random() LIMIT 1) x`, app).Scan(&n)
					return n, err
				},
				Kind: errKind,
			}).Check(t)
		})
	}
}

// errKind names an error for the soak's log: its SQLSTATE, driver.ErrBadConn, or its type.
func errKind(err error) string {
	if st, ok := errors.AsType[interface {
		error
		SQLState() string
	}](err); ok {
		return st.SQLState()
	}
	if errors.Is(err, driver.ErrBadConn) {
		return "ErrBadConn"
	}
	return fmt.Sprintf("%T", err)
}

// TestRetryCommitAnswerLost: the connection is cut right after the COMMIT message has been
// forwarded to the server, which commits, and before its answer comes back. retry.Tx must report
// an ambiguous commit and not run the transaction again, with both drivers: lib/pq turns the
// lost connection into driver.ErrBadConn, which alone reads "nothing was sent" (pgdialect's Commit wraps
// it in a pool.CommitUnknownError); a second attempt would fail with 23505 on the row the first one
// committed, and its caller would be told the transaction failed.
func TestRetryCommitAnswerLost(t *testing.T) {
	s := pgtest.Shared(t)
	admin := s.Admin(t)
	table := fmt.Sprintf("sqlpool_commit_lost_%d", time.Now().UnixNano())
	s.Exec(t, "CREATE TABLE "+table+" (driver text, id int, PRIMARY KEY (driver, id))")
	defer s.Exec(t, "DROP TABLE "+table)
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			proxy := mysqltest.NewProxy(t, s.Addr())
			p := newPool(t, d.conn(t, s.Via(proxy.Addr())), pool.Config{MaxConns: 1, AcquireTimeout: 2 * time.Second})
			db := p.OpenDB()
			defer db.Close()
			attempts := 0
			policy := retry.Policy{MaxAttempts: 3, Budget: retry.NewBudget(retry.BudgetConfig{}),
				Observer: &retry.Hooks{OnRetry: func(_ retry.Op, n int, err error, _ time.Duration) {
					t.Logf("retry after attempt %d: %v", n, err)
					proxy.CloseAfter(0) // a retry reaches the server, and meets the row
				}}}
			err := retry.Tx(context.Background(), db, nil, policy, func(ctx context.Context, tx *sql.Tx) error {
				attempts++
				if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+" VALUES ($1, 1)", d.name); err != nil {
					return err
				}
				if attempts == 1 {
					// COMMIT is one 12-byte Query message ('Q', length, "COMMIT\x00"):
					// the proxy forwards it, then closes both sides.
					proxy.CloseAfter(12)
				}
				return nil
			})
			proxy.CloseAfter(0)
			t.Logf("%s: %d attempt(s): %v", d.name, attempts, err)
			if !errors.Is(err, retry.ErrAmbiguousCommit) || attempts != 1 {
				t.Fatalf("retry.Tx after the COMMIT's answer was lost: %v after %d attempt(s); want an ambiguous commit after 1", err, attempts)
			}
			// The server reads the COMMIT (then the end of the stream) in its own time.
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

// TestRetryCommitContextEndsInFlight: pgx commits with the transaction's context; when it ends
// while COMMIT is in flight (held by the proxy), retry.Tx reports an ambiguous commit, not the
// bare context error that reads "COMMIT was not sent".
func TestRetryCommitContextEndsInFlight(t *testing.T) {
	s := pgtest.Shared(t)
	table := fmt.Sprintf("sqlpool_commit_ctx_%d", time.Now().UnixNano())
	s.Exec(t, "CREATE TABLE "+table+" (id int PRIMARY KEY)")
	defer s.Exec(t, "DROP TABLE "+table)
	proxy := mysqltest.NewProxy(t, s.Addr())
	defer proxy.Blackhole(false)
	p := newPool(t, s.Via(proxy.Addr()).PgxConnector(t), pool.Config{MaxConns: 1})
	db := p.OpenDB()
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	attempts := 0
	err := retry.Tx(ctx, db, nil, retry.Policy{Budget: retry.NewBudget(retry.BudgetConfig{})}, func(ctx context.Context, tx *sql.Tx) error {
		attempts++
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
			return err
		}
		proxy.Blackhole(true) // COMMIT is written, and neither it nor an answer gets through
		return nil
	})
	t.Logf("%d attempt(s): %v", attempts, err)
	if !errors.Is(err, retry.ErrAmbiguousCommit) || attempts != 1 {
		t.Fatalf("retry.Tx with its context ending during COMMIT: %v after %d attempt(s); want an ambiguous commit after 1", err, attempts)
	}
}
