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

// Dialect is one database product's knowledge that the pool needs, so that the pool imports no
// driver and knows no vendor: what an error means for its connection, how to follow and undo
// the session state a borrower leaves behind, whether a connection is alive, how to commit. It
// is called from many goroutines at once; a SessionTracker it returns, from one at a time.
// Packages mysqldialect and pgdialect hold MySQL's and PostgreSQL's and register them
// ([RegisterDialect]) when imported. A dialect that can stop a running statement on the server
// implements [ServerCancel] as well. To change a dialect's answers (such as which errors are
// fatal), set Config.Dialect to a type that embeds it and overrides the method.
type Dialect interface {
	// Name is a short lower-case name for logs and errors, such as "mysql" or "postgres".
	Name() string

	// Classify decides what err, returned by a driver call on a connection, means for that
	// connection. It is called with every such error and must not block.
	Classify(err error, s ErrorContext) ErrorClass

	// NewSession returns the tracker of a freshly dialled connection, after
	// Hooks.AfterConnect ran. It may run queries on dc (a baseline); a non-nil error fails
	// the connection, which the pool then closes. A dialect that follows no session state
	// returns a nil tracker: release then sends nothing.
	NewSession(ctx context.Context, dc driver.Conn) (SessionTracker, error)

	// Probe checks that dc is alive within timeout and returns nil when it answered; see
	// validate.Probe for the contract every dialect keeps (ctx's error when ctx ended, a
	// non-nil result means dc must not be handed out).
	Probe(ctx context.Context, dc driver.Conn, timeout time.Duration) error

	// Commit commits t, begun on dc with ctx; a dialect with nothing to add returns
	// t.Commit(). It may commit through dc with ctx instead (driver.Tx.Commit takes no
	// context), leaving t as t.Commit would. When the outcome is unknown (ctx ended after
	// COMMIT was sent, or the driver's error does not tell) it returns a *CommitUnknownError.
	Commit(ctx context.Context, dc driver.Conn, t driver.Tx) error
}

// CommitUnknownError is the error of a COMMIT whose outcome is unknown: the transaction may or
// may not have been committed. A Dialect's Commit returns it when a COMMIT's context ended
// after the COMMIT was sent and before the server answered (Reason is empty), and when the
// driver's error does not tell (Reason says so). It unwraps to the driver's error. Package
// retry classifies it as an ambiguous commit.
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
	// StaleStatement reports that the server refused a statement the connection prepared
	// earlier as no longer fitting (PostgreSQL: 0A000 after a table changed, 26000). One the
	// pool ran through its cache first (SessionCaps.CacheFirst) is then dropped and run directly.
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
	// Caps is asked once, right after NewSession; see SessionCaps.
	Caps() SessionCaps
}

// SessionCaps is what a SessionTracker can do besides following the session. The zero value
// asks for nothing: no liveness peek, the driver's ResetSession at every hand-out, statements
// run as the driver runs them.
type SessionCaps struct {
	// Alive, when not nil, reports without blocking or sending anything whether the server
	// still holds the connection (a socket peek finds no EOF nor unsolicited message, such as
	// PostgreSQL's FATAL after pg_terminate_backend). The pool asks it at hand-out, unless it
	// handed the connection out within the last millisecond, and closes a dead one.
	Alive func() bool
	// SkipDriverReset reports that the driver's ResetSession only repeats the pool's own
	// hand-out checks (Alive, the probe after AliveBypassWindow, the release plan's ROLLBACK):
	// the pool then does not call it (pgx's stdlib reads the wall clock there per checkout).
	SkipDriverReset bool
	// IsValid, when not nil and SkipDriverReset is set, stands in for the driver's
	// driver.Validator at every return when the driver connection has none (pgx's stdlib).
	IsValid func() bool
	// CacheFirst, when not nil, is asked before each parameterized ExecContext or
	// QueryContext; while it reports true, a statement already seen on the connection runs
	// through the statement cache (one round trip) instead of the driver's direct call, for a
	// driver that parses each anew (lib/pq). It must report false where a statement the server
	// rejects as stale (ErrorClass.StaleStatement) cannot simply run again: in a transaction.
	CacheFirst func() bool
}

// livenessPeekWindow is how recently a connection must have been handed out before (its
// previous borrow began, and so its return came later still) for the pool to hand it out again
// without asking its tracker's SessionCaps.Alive: a borrower was using it successfully that recently, and a
// dead server's farewell (PostgreSQL's FATAL before it closes a terminated backend) that
// arrived within that time is as likely to arrive just after the check. Asking costs a system
// call (~0.4 µs), as much as the rest of a borrow and return together, and a borrower that
// takes connections back to back would pay it on every cycle. The window is measured from the
// previous hand-out rather than the return so that a cycle reads the exact clock once, not
// twice. pgx's stdlib checks a connection idle for more than a second; database/sql never does.
const livenessPeekWindow = time.Millisecond

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
	return e.live()
}

// adoptTracker records what e's tracker can do (SessionCaps), once, after the session was
// initialised.
func (e *entry) adoptTracker() {
	caps := e.sess.Caps()
	e.live = caps.Alive
	e.cacheFirst = caps.CacheFirst
	if caps.SkipDriverReset {
		e.resetter = nil
		if caps.IsValid != nil && e.validator == nil {
			e.validator = validatorFunc(caps.IsValid)
		}
	}
}

// validatorFunc is a SessionCaps.IsValid as a driver.Validator.
type validatorFunc func() bool

func (f validatorFunc) IsValid() bool { return f() }

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

// dialectRegistry maps a connector's or driver's package path to the dialect registered for it;
// "" maps to the dialect of every other connector.
var dialectRegistry struct {
	mu sync.RWMutex
	m  map[string]Dialect
}

// RegisterDialect makes d the dialect New chooses, when Config.Dialect is nil, for a connector
// whose type, or whose Driver()'s type, is defined in one of pkgPaths (such as
// "github.com/lib/pq"); the empty path, for every connector no other path matches
// (mysqldialect's). A later registration for a path replaces the earlier one. Dialect packages
// call it from init.
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

// knownDrivers are the drivers' packages New recognises even when no dialect was registered
// for them, to fail with an error that says what to import instead of applying another
// database's rules; the value is the dialect package to import.
var knownDrivers = map[string]string{
	"github.com/go-sql-driver/mysql": "mysqldialect",
	"github.com/jackc/pgx/v5/stdlib": "pgdialect",
	"github.com/jackc/pgx/v4/stdlib": "pgdialect",
	"github.com/lib/pq":              "pgdialect",
}

// chooseDialect returns cfg when set, else the dialect registered for c's package or its
// driver's, else the one registered for every other connector (the empty path) unless c is a
// driver's whose dialect is not registered, else an error that says what to import.
func chooseDialect(c driver.Connector, cfg Dialect) (Dialect, error) {
	if cfg != nil {
		return cfg, nil
	}
	paths := []string{pkgPath(c)}
	if d := safeDriver(c); d != nil {
		paths = append(paths, pkgPath(d))
	}
	dialectRegistry.mu.RLock()
	defer dialectRegistry.mu.RUnlock()
	for _, p := range paths {
		if p == "" {
			continue
		}
		if d, ok := dialectRegistry.m[p]; ok {
			return d, nil
		}
	}
	for _, p := range paths {
		if pkg, ok := knownDrivers[p]; ok {
			return nil, fmt.Errorf("sqlpool: New: the connector is %s's and no dialect is registered for it; "+
				"import github.com/sqlpool/sqlpool/%s (it registers itself) or set Config.Dialect", p, pkg)
		}
	}
	if d, ok := dialectRegistry.m[""]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("sqlpool: New: no dialect is registered for the connector (%T); import "+
		"github.com/sqlpool/sqlpool/mysqldialect (MySQL/MariaDB; it also serves connectors no other dialect "+
		"is registered for) or github.com/sqlpool/sqlpool/pgdialect (PostgreSQL), or set Config.Dialect", c)
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
