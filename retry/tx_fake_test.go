package retry_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/retry"
)

var quietLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

// fakePool returns the fake driver's connector and a DB in front of a pool
// of at most maxConns of its connections (the project's reference setup).
func fakePool(t *testing.T, maxConns int) (*fakedb.Connector, *sql.DB) {
	t.Helper()
	c := fakedb.New()
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
	return c, db
}

// liveConn returns the fake connection that is open now (with MaxConns 1,
// the one inside the running transaction).
func liveConn(t *testing.T, c *fakedb.Connector) *fakedb.Conn {
	t.Helper()
	conns := c.Conns()
	for i := len(conns) - 1; i >= 0; i-- {
		if !conns[i].Closed() {
			return conns[i]
		}
	}
	t.Fatal("no open fake connection")
	return nil
}

// count counts the calls named call ("BEGIN", "COMMIT", "ROLLBACK", or a
// statement prefix) across every connection the connector opened.
func count(c *fakedb.Connector, call string) int {
	n := 0
	for _, cn := range c.Conns() {
		for _, s := range cn.Log() {
			if s == call || strings.HasPrefix(s, call+" ") {
				n++
			}
		}
	}
	return n
}

// The bar: a COMMIT that fails with mysql.ErrInvalidConn (the connection was
// lost with COMMIT in flight) is ErrAmbiguousCommit after exactly one attempt.
func TestTxAmbiguousCommit(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"ErrInvalidConn", mysql.ErrInvalidConn},
		{"1180", errDuringCommit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, db := fakePool(t, 1)
			rec := &recorder{}
			p := fast(5)
			p.Observer = rec
			attempts := 0
			err := retry.Tx(context.Background(), db, nil, p, func(ctx context.Context, tx *sql.Tx) error {
				attempts++
				if _, err := tx.ExecContext(ctx, "INSERT INTO spans VALUES (1)"); err != nil {
					return err
				}
				liveConn(t, c).FailNext(tc.err) // the next call on the connection is COMMIT
				return nil
			})
			if !errors.Is(err, retry.ErrAmbiguousCommit) || !errors.Is(err, tc.err) {
				t.Fatalf("Tx = %v, want ErrAmbiguousCommit wrapping %v", err, tc.err)
			}
			var re *retry.Error
			if !errors.As(err, &re) || re.Attempts != 1 || re.Class != retry.Ambiguous || re.Op != retry.OpTx {
				t.Fatalf("Tx = %#v", err)
			}
			if attempts != 1 || count(c, "BEGIN") != 1 || count(c, "COMMIT") != 1 || count(c, "INSERT") != 1 {
				t.Fatalf("fn ran %d times; BEGIN %d, COMMIT %d, INSERT %d; want exactly one each",
					attempts, count(c, "BEGIN"), count(c, "COMMIT"), count(c, "INSERT"))
			}
			if rec.ambiguous != 1 || rec.retries != 0 || rec.attempts != 1 {
				t.Fatalf("observer %+v", rec)
			}
			if retry.Classify(err) != retry.Ambiguous {
				t.Fatalf("Classify(%v) = %v", err, retry.Classify(err))
			}
			t.Logf("%v", err)
		})
	}
}

// A deadlock inside fn: rolled back, and the whole transaction runs again.
func TestTxDeadlockRetried(t *testing.T) {
	c, db := fakePool(t, 1)
	var fails atomic.Int32
	c.SetExecError(func(q string) error {
		if strings.HasPrefix(q, "UPDATE") && fails.Add(1) <= 2 {
			return errDeadlock
		}
		return nil
	})
	rec := &recorder{}
	p := fast(5)
	p.Observer = rec
	attempts := 0
	err := retry.Tx(context.Background(), db, nil, p, func(ctx context.Context, tx *sql.Tx) error {
		attempts++
		if _, err := tx.ExecContext(ctx, "INSERT INTO log VALUES (1)"); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE t SET v = v + 1")
		return err
	})
	if err != nil {
		t.Fatalf("Tx = %v", err)
	}
	if attempts != 3 || count(c, "BEGIN") != 3 || count(c, "ROLLBACK") != 2 || count(c, "COMMIT") != 1 {
		t.Fatalf("attempts %d; BEGIN %d ROLLBACK %d COMMIT %d; want 3, 3, 2, 1",
			attempts, count(c, "BEGIN"), count(c, "ROLLBACK"), count(c, "COMMIT"))
	}
	if rec.retries != 2 || !errors.Is(rec.retryErrs[0], errDeadlock) {
		t.Fatalf("observer %+v", rec)
	}
}

// Commit errors that prove nothing was committed are retried.
func TestTxCommitNotApplied(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"ErrBadConn: nothing sent", driver.ErrBadConn},
		{"1213 Galera certification failure", myErr(1213, "40001", "Deadlock: wsrep aborted transaction")},
		{"1290 read-only after failover", myErr(1290, "HY000", "The MariaDB server is running with the --read-only option so it cannot execute this statement")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, db := fakePool(t, 1)
			attempts := 0
			err := retry.Tx(context.Background(), db, nil, fast(5), func(ctx context.Context, tx *sql.Tx) error {
				attempts++
				if attempts == 1 {
					liveConn(t, c).FailNext(tc.err)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("Tx = %v", err)
			}
			if attempts != 2 || count(c, "COMMIT") != 2 {
				t.Fatalf("attempts %d, COMMIT %d; want 2 and 2", attempts, count(c, "COMMIT"))
			}
		})
	}
}

// A connection lost while fn runs, before COMMIT: the server rolls the
// transaction back, so Tx runs it again.
func TestTxConnectionLostBeforeCommit(t *testing.T) {
	c, db := fakePool(t, 1)
	attempts := 0
	err := retry.Tx(context.Background(), db, nil, fast(5), func(ctx context.Context, tx *sql.Tx) error {
		attempts++
		if attempts == 1 {
			liveConn(t, c).FailNext(mysql.ErrInvalidConn)
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO log VALUES (1)")
		return err
	})
	if err != nil || attempts != 2 || count(c, "COMMIT") != 1 {
		t.Fatalf("Tx = %v after %d attempts, %d commits; want nil, 2, 1", err, attempts, count(c, "COMMIT"))
	}
}

// A begin that fails with a transient error is retried.
func TestTxBeginTransient(t *testing.T) {
	c, db := fakePool(t, 1)
	liveConn(t, c).FailNext(myErr(1927, "70100", "Connection was killed"))
	attempts := 0
	err := retry.Tx(context.Background(), db, nil, fast(5), func(ctx context.Context, tx *sql.Tx) error {
		attempts++
		return nil
	})
	if err != nil || attempts != 1 || count(c, "BEGIN") != 2 {
		t.Fatalf("Tx = %v; fn ran %d times, BEGIN %d; want nil, 1, 2", err, attempts, count(c, "BEGIN"))
	}
}

// 1792 in a transaction Tx opened read-only is the caller's own mistake.
func TestTxReadOnly1792(t *testing.T) {
	readOnly := myErr(1792, "25006", "Cannot execute statement in a READ ONLY transaction")
	for _, tc := range []struct {
		opts *sql.TxOptions
		want int
	}{
		{&sql.TxOptions{ReadOnly: true}, 1},
		{nil, 3},
	} {
		c, db := fakePool(t, 1)
		c.SetExecError(func(q string) error {
			if strings.HasPrefix(q, "UPDATE") {
				return readOnly
			}
			return nil
		})
		attempts := 0
		err := retry.Tx(context.Background(), db, tc.opts, fast(3), func(ctx context.Context, tx *sql.Tx) error {
			attempts++
			_, err := tx.ExecContext(ctx, "UPDATE t SET v = 1")
			return err
		})
		if attempts != tc.want || !errors.Is(err, readOnly) {
			t.Fatalf("opts %+v: %d attempts (%v), want %d", tc.opts, attempts, err, tc.want)
		}
	}
}

func TestTxPanicRollsBack(t *testing.T) {
	c, db := fakePool(t, 1)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the panic of fn", r)
			}
		}()
		_ = retry.Tx(context.Background(), db, nil, fast(3), func(ctx context.Context, tx *sql.Tx) error {
			panic("boom")
		})
	}()
	if count(c, "BEGIN") != 1 || count(c, "ROLLBACK") != 1 || count(c, "COMMIT") != 0 {
		t.Fatalf("BEGIN %d ROLLBACK %d COMMIT %d; want 1, 1, 0", count(c, "BEGIN"), count(c, "ROLLBACK"), count(c, "COMMIT"))
	}
}

func TestTxCtxCancelledInFn(t *testing.T) {
	c, db := fakePool(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	attempts := 0
	err := retry.Tx(ctx, db, nil, fast(5), func(ctx context.Context, tx *sql.Tx) error {
		attempts++
		cancel()
		return ctx.Err()
	})
	if attempts != 1 || !errors.Is(err, context.Canceled) || count(c, "COMMIT") != 0 {
		t.Fatalf("Tx = %v after %d attempts", err, attempts)
	}
}

// fn that commits the transaction itself: Commit then says ErrTxDone, which
// is permanent.
func TestTxFnCommitted(t *testing.T) {
	_, db := fakePool(t, 1)
	attempts := 0
	err := retry.Tx(context.Background(), db, nil, fast(5), func(ctx context.Context, tx *sql.Tx) error {
		attempts++
		return tx.Commit()
	})
	if attempts != 1 || !errors.Is(err, sql.ErrTxDone) {
		t.Fatalf("Tx = %v after %d attempts", err, attempts)
	}
}
