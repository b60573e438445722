// Package sqlmockpool unit-tests code that uses sqlpool with go-sqlmock
// (github.com/DATA-DOG/go-sqlmock): it puts a pool of one connection in front of go-sqlmock and
// makes the statements the pool sends of its own explicit expectations, so that a test fails
// when the code under test makes the pool send one the test did not expect.
//
// The pool sends two kinds of statements of its own: the baseline query, once after it connects
// (New expects it, answered with Options.Baseline), and the release plan when a borrower leaves
// something behind (an open transaction, autocommit off, a changed setting or database): a
// ROLLBACK and the statements that reset what changed, sent when the connection comes back
// (eager: every reset happens at release, so one borrow's expectations are complete when it
// ends). A clean borrow sends nothing. Expect a release plan with ExpectRelease:
//
//	func TestTransfer(t *testing.T) {
//		mp := sqlmockpool.New(t, sqlmockpool.Options{})
//		mp.Mock.ExpectBegin()
//		mp.Mock.ExpectExec("UPDATE accounts SET balance = balance - ? WHERE id = ?").WithArgs(25, 7).
//			WillReturnResult(sqlmock.NewResult(0, 1))
//		mp.Mock.ExpectCommit()
//		if err := Transfer(ctx, mp.DB, 7, 25); err != nil {
//			t.Fatal(err)
//		}
//		if err := mp.ExpectationsWereMet(); err != nil {
//			t.Fatal(err)
//		}
//	}
//
// go-sqlmock rejects a statement it does not expect; the pool then closes the connection and
// go-sqlmock's own ExpectationsWereMet does not notice. Pool.ExpectationsWereMet does: it also
// reports every statement go-sqlmock rejected (the pool's or the code's), every release plan
// that failed and every connection the pool closed before Close, with the statement text to
// expect. New checks it again when the test ends.
//
// Expectations match statements by their exact text (sqlmock.QueryMatcherEqual) unless
// Options.QueryMatcher says otherwise. The module is separate from the library's so that the
// library's go.mod does not require go-sqlmock.
package sqlmockpool

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlpool/sqlpool/mysqldialect"
	"github.com/sqlpool/sqlpool/pool"
)

// Options configure Open and New. The zero value is a MariaDB session on database "app"
// (DefaultBaseline) with exact statement matching.
type Options struct {
	// Baseline is the session the mock connection reports to the pool's baseline query. Zero
	// value (nil): DefaultBaseline().
	Baseline *Baseline

	// Config configures the pool. MaxConns and MinIdleConns are always 1 (go-sqlmock has one
	// connection per mock); a nil Dialect is mysqldialect.Dialect, and the Dialect is made eager
	// (every reset at release, none deferred to a later borrow's statement); a zero Name is
	// "sqlmockpool"; a zero AliveBypassWindow is one hour,
	// so that a borrow sends no liveness probe (a Ping, which go-sqlmock does not see unless
	// told to with sqlmock.MonitorPingsOption); a nil Logger discards the pool's log lines.
	// Config.Trace is called as well as the package's own.
	Config pool.Config

	// QueryMatcher matches statements against expectations. Zero value (nil):
	// sqlmock.QueryMatcherEqual, the exact text.
	QueryMatcher sqlmock.QueryMatcher

	// ValueConverter converts the arguments of statements (sqlmock.ValueConverterOption). Zero
	// value (nil): driver.DefaultParameterConverter.
	ValueConverter driver.ValueConverter
}

// Pool is a pool of one connection over go-sqlmock.
type Pool struct {
	// Pool is the pool.
	Pool *pool.Pool
	// DB is Pool.OpenDB(): give it to the code under test.
	DB *sql.DB
	// Mock holds the expectations: the code under test's statements, and ExpectRelease's.
	Mock sqlmock.Sqlmock

	mockDB   *sql.DB
	baseline Baseline

	mu         sync.Mutex
	failures   []string
	allowed    int  // connection closes announced by ExpectDiscard
	discarded  bool // an announced close happened since the last ExpectationsWereMet
	planFailed bool // the last release plan failed: its close is not reported again
	everFailed bool // a failure was recorded: the mock connection may be closed already
	closed     bool
}

var seq atomic.Int64

// New returns a pool over go-sqlmock for the test, with the baseline query already expected and
// answered; it fails the test if the pool cannot be set up. When the test ends, the pool is
// closed and the test fails if ExpectationsWereMet reports anything.
func New(tb testing.TB, o Options) *Pool {
	tb.Helper()
	p, err := Open(o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := p.Close(); err != nil {
			tb.Error(err)
		}
	})
	return p
}

// Open is New without a test: close the pool with Close.
func Open(o Options) (*Pool, error) {
	b := DefaultBaseline()
	if o.Baseline != nil {
		b = *o.Baseline
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	dsn := fmt.Sprintf("sqlmockpool-%d", seq.Add(1))
	matcher := o.QueryMatcher
	if matcher == nil {
		matcher = sqlmock.QueryMatcherEqual
	}
	conv := o.ValueConverter
	if conv == nil {
		conv = driver.DefaultParameterConverter
	}
	mockDB, mock, err := sqlmock.NewWithDSN(dsn, sqlmock.QueryMatcherOption(matcher), sqlmock.ValueConverterOption(conv))
	if err != nil {
		return nil, fmt.Errorf("sqlmockpool: go-sqlmock: %w", err)
	}
	p := &Pool{Mock: mock, mockDB: mockDB, baseline: b}
	b.expect(mock)

	cfg := o.Config
	cfg.MaxConns, cfg.MinIdleConns = 1, 1
	if cfg.Name == "" {
		cfg.Name = "sqlmockpool"
	}
	if cfg.AliveBypassWindow == 0 {
		cfg.AliveBypassWindow = time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.Trace = p.trace(cfg.Trace)
	if cfg.Dialect == nil {
		cfg.Dialect = mysqldialect.Dialect
	}
	cfg.Dialect = eager{cfg.Dialect}
	p.Pool, err = pool.New(connector{mockDB.Driver(), dsn}, cfg)
	if err != nil {
		_ = mockDB.Close()
		return nil, fmt.Errorf("sqlmockpool: %w", err)
	}
	p.DB = p.Pool.OpenDB()
	return p, nil
}

// connector hands the pool go-sqlmock's connection for the mock's DSN.
type connector struct {
	drv driver.Driver
	dsn string
}

func (c connector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c connector) Driver() driver.Driver                        { return c.drv }

// eager is a Dialect whose sessions reset everything at release: a reset the dialect would
// defer to the first statement of a later borrow that could observe the value (MySQL's
// LAST_INSERT_ID()) happens at release instead, so that the expectations of one borrow do not
// spill into the next. Its methods are the wrapped Dialect's; optional interfaces such as
// pool.ServerCancel are not passed on (go-sqlmock has no server to cancel on).
type eager struct{ pool.Dialect }

// deferrer is a session tracker that can defer the LAST_INSERT_ID() reset (mysqldialect's).
type deferrer interface{ SetDeferInsertID(on bool) }

func (d eager) NewSession(ctx context.Context, dc driver.Conn) (pool.SessionTracker, error) {
	st, err := d.Dialect.NewSession(ctx, dc)
	if dt, ok := st.(deferrer); ok && err == nil {
		dt.SetDeferInsertID(false)
	}
	return st, err
}

// ExpectRelease expects the release plan the pool sends when the current borrow ends: each
// statement in order, as an Exec answered with no rows affected. A borrower that leaves a
// transaction open makes the plan start with "ROLLBACK"; the resets follow, such as
// "SET autocommit=1" (docs/sessions.md lists them). The failure that an unexpected plan
// causes names the statement to expect.
func (p *Pool) ExpectRelease(statements ...string) {
	for _, s := range statements {
		p.Mock.ExpectExec(s).WillReturnResult(sqlmock.NewResult(0, 0))
	}
}

// ExpectDiscard announces that the pool will close its connection when the current borrow
// ends (the borrower left a state it cannot reset, or broke the connection) and open a new one:
// it expects the close and the new connection's baseline query, and the close is not a
// failure.
func (p *Pool) ExpectDiscard() {
	p.mu.Lock()
	p.allowed++
	p.mu.Unlock()
	p.Mock.ExpectClose()
	p.baseline.expect(p.Mock)
}

// ExpectationsWereMet returns an error when an expectation was not met (go-sqlmock's
// ExpectationsWereMet), go-sqlmock rejected a statement, a release plan failed, or the pool
// closed a connection that ExpectDiscard did not announce; nil otherwise. The error lists every
// failure since the last call; each is reported once.
func (p *Pool) ExpectationsWereMet() error {
	p.mu.Lock()
	refill := p.discarded && !p.closed
	p.discarded = false
	p.mu.Unlock()
	if refill {
		// The pool opens the connection that replaces a discarded one in the background: a
		// clean borrow (which sends nothing) waits for it and its baseline query.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if c, err := p.Pool.Connect(ctx); err != nil {
			p.fail("the pool could not open the connection that replaces the discarded one: %v", err)
		} else {
			_ = c.Close()
		}
		cancel()
	}
	var errs []error
	if err := p.Mock.ExpectationsWereMet(); err != nil {
		errs = append(errs, err)
	}
	p.mu.Lock()
	for _, f := range p.failures {
		errs = append(errs, errors.New(f))
		p.everFailed = true
	}
	p.failures = nil
	p.mu.Unlock()
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("sqlmockpool: %w", errors.Join(errs...))
}

// Close closes DB and the pool (expecting go-sqlmock's connection to close unless a failure
// was reported, which may have closed it already), then checks
// ExpectationsWereMet and returns its error. A second call returns nil.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	expectClose := !p.everFailed && len(p.failures) == 0
	p.mu.Unlock()
	if expectClose && p.Pool.Stats().Total > 0 {
		p.Mock.ExpectClose()
	}
	var errs []error
	if err := p.DB.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := p.Pool.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := p.ExpectationsWereMet(); err != nil {
		errs = append(errs, err)
	}
	_ = p.mockDB.Close()
	return errors.Join(errs...)
}

func (p *Pool) fail(format string, args ...any) {
	p.mu.Lock()
	p.failures = append(p.failures, fmt.Sprintf(format, args...))
	p.mu.Unlock()
}

// rejected reports whether err is go-sqlmock's answer to a call it did not expect (as opposed to
// an error an expectation returns on purpose).
func rejected(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "was not expected") || strings.Contains(s, "could not match") ||
		strings.Contains(s, "does not match")
}

// trace returns the pool's Trace: user's, then the package's checks.
func (p *Pool) trace(user *pool.Trace) *pool.Trace {
	var u pool.Trace
	if user != nil {
		u = *user
	}
	t := u
	t.StatementDone = func(ctx context.Context, name, query string, d time.Duration, err error) {
		if u.StatementDone != nil {
			u.StatementDone(ctx, name, query, d, err)
		}
		if rejected(err) {
			p.fail("the code under test sent %q, which go-sqlmock did not expect: %v", query, err)
		}
	}
	t.ReleasePlanEnded = func(name string, took time.Duration, statements int, rollback bool, err error) {
		if u.ReleasePlanEnded != nil {
			u.ReleasePlanEnded(name, took, statements, rollback, err)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.planFailed = false
		switch {
		case err == nil:
		case statements == 0 && p.allowed > 0:
			// A discard ExpectDiscard announced; Closed counts it.
		case statements == 0:
			p.planFailed = true
			p.failures = append(p.failures, fmt.Sprintf("the pool discarded its connection: %v; announce that with ExpectDiscard", err))
		default:
			p.planFailed = true
			p.failures = append(p.failures, fmt.Sprintf("the pool's release plan failed; expect its statements with ExpectRelease: %v", err))
		}
	}
	t.Closed = func(name string, reason pool.CloseReason) {
		if u.Closed != nil {
			u.Closed(name, reason)
		}
		if reason == pool.ClosePoolClosed {
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		switch {
		case p.allowed > 0:
			p.allowed--
			p.discarded = true
		case reason == pool.CloseResetFailed && p.planFailed:
			// Reported as the plan's failure.
		default:
			p.failures = append(p.failures, fmt.Sprintf("the pool closed its connection (%s): a statement failed in a way that breaks the connection, or the borrower left a state the pool cannot reset (announce that with ExpectDiscard)", reason))
		}
		p.planFailed = false
	}
	return &t
}
