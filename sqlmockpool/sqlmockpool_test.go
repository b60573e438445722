package sqlmockpool_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlpool/sqlpool/sqlmockpool"
)

// transfer is code under test: it knows nothing of the pool or of go-sqlmock.
func transfer(ctx context.Context, db *sql.DB, from, to int64, amount int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - ? WHERE id = ?", amount, from); err != nil {
		return fmt.Errorf("debit %d: %w", from, err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance + ? WHERE id = ?", amount, to); err != nil {
		return fmt.Errorf("credit %d: %w", to, err)
	}
	return tx.Commit()
}

// leaveAutocommitOff is code under test that forgets to turn autocommit back on.
func leaveAutocommitOff(ctx context.Context, db *sql.DB) error {
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "SET autocommit = 0"); err != nil {
		return err
	}
	_, err = c.ExecContext(ctx, "DELETE FROM sessions")
	return err
}

func expectTransfer(mock sqlmock.Sqlmock, from, to int64, amount int) {
	mock.ExpectBegin()
	mock.ExpectExec("UPDATE accounts SET balance = balance - ? WHERE id = ?").WithArgs(amount, from).WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectExec("UPDATE accounts SET balance = balance + ? WHERE id = ?").WithArgs(amount, to).WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectCommit()
}

// TestCleanBorrowSendsNothing: a transaction that commits leaves nothing behind; the pool sends
// nothing of its own and the expectations are met.
func TestCleanBorrowSendsNothing(t *testing.T) {
	mp := sqlmockpool.New(t, sqlmockpool.Options{})
	expectTransfer(mp.Mock, 1, 2, 10)
	if err := transfer(context.Background(), mp.DB, 1, 2, 10); err != nil {
		t.Fatal(err)
	}
	if err := mp.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
}

// TestUnexpectedReleaseStatementFails: code that leaves autocommit off makes the pool send
// "ROLLBACK" and "SET autocommit=1" at release. Without ExpectRelease, go-sqlmock refuses it and its own
// ExpectationsWereMet still passes (the pool discards the connection quietly); the package's
// reports it, naming the statement.
func TestUnexpectedReleaseStatementFails(t *testing.T) {
	mp, err := sqlmockpool.Open(sqlmockpool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mp.Mock.ExpectExec("SET autocommit = 0").WillReturnResult(sqlmock.NewResult(0, 0))
	mp.Mock.ExpectExec("DELETE FROM sessions").WillReturnResult(sqlmock.NewResult(0, 3))
	if err := leaveAutocommitOff(context.Background(), mp.DB); err != nil {
		t.Fatal(err)
	}
	if err := mp.Mock.ExpectationsWereMet(); err != nil {
		t.Fatalf("go-sqlmock's own check: %v (it passes: that is why this package exists)", err)
	}
	err = mp.ExpectationsWereMet()
	if err == nil || !strings.Contains(err.Error(), `failed at "ROLLBACK"`) || !strings.Contains(err.Error(), "ExpectRelease") {
		t.Fatalf("ExpectationsWereMet = %v; want the release plan's unexpected ROLLBACK", err)
	}
	t.Logf("reported: %v", err)
	if err := mp.Close(); err != nil {
		t.Errorf("Close after the failure was reported: %v", err)
	}
}

// TestExpectRelease: with the release plan expected, the same code passes.
func TestExpectRelease(t *testing.T) {
	mp := sqlmockpool.New(t, sqlmockpool.Options{})
	mp.Mock.ExpectExec("SET autocommit = 0").WillReturnResult(sqlmock.NewResult(0, 0))
	mp.Mock.ExpectExec("DELETE FROM sessions").WillReturnResult(sqlmock.NewResult(0, 3))
	mp.ExpectRelease("ROLLBACK", "SET autocommit=1")
	if err := leaveAutocommitOff(context.Background(), mp.DB); err != nil {
		t.Fatal(err)
	}
	if err := mp.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
	// The connection is still the pool's: the next borrow works without a new baseline.
	expectTransfer(mp.Mock, 3, 4, 5)
	if err := transfer(context.Background(), mp.DB, 3, 4, 5); err != nil {
		t.Fatal(err)
	}
	if err := mp.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
}

// TestEagerLastInsertIDReset: an INSERT that generates an AUTO_INCREMENT id makes the pool reset
// LAST_INSERT_ID() at release (eager mode), inside the borrow that caused it, so the next
// borrow's expectations do not depend on it.
func TestEagerLastInsertIDReset(t *testing.T) {
	mp := sqlmockpool.New(t, sqlmockpool.Options{})
	ctx := context.Background()
	mp.Mock.ExpectExec("INSERT INTO orders (item) VALUES (?)").WithArgs("book").WillReturnResult(sqlmock.NewResult(41, 1))
	mp.ExpectRelease("SET last_insert_id=0")
	if _, err := mp.DB.ExecContext(ctx, "INSERT INTO orders (item) VALUES (?)", "book"); err != nil {
		t.Fatal(err)
	}
	if err := mp.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
}

// TestUnexpectedStatementOfTheCodeFails: a statement go-sqlmock refuses is reported even when
// the code under test swallows the error.
func TestUnexpectedStatementOfTheCodeFails(t *testing.T) {
	mp, err := sqlmockpool.Open(sqlmockpool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Close()
	_, _ = mp.DB.ExecContext(context.Background(), "DELETE FROM audit") // error ignored by the code
	err = mp.ExpectationsWereMet()
	if err == nil || !strings.Contains(err.Error(), "DELETE FROM audit") {
		t.Fatalf("ExpectationsWereMet = %v; want the unexpected DELETE FROM audit", err)
	}
}

// TestExpectDiscard: a borrower that changes a variable the pool does not restore makes it
// discard the connection; announced with ExpectDiscard, that is no failure, and the next borrow
// gets a new connection with a new baseline.
func TestExpectDiscard(t *testing.T) {
	mp := sqlmockpool.New(t, sqlmockpool.Options{})
	ctx := context.Background()
	mp.Mock.ExpectExec("SET SESSION optimizer_switch = 'index_merge=off'").WillReturnResult(sqlmock.NewResult(0, 0))
	mp.ExpectDiscard()
	if _, err := mp.DB.ExecContext(ctx, "SET SESSION optimizer_switch = 'index_merge=off'"); err != nil {
		t.Fatal(err)
	}
	if err := mp.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
	expectTransfer(mp.Mock, 1, 2, 3)
	if err := transfer(ctx, mp.DB, 1, 2, 3); err != nil {
		t.Fatal(err)
	}
	if err := mp.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
}

// TestBaselineVariables: a restored variable's reset uses the baseline's value.
func TestBaselineVariables(t *testing.T) {
	b := sqlmockpool.DefaultBaseline()
	b.Variables = map[string]string{"time_zone": "+00:00"}
	mp := sqlmockpool.New(t, sqlmockpool.Options{Baseline: &b})
	mp.Mock.ExpectExec("SET time_zone = 'Europe/Paris'").WillReturnResult(sqlmock.NewResult(0, 0))
	mp.ExpectRelease("SET time_zone='+00:00'")
	if _, err := mp.DB.ExecContext(context.Background(), "SET time_zone = 'Europe/Paris'"); err != nil {
		t.Fatal(err)
	}
	if err := mp.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}

	b.Variables = map[string]string{"no_such_variable": "1"}
	if _, err := sqlmockpool.Open(sqlmockpool.Options{Baseline: &b}); err == nil || !strings.Contains(err.Error(), "no_such_variable") {
		t.Fatalf("Open with an unknown baseline variable = %v; want an error naming it", err)
	}
}

// recordingTB is a testing.TB that records what New's cleanup reports.
type recordingTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
	errs     []string
}

func (r *recordingTB) Helper()          {}
func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) Error(args ...any) {
	r.mu.Lock()
	r.errs = append(r.errs, fmt.Sprint(args...))
	r.mu.Unlock()
}
func (r *recordingTB) Fatal(args ...any)            { r.Error(args...); panic("Fatal") }
func (r *recordingTB) Errorf(f string, args ...any) { r.Error(fmt.Sprintf(f, args...)) }
func (r *recordingTB) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// TestNewFailsTheTest: a test written as the package documentation says, which never calls
// ExpectationsWereMet itself, fails at its end when the pool sent a statement it did not expect.
func TestNewFailsTheTest(t *testing.T) {
	tb := &recordingTB{TB: t}
	mp := sqlmockpool.New(tb, sqlmockpool.Options{})
	mp.Mock.ExpectExec("SET autocommit = 0").WillReturnResult(sqlmock.NewResult(0, 0))
	mp.Mock.ExpectExec("DELETE FROM sessions").WillReturnResult(sqlmock.NewResult(0, 3))
	if err := leaveAutocommitOff(context.Background(), mp.DB); err != nil {
		t.Fatal(err)
	}
	tb.end()
	if len(tb.errs) != 1 || !strings.Contains(tb.errs[0], `failed at "ROLLBACK"`) {
		t.Fatalf("the test's end reported %q; want the one unexpected release plan", tb.errs)
	}

	// And a correct test ends clean.
	tb = &recordingTB{TB: t}
	mp = sqlmockpool.New(tb, sqlmockpool.Options{})
	expectTransfer(mp.Mock, 1, 2, 10)
	if err := transfer(context.Background(), mp.DB, 1, 2, 10); err != nil {
		t.Fatal(err)
	}
	tb.end()
	if len(tb.errs) != 0 {
		t.Fatalf("a correct test's end reported %q", tb.errs)
	}
}

// TestFailedExpectationIsNotAFailure: an expectation that returns an error on purpose (the code
// under test's error path) is not reported.
func TestFailedExpectationIsNotAFailure(t *testing.T) {
	mp := sqlmockpool.New(t, sqlmockpool.Options{})
	mp.Mock.ExpectBegin()
	mp.Mock.ExpectExec("UPDATE accounts SET balance = balance - ? WHERE id = ?").WithArgs(10, 1).WillReturnResult(sqlmock.NewResult(0, 1))
	mp.Mock.ExpectExec("UPDATE accounts SET balance = balance + ? WHERE id = ?").WithArgs(10, 3).WillReturnError(errors.New("no such account"))
	mp.Mock.ExpectRollback()
	if err := transfer(context.Background(), mp.DB, 1, 3, 10); err == nil {
		t.Fatal("the failing transfer succeeded")
	}
	if err := mp.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
}
