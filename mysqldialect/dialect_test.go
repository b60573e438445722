package mysqldialect_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/mysqldialect"
	"github.com/sqlpool/sqlpool/pool"
)

// Classify: MySQL's transient errors and the prepared-statement limit keep the connection; a
// broken connection does not.
func TestClassify(t *testing.T) {
	d := mysqldialect.Dialect
	for _, tc := range []struct {
		name string
		err  error
		want pool.ErrorClass
	}{
		{"deadlock", &mysql.MySQLError{Number: 1213, Message: "Deadlock found"}, pool.ErrorClass{Transient: true}},
		{"lock wait timeout", &mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"}, pool.ErrorClass{Transient: true}},
		{"statement limit", &mysql.MySQLError{Number: 1461, Message: "Can't create more than max_prepared_stmt_count statements"}, pool.ErrorClass{StatementLimit: true}},
		{"duplicate key", &mysql.MySQLError{Number: 1062, Message: "Duplicate entry"}, pool.ErrorClass{}},
		{"access denied", &mysql.MySQLError{Number: 1045, Message: "Access denied for user"}, pool.ErrorClass{Login: true}},
		{"access denied, wrapped", fmt.Errorf("credentials: %w", &mysql.MySQLError{Number: 1045}), pool.ErrorClass{Login: true}},
		{"no grant for the database", &mysql.MySQLError{Number: 1044}, pool.ErrorClass{Login: true}},
		{"unknown database", &mysql.MySQLError{Number: 1049}, pool.ErrorClass{Login: true}},
		{"host blocked", &mysql.MySQLError{Number: 1129}, pool.ErrorClass{Login: true}},
		{"host not allowed", &mysql.MySQLError{Number: 1130}, pool.ErrorClass{Login: true}},
		{"access denied, no password", &mysql.MySQLError{Number: 1698}, pool.ErrorClass{Login: true}},
		{"password expired", &mysql.MySQLError{Number: 1862}, pool.ErrorClass{Login: true}},
		{"account locked", &mysql.MySQLError{Number: 4151}, pool.ErrorClass{Login: true}},
		{"too many connections", &mysql.MySQLError{Number: 1040}, pool.ErrorClass{}},
	} {
		if got := d.Classify(tc.err, pool.ErrorContext{}); got != tc.want {
			t.Errorf("%s: Classify = %+v; want %+v", tc.name, got, tc.want)
		}
	}
	if c := d.Classify(driver.ErrBadConn, pool.ErrorContext{}); !c.Fatal || c.Reason == "" {
		t.Errorf("Classify(driver.ErrBadConn) = %+v; want fatal with a reason", c)
	}
}

type fakeTx struct {
	err       error
	committed bool
}

func (t *fakeTx) Commit() error   { t.committed = true; return t.err }
func (t *fakeTx) Rollback() error { return nil }

// Commit: without a context that can end, and for a transaction that is not go-sql-driver's,
// the transaction's own Commit answers; its error is wrapped as a CommitUnknownError only when
// the context ended.
func TestCommit(t *testing.T) {
	d := mysqldialect.Dialect
	tx := &fakeTx{err: io.ErrUnexpectedEOF}
	if err := d.Commit(context.Background(), nil, tx); !tx.committed || err != io.ErrUnexpectedEOF {
		t.Fatalf("Commit without a deadline = %v (committed %v); want the Tx's own error", err, tx.committed)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tx = &fakeTx{}
	if err := d.Commit(ctx, nil, tx); err != nil || !tx.committed {
		t.Fatalf("Commit of another driver's Tx = %v (committed %v)", err, tx.committed)
	}
	cancel()
	tx = &fakeTx{err: context.Canceled}
	err := d.Commit(ctx, nil, tx)
	var cu *pool.CommitUnknownError
	if !errors.As(err, &cu) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit after its context ended = %v; want a CommitUnknownError wrapping the Tx's error", err)
	}
}

// NewSession records the baseline: a clean session, a plan for what a borrower changed; with
// server-side cancel, the fake server (which answers the baseline query only) gives no session
// id and the plain baseline instead.
func TestNewSession(t *testing.T) {
	fc := fakedb.New()
	dc, err := fc.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	st, err := mysqldialect.Dialect.NewSession(context.Background(), dc)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Clean() {
		t.Fatal("a new session is not clean")
	}
	st.Statement("SET autocommit=0")
	if st.Clean() {
		t.Fatal("SET autocommit=0 left the session clean")
	}
	if p := st.Plan(); p.Discard || len(p.Statements) == 0 {
		t.Fatalf("plan after SET autocommit=0 = %+v; want statements", p)
	}
	if c := st.Caps(); c.Alive != nil || c.SkipDriverReset || c.IsValid != nil || c.CacheFirst != nil {
		t.Fatalf("Caps = %+v; want the zero value", st.Caps())
	}
	sc, ok := mysqldialect.Dialect.(pool.ServerCancel)
	if !ok {
		t.Fatal("MySQL's dialect is not a pool.ServerCancel")
	}
	st, id, err := sc.NewCancellableSession(context.Background(), dc)
	if err != nil || st == nil || id != 0 {
		t.Fatalf("NewCancellableSession on the fake server = %v, %d, %v; want a tracker, id 0", st, id, err)
	}
}

// Importing the package registers it for go-sql-driver's connector and every connector no
// other dialect is registered for.
func TestRegistered(t *testing.T) {
	cfg := mysql.NewConfig()
	cfg.Addr = "127.0.0.1:1"
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]driver.Connector{"go-sql-driver": c, "fake": fakedb.New()} {
		p, err := pool.New(c, pool.Config{InitializationFailTimeout: -1, MinIdleConns: -1})
		if err != nil {
			t.Fatalf("%s: New = %v", name, err)
		}
		p.Close()
	}
}
