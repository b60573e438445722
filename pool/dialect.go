package pool

import (
	"context"
	"database/sql/driver"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
)

// Dialect is one database product's knowledge that the pool needs, so that the pool itself
// imports no driver: what an error means for the connection that returned it, how to follow
// and undo the session state a borrower leaves behind, and how to ask a connection whether it
// is alive. The pool calls a Dialect from many goroutines at once; a SessionTracker it returns
// is used by one goroutine at a time.
//
// MySQL/MariaDB's dialect is built in ([MySQL]); PostgreSQL's is in package
// github.com/sqlpool/sqlpool/pgdialect, which registers itself ([RegisterDialect]) for the
// connectors of pgx's stdlib and lib/pq when it is imported.
//
// A dialect that can cancel a running statement on the server may implement the pool's
// server-side cancel interface as well; the pool asserts it on the Dialect.
type Dialect interface {
	// Name is a short lower-case name for logs and errors, such as "mysql" or "postgres".
	Name() string

	// Classify decides what err, returned by a driver call on a connection, means for that
	// connection. It is called with every such error and must not block.
	Classify(err error, s ErrorContext) ErrorClass

	// NewSession returns the tracker of a freshly dialled connection, after
	// Hooks.AfterConnect ran. It may run queries on dc (a baseline); a non-nil error fails
	// the connection, which the pool then closes.
	NewSession(ctx context.Context, dc driver.Conn) (SessionTracker, error)

	// Probe checks that dc is alive within timeout and returns nil when it answered; see
	// validate.Probe for the contract every dialect keeps (ctx's error when ctx ended, a
	// non-nil result means dc must not be handed out).
	Probe(ctx context.Context, dc driver.Conn, timeout time.Duration) error
}

// ContextCommitter is implemented by a Dialect whose driver commits without watching a
// context (database/sql's driver.Tx.Commit takes none). For a transaction begun with a context
// that can end, the pool then commits through CommitContext with that context, so that a
// COMMIT waiting on a server that stopped answering ends at the caller's deadline instead of
// when the server answers; the commit's outcome is then unknown (retry.ErrAmbiguousCommit).
// CommitContext must leave t committed, or report an error, as t.Commit would.
type ContextCommitter interface {
	CommitContext(ctx context.Context, dc driver.Conn, t driver.Tx) error
}

// CommitOutcome is implemented by a Dialect whose driver can fail a COMMIT with an error that
// does not tell whether the COMMIT reached the server: lib/pq returns driver.ErrBadConn both when
// it sent nothing and when the connection was lost after COMMIT was sent (a FATAL answer, EOF),
// and database/sql and package retry read driver.ErrBadConn as "nothing was sent". The pool
// wraps an error of Commit for which CommitOutcomeUnknown reports true in a CommitUnknownError.
// dc is the driver connection the transaction ran on.
type CommitOutcome interface {
	CommitOutcomeUnknown(dc driver.Conn, err error) bool
}

// CommitUnknownError is the error of a COMMIT whose outcome is unknown: the transaction may or
// may not have been committed. The pool returns it when a COMMIT's context ended after the
// COMMIT was sent and before the server answered (ContextCommitter; Reason is empty), and when
// the dialect says the driver's error does not tell (CommitOutcome; Reason says so). It unwraps
// to the driver's error. Package retry classifies it as an ambiguous commit.
type CommitUnknownError struct {
	Err error
	// Reason says why the outcome is unknown; empty for a COMMIT whose context ended.
	Reason string
}

func (e *CommitUnknownError) Error() string {
	if e.Reason != "" {
		return "sqlpool: the outcome of COMMIT is unknown (" + e.Reason + "); the transaction may or may not have been committed: " + e.Err.Error()
	}
	return "sqlpool: COMMIT was sent but its context ended before the server answered; the transaction may or may not have been committed: " + e.Err.Error()
}

func (e *CommitUnknownError) Unwrap() error { return e.Err }

// AmbiguousCommit reports true: the outcome of the COMMIT is unknown.
func (e *CommitUnknownError) AmbiguousCommit() bool { return true }

// ErrorContext is what the pool knows about the connection an error came from.
type ErrorContext struct {
	// ReadOnlyTx reports that the borrower itself opened a read-only transaction, so that a
	// "read-only transaction" error is its own doing and not a failover.
	ReadOnlyTx bool
	// Conn is the driver connection the error came from; nil when there is none (a failed
	// connect).
	Conn driver.Conn
}

// ErrorClass is a Dialect's verdict on one error.
type ErrorClass struct {
	// Fatal reports that the connection must never be used again.
	Fatal bool
	// ServerGone reports that the whole server seems to have gone away or changed role; the
	// pool then probes, on their next borrow, the idle connections created before. It is
	// never true unless Fatal is.
	ServerGone bool
	// Transient reports an error that a retry of the whole transaction may not meet again
	// (a deadlock, a serialization failure, a lock timeout); the connection stays usable.
	Transient bool
	// StatementLimit reports that the server refused to prepare one more statement on the
	// connection; the pool then empties the connection's statement cache and prepares again.
	StatementLimit bool
	// StaleStatement reports that the server refused to run a statement the connection had
	// prepared earlier because it no longer fits (PostgreSQL: 0A000 "cached plan must not change
	// result type" after a table changed, 26000 "prepared statement does not exist"). A statement
	// the pool ran through its cache for a StatementCacheFirst tracker is then dropped from the
	// cache and run directly, as the driver would have run it.
	StaleStatement bool
	// Reason is a short static description of a fatal error; empty when Fatal is false.
	Reason string
}

// SessionTracker follows the session state of one connection from the statements a borrower
// sends through the pool, and plans the statements that reset it at release. The pool calls
// it from the goroutine that holds the connection only.
type SessionTracker interface {
	// Begin, Commit and Rollback report database/sql's transaction calls.
	Begin(opts driver.TxOptions)
	Commit()
	Rollback()
	// Statement reports a statement that ran (successfully or not: Failed follows a failure).
	Statement(query string)
	// Result reports the result of a successful Exec.
	Result(r driver.Result)
	// Failed reports that the last call reported (statement, Begin, Commit, Rollback)
	// returned an error: what it would have ended may still be in place.
	Failed()
	// Unknown reports that the borrower reached the driver connection directly
	// (sql.Conn.Raw): any state is possible.
	Unknown()
	// Clean reports that the session is as it was at connect: release then sends nothing.
	Clean() bool
	// ReadOnlyTx reports that the borrower opened a read-only transaction itself.
	ReadOnlyTx() bool
	// Plan returns what release must do; Done follows a plan that ran without error (or an
	// empty one) and marks the session clean.
	Plan() ReleasePlan
	Done()
	// BeforeClose returns the statements to run, errors ignored, on a healthy connection the
	// pool is about to close although its borrower may hold server-side locks (MySQL's
	// named locks outlive the socket briefly); nil for none.
	BeforeClose() []string
	// Scope names what the server resolves a statement's names against (MySQL: the current
	// database), for the pool's statement cache key; known is false while it cannot be told,
	// and the pool then does not cache.
	Scope() (scope string, known bool)
}

// LivenessChecker is implemented by a SessionTracker that can tell, without sending anything,
// that the server closed its connection (a non-blocking read of the socket finds EOF or an
// unsolicited message, such as PostgreSQL's FATAL after pg_terminate_backend). The pool asks
// it at every hand-out, after the driver's own ResetSession, and closes a connection it
// reports dead instead of handing it out.
type LivenessChecker interface {
	// Alive reports false when the connection is known dead; it must not block.
	Alive() bool
}

// livenessPeekWindow is how recently a connection must have been handed out before (its
// previous borrow began, and so its return came later still) for the pool to hand it out again
// without asking its LivenessChecker: a borrower was using it successfully that recently, and a
// dead server's farewell (PostgreSQL's FATAL before it closes a terminated backend) that
// arrived within that time is as likely to arrive just after the check. Asking costs a system
// call (~0.4 µs), as much as the rest of a borrow and return together, and a borrower that
// takes connections back to back would pay it on every cycle. The window is measured from the
// previous hand-out rather than the return so that a cycle reads the exact clock once, not
// twice. pgx's stdlib checks a connection idle for more than a second; database/sql never does.
const livenessPeekWindow = time.Millisecond

// DriverResetRedundant is implemented by a SessionTracker whose driver's ResetSession repeats
// only what the pool does itself at every hand-out: a test that the connection is closed (the
// tracker's LivenessChecker), a ping after some idle time (the pool's probe after
// AliveBypassWindow), a refusal of a connection left in a transaction (the release plan's
// ROLLBACK). While SkipDriverReset reports true, asked once per connection after NewSession, the
// pool does not call the driver's ResetSession. pgx's stdlib reads the wall clock there on every
// checkout; it is most of the cost of a borrow that sends nothing. A tracker that implements
// driver.Validator as well is asked at every return, as the driver's own IsValid would be, when
// the driver connection implements none (pgx's stdlib), so that a connection the driver closed
// while it was in use is not parked for the next borrower.
type DriverResetRedundant interface {
	SkipDriverReset() bool
}

// StatementCacheFirst is implemented by a SessionTracker whose driver parses every
// parameterized statement given to ExecContext or QueryContext anew, in a round trip of its own
// (lib/pq: Parse and Describe of an unnamed statement, then Bind and Execute). While CacheFirst
// reports true, the pool runs a parameterized statement it has seen before on the connection
// through its statement cache instead, which parses it once per connection and then binds and
// executes it in one round trip. A tracker reports false where a cached statement that the
// server rejects as stale (ErrorClass.StaleStatement) could not simply run again: inside a
// transaction, where the rejection aborts it.
type StatementCacheFirst interface {
	CacheFirst() bool
}

// sessionAlive is false when e's tracker knows, without traffic, that the connection is dead.
// A connection handed out less than livenessPeekWindow before is not asked.
func (p *Pool) sessionAlive(e *entry) bool {
	if e.live == nil {
		return true
	}
	now := max(p.nanotime(), 1)
	prev := e.handedOutExact
	e.handedOutExact = now
	if prev != 0 && now-prev < int64(livenessPeekWindow) {
		return true
	}
	return e.live.Alive()
}

// adoptTracker records what e's tracker can do, once, after the session was initialised: its
// LivenessChecker, and whether the driver's ResetSession is left out (DriverResetRedundant).
func (e *entry) adoptTracker() {
	e.live, _ = e.sess.t.(LivenessChecker)
	if r, ok := e.sess.t.(DriverResetRedundant); ok && r.SkipDriverReset() {
		e.resetter = nil
		if v, ok := e.sess.t.(driver.Validator); ok && e.validator == nil {
			e.validator = v
		}
	}
}

// ReleasePlan is what release does with a connection whose session is not clean.
type ReleasePlan struct {
	// Statements run in order; the first error closes the connection. A plan that starts with
	// "ROLLBACK" is reported as a rollback to Trace.ReleasePlanRun.
	Statements []string
	// Discard closes the connection instead: nothing finer restores the session.
	Discard bool
	// Reason is a short description for logs.
	Reason string
}

// dialectRegistry maps a connector's or driver's package path to the dialect registered for it.
var dialectRegistry struct {
	mu sync.RWMutex
	m  map[string]Dialect
}

// RegisterDialect makes d the dialect New chooses, when Config.Dialect is nil, for a connector
// whose type, or whose Driver()'s type, is defined in one of pkgPaths (such as
// "github.com/lib/pq"). A later registration for the same path replaces the earlier one.
// Packages that provide a dialect call it from init.
func RegisterDialect(d Dialect, pkgPaths ...string) {
	dialectRegistry.mu.Lock()
	defer dialectRegistry.mu.Unlock()
	if dialectRegistry.m == nil {
		dialectRegistry.m = make(map[string]Dialect)
	}
	for _, p := range pkgPaths {
		dialectRegistry.m[p] = d
	}
}

// postgresPkgs are the PostgreSQL drivers' packages New recognises even when no dialect was
// registered for them, to fail with an error that says what to import.
var postgresPkgs = []string{"github.com/jackc/pgx/v5/stdlib", "github.com/jackc/pgx/v4/stdlib", "github.com/lib/pq"}

// chooseDialect returns cfg when set, else the dialect registered for c's package or its
// driver's, else MySQL (the reference: any connector the pool does not recognise, such as
// go-sql-driver's or a test driver's, keeps MySQL's rules).
func chooseDialect(c driver.Connector, cfg Dialect) (Dialect, error) {
	if cfg != nil {
		return cfg, nil
	}
	paths := []string{pkgPath(c)}
	if d := safeDriver(c); d != nil {
		paths = append(paths, pkgPath(d))
	}
	dialectRegistry.mu.RLock()
	for _, p := range paths {
		if d, ok := dialectRegistry.m[p]; ok {
			dialectRegistry.mu.RUnlock()
			return d, nil
		}
	}
	dialectRegistry.mu.RUnlock()
	for _, p := range paths {
		for _, pg := range postgresPkgs {
			if p == pg {
				return nil, fmt.Errorf("sqlpool: New: the connector is PostgreSQL's (%s) and no PostgreSQL dialect is registered; "+
					"import github.com/sqlpool/sqlpool/pgdialect (it registers itself) or set Config.Dialect", p)
			}
		}
	}
	return MySQL, nil
}

// safeDriver returns c.Driver(), or nil when it panics (some connectors return nothing useful
// outside database/sql).
func safeDriver(c driver.Connector) (d driver.Driver) {
	defer func() {
		if recover() != nil {
			d = nil
		}
	}()
	return c.Driver()
}

// pkgPath is the import path of the package that defines v's type (through one pointer).
func pkgPath(v any) string {
	t := reflect.TypeOf(v)
	if t == nil {
		return ""
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	p := t.PkgPath()
	// A vendored driver keeps its import path after "/vendor/".
	if i := strings.LastIndex(p, "/vendor/"); i >= 0 {
		p = p[i+len("/vendor/"):]
	}
	return p
}
