package retry_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/internal/testutil"
	"github.com/sqlpool/sqlpool/mysqldialect"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/retry"
)

// deadlockOnFirstUpdates makes the first n UPDATEs on c's connections fail with 1213.
func deadlockOnFirstUpdates(c *fakedb.Connector, n int32) {
	var fails atomic.Int32
	c.SetExecError(func(q string) error {
		if strings.HasPrefix(q, "UPDATE") && fails.Add(1) <= n {
			return errDeadlock
		}
		return nil
	})
}

// Tx begins on a *sql.Conn as on a *sql.DB: a deadlock is rolled back and the transaction
// runs again on the same connection.
func TestTxOnConn(t *testing.T) {
	c, db := fakePool(t, 1)
	deadlockOnFirstUpdates(c, 1)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	attempts := 0
	err = retry.Tx(context.Background(), conn, nil, fast(3), func(ctx context.Context, tx *sql.Tx) error {
		attempts++
		_, err := tx.ExecContext(ctx, "UPDATE t SET v = v + 1")
		return err
	})
	if err != nil || attempts != 2 || count(c, "BEGIN") != 2 || count(c, "ROLLBACK") != 1 || count(c, "COMMIT") != 1 {
		t.Fatalf("Tx on a *sql.Conn = %v after %d attempts; BEGIN %d ROLLBACK %d COMMIT %d; want nil after 2, 2, 1, 1",
			err, attempts, count(c, "BEGIN"), count(c, "ROLLBACK"), count(c, "COMMIT"))
	}
	if n := len(c.Conns()); n != 1 {
		t.Fatalf("%d connections opened; want the one *sql.Conn", n)
	}
}

// beginner is an application's own interface with BeginTx, holding a *sql.DB.
type beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// appTx is an application's own transaction type, as TxWith takes it: a *sql.Tx that counts
// its statements.
type appTx struct {
	*sql.Tx
	stmts *int
}

func (t appTx) exec(ctx context.Context, q string) error {
	*t.stmts++
	_, err := t.ExecContext(ctx, q)
	return err
}

// TxWith runs a transaction of the caller's own type: retried on a deadlock, committed once.
func TestTxWith(t *testing.T) {
	c, db := fakePool(t, 1)
	deadlockOnFirstUpdates(c, 2)
	var b beginner = db
	stmts := 0
	begin := func(ctx context.Context, opts *sql.TxOptions) (appTx, error) {
		tx, err := b.BeginTx(ctx, opts)
		return appTx{Tx: tx, stmts: &stmts}, err
	}
	rec := &recorder{}
	p := fast(5)
	p.Observer = rec
	attempts := 0
	err := retry.TxWith(context.Background(), begin, nil, p, func(ctx context.Context, tx appTx) error {
		attempts++
		if err := tx.exec(ctx, "INSERT INTO log VALUES (1)"); err != nil {
			return err
		}
		return tx.exec(ctx, "UPDATE t SET v = v + 1")
	})
	if err != nil || attempts != 3 || stmts != 6 || count(c, "ROLLBACK") != 2 || count(c, "COMMIT") != 1 {
		t.Fatalf("TxWith = %v after %d attempts, %d statements; ROLLBACK %d COMMIT %d; want nil after 3, 6, 2, 1",
			err, attempts, stmts, count(c, "ROLLBACK"), count(c, "COMMIT"))
	}
	if rec.retries != 2 || rec.done != 1 || rec.lastDoneErr != nil {
		t.Fatalf("observer %+v", rec)
	}
}

// TxWith reads a failed COMMIT as Tx does: a lost connection is ambiguous and not retried.
func TestTxWithAmbiguousCommit(t *testing.T) {
	c, db := fakePool(t, 1)
	attempts := 0
	err := retry.TxWith(context.Background(), db.BeginTx, nil, fast(5), func(ctx context.Context, tx *sql.Tx) error {
		attempts++
		liveConn(t, c).FailNext(mysql.ErrInvalidConn) // the next call on the connection is COMMIT
		return nil
	})
	var re *retry.Error
	if !errors.Is(err, retry.ErrAmbiguousCommit) || !errors.As(err, &re) || re.Op != retry.OpTx || attempts != 1 {
		t.Fatalf("TxWith = %v after %d attempts; want ErrAmbiguousCommit after 1", err, attempts)
	}
}

// fakeTx is a Committer whose Commit and Rollback are counted and whose Commit fails as told.
type fakeTx struct {
	commits, rollbacks *int
	commitErr          error
}

func (f fakeTx) Commit() error   { *f.commits++; return f.commitErr }
func (f fakeTx) Rollback() error { *f.rollbacks++; return nil }

// A begin that fails transiently is retried; fn's panic rolls back and goes on.
func TestTxWithBeginAndPanic(t *testing.T) {
	var commits, rollbacks, begins int
	begin := func(ctx context.Context, _ *sql.TxOptions) (fakeTx, error) {
		begins++
		if begins == 1 {
			return fakeTx{}, driver.ErrBadConn
		}
		return fakeTx{commits: &commits, rollbacks: &rollbacks}, nil
	}
	err := retry.TxWith(context.Background(), begin, nil, fast(3), func(context.Context, fakeTx) error { return nil })
	if err != nil || begins != 2 || commits != 1 || rollbacks != 0 {
		t.Fatalf("TxWith = %v; begins %d commits %d rollbacks %d; want nil, 2, 1, 0", err, begins, commits, rollbacks)
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want fn's panic", r)
			}
		}()
		_ = retry.TxWith(context.Background(), begin, nil, fast(3), func(context.Context, fakeTx) error { panic("boom") })
	}()
	if rollbacks != 1 || commits != 1 {
		t.Fatalf("after fn panicked: commits %d rollbacks %d; want 1, 1", commits, rollbacks)
	}
}

// A nil starter or fn is an error that says what to pass, not a panic.
func TestTxNilStarter(t *testing.T) {
	var nilDB *sql.DB
	fn := func(context.Context, *sql.Tx) error { return nil }
	rec := &recorder{}
	p := fast(3)
	p.Observer = rec
	for name, err := range map[string]error{
		"nil Beginner": retry.Tx(context.Background(), nil, nil, p, fn),
		"nil *sql.DB":  retry.Tx(context.Background(), nilDB, nil, p, fn),
		"nil begin":    retry.TxWith[*sql.Tx](context.Background(), nil, nil, p, fn),
	} {
		var re *retry.Error
		if !errors.As(err, &re) || re.Attempts != 0 || re.Class != retry.Permanent || !strings.Contains(err.Error(), "pass a *sql.DB") {
			t.Errorf("%s: %v; want a Permanent *retry.Error that says what to pass", name, err)
		}
	}
	_, db := fakePool(t, 1)
	if err := retry.Tx(context.Background(), db, nil, p, nil); err == nil || !strings.Contains(err.Error(), "fn is nil") {
		t.Errorf("nil fn: %v", err)
	}
	if rec.done != 4 || rec.attempts != 0 {
		t.Errorf("observer %+v; want 4 calls done, no attempt", rec)
	}
}

// groupReplication is MySQL's dialect taught one more transient code: 3101, a transaction
// rolled back at COMMIT by a Group Replication certification conflict.
type groupReplication struct{ pool.Dialect }

func (d groupReplication) Classify(err error, s pool.ErrorContext) pool.ErrorClass {
	if me, ok := errors.AsType[*mysql.MySQLError](err); ok && me.Number == 3101 {
		return pool.ErrorClass{Transient: true}
	}
	return d.Dialect.Classify(err, s)
}

// Policy.Dialect decides the errors the package's rules do not name, and only those.
func TestPolicyDialect(t *testing.T) {
	gr := retry.Policy{Dialect: groupReplication{mysqldialect.Dialect}}
	my := retry.Policy{Dialect: mysqldialect.Dialect}
	rolledBack := myErr(3101, "HY000", "Plugin instructed the server to rollback the current transaction.")
	for _, tc := range []struct {
		name         string
		err          error
		bare, mysql  retry.Class
		groupRepl    retry.Class
		dialectAgree bool
	}{
		{"3101", rolledBack, retry.Permanent, retry.Permanent, retry.Transient, false},
		{"1213", errDeadlock, retry.Transient, retry.Transient, retry.Transient, true},
		{"1180", errDuringCommit, retry.Ambiguous, retry.Ambiguous, retry.Ambiguous, true},
		{"1062", myErr(1062, "23000", "Duplicate entry '1' for key 'PRIMARY'"), retry.Permanent, retry.Permanent, retry.Permanent, true},
		{"1045 login refused", myErr(1045, "28000", "Access denied for user 'app'@'10.0.0.1' (using password: YES)"), retry.Permanent, retry.Permanent, retry.Permanent, true},
		{"1153 fatal to the connection, fails again", myErr(1153, "08S01", "Got a packet bigger than 'max_allowed_packet' bytes"), retry.Permanent, retry.Permanent, retry.Permanent, true},
		{"ctx", context.DeadlineExceeded, retry.Permanent, retry.Permanent, retry.Permanent, true},
		{"nil", nil, retry.Permanent, retry.Permanent, retry.Permanent, true},
	} {
		if got := retry.Classify(tc.err); got != tc.bare {
			t.Errorf("%s: Classify = %v, want %v", tc.name, got, tc.bare)
		}
		if got := (retry.Policy{}).Classify(tc.err); got != tc.bare {
			t.Errorf("%s: Policy{}.Classify = %v, want %v", tc.name, got, tc.bare)
		}
		if got := my.Classify(tc.err); got != tc.mysql {
			t.Errorf("%s: with mysqldialect = %v, want %v", tc.name, got, tc.mysql)
		}
		if got := gr.Classify(tc.err); got != tc.groupRepl {
			t.Errorf("%s: with the Group Replication dialect = %v, want %v", tc.name, got, tc.groupRepl)
		}
	}

	// At COMMIT too: 3101 answering COMMIT means not committed, so Tx runs the transaction again.
	c, db := fakePool(t, 1)
	p := fast(3)
	p.Dialect = groupReplication{mysqldialect.Dialect}
	attempts := 0
	err := retry.Tx(context.Background(), db, nil, p, func(ctx context.Context, tx *sql.Tx) error {
		attempts++
		if attempts == 1 {
			liveConn(t, c).FailNext(rolledBack)
		}
		return nil
	})
	if err != nil || attempts != 2 || count(c, "COMMIT") != 2 {
		t.Fatalf("Tx with 3101 at COMMIT = %v after %d attempts, %d COMMITs; want nil after 2, 2", err, attempts, count(c, "COMMIT"))
	}
	p.Dialect = nil
	attempts = 0
	err = retry.Tx(context.Background(), db, nil, p, func(ctx context.Context, tx *sql.Tx) error {
		attempts++
		liveConn(t, c).FailNext(rolledBack)
		return nil
	})
	if !errors.Is(err, rolledBack) || attempts != 1 {
		t.Fatalf("Tx with 3101 at COMMIT, no dialect = %v after %d attempts; want it after 1", err, attempts)
	}
}

// An acquire timeout of package pool is classified by the connection error it wraps: Permanent
// when the pool was merely busy (it had recovered from an earlier failed dial), Transient while
// its connections fail.
func TestClassifyPoolAcquireTimeout(t *testing.T) {
	t.Run("busy after recovery", func(t *testing.T) {
		fc := fakedb.New()
		fc.SetDialError(errors.New("dial tcp 10.0.0.1:3306: connect: connection refused"))
		p, err := pool.New(fc, pool.Config{MaxConns: 1, InitializationFailTimeout: -1,
			AcquireTimeout: 300 * time.Millisecond, Logger: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		testutil.Eventually(t, 10*time.Second, "a failed dial recorded", func() bool { return p.Stats().LastError != nil })
		fc.SetDialError(nil)
		held, err := p.Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
		_, err = p.Connect(context.Background())
		var te *pool.AcquireTimeoutError
		if !errors.As(err, &te) {
			t.Fatalf("Connect = %v; want an *AcquireTimeoutError", err)
		}
		if c := retry.Classify(err); c != retry.Permanent {
			t.Errorf("retry.Classify(busy timeout %v) = %v; want Permanent", err, c)
		}
	})
	t.Run("failing", func(t *testing.T) {
		fc := fakedb.New()
		p, err := pool.New(fc, pool.Config{MaxConns: 1, AliveBypassWindow: -1,
			AcquireTimeout: 300 * time.Millisecond, Logger: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		testutil.Eventually(t, 10*time.Second, "the pool filled", func() bool { return p.Stats().Idle == 1 })
		fc.SetPingError(driver.ErrBadConn)
		_, err = p.Connect(context.Background())
		var te *pool.AcquireTimeoutError
		if !errors.As(err, &te) || !te.Failing {
			t.Fatalf("Connect = %v; want a failing-pool timeout", err)
		}
		if c := retry.Classify(err); c != retry.Transient {
			t.Errorf("retry.Classify(failing timeout %v) = %v; want Transient", err, c)
		}
		fc.SetPingError(nil)
	})
}

// Tx over a pool's *sql.DB reads errors with the pool's dialect when Policy.Dialect is nil;
// over a *sql.Conn it has no pool to ask, and TxWith takes only Policy.Dialect.
func TestTxFindsThePoolsDialect(t *testing.T) {
	c := fakedb.New()
	d := groupReplication{mysqldialect.Dialect}
	p, err := pool.New(c, pool.Config{MaxConns: 1, Logger: quietLog, Dialect: d})
	if err != nil {
		t.Fatal(err)
	}
	db := p.OpenDB()
	defer func() {
		_ = db.Close()
		if err := p.Close(); err != nil {
			t.Errorf("pool Close: %v", err)
		}
	}()
	if got := p.Dialect(); got != pool.Dialect(d) {
		t.Fatalf("p.Dialect() = %v; want the Config.Dialect", got)
	}
	rolledBack := myErr(3101, "HY000", "Plugin instructed the server to rollback the current transaction.")
	failCommit := func(attempts *int) func(context.Context, *sql.Tx) error {
		return func(ctx context.Context, tx *sql.Tx) error {
			*attempts++
			if *attempts == 1 {
				liveConn(t, c).FailNext(rolledBack) // the next call is COMMIT
			}
			return nil
		}
	}
	attempts := 0
	if err := retry.Tx(context.Background(), db, nil, fast(3), failCommit(&attempts)); err != nil || attempts != 2 {
		t.Fatalf("Tx over the pool's *sql.DB = %v after %d attempts; want nil after 2 (3101 transient by the pool's dialect)", err, attempts)
	}

	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	attempts = 0
	if err := retry.Tx(context.Background(), conn, nil, fast(3), failCommit(&attempts)); !errors.Is(err, rolledBack) || attempts != 1 {
		t.Fatalf("Tx over a *sql.Conn = %v after %d attempts; want 3101 after 1 (no dialect)", err, attempts)
	}
	pol := fast(3)
	pol.Dialect = p.Dialect()
	attempts = 0
	if err := retry.Tx(context.Background(), conn, nil, pol, failCommit(&attempts)); err != nil || attempts != 2 {
		t.Fatalf("Tx over a *sql.Conn with Policy.Dialect = p.Dialect(): %v after %d attempts; want nil after 2", err, attempts)
	}
}
