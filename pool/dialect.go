package pool

import (
	"context"
	"database/sql/driver"
	"fmt"
	"sync"
	"time"

	"github.com/sqlpool/sqlpool/internal/rawconn"
)

// Dialect is what the pool knows of one database product (errors, session reset, liveness,
// commit), so that it imports no driver; it is called from many goroutines at once. Packages
// mysqldialect and pgdialect register theirs; to override one, embed it in Config.Dialect.
type Dialect interface {
	// Name is a short lower-case name for logs, such as "mysql".
	Name() string
	// Classify says what err, from a driver call, means for its connection; it must not block.
	Classify(err error, s ErrorContext) ErrorClass
	// NewSession returns a new connection's tracker (nil: release sends nothing); an error closes it.
	NewSession(ctx context.Context, dc driver.Conn) (SessionTracker, error)
	// Probe returns nil when dc answered within timeout, and ctx's error when ctx ended.
	Probe(ctx context.Context, dc driver.Conn, timeout time.Duration) error
	// Commit commits t, or through dc with ctx; an unknown outcome is a *CommitUnknownError.
	Commit(ctx context.Context, dc driver.Conn, t driver.Tx) error
}

// CommitUnknownError is a COMMIT that may not have committed; Err is the driver's error, Reason
// why (empty: its context ended).
type CommitUnknownError struct {
	Err    error
	Reason string
}

// Error says that the outcome of COMMIT is unknown, and why.
func (e *CommitUnknownError) Error() string {
	if e.Reason != "" {
		return "sqlpool: the outcome of COMMIT is unknown (" + e.Reason + "); the transaction may or may not have been committed: " + e.Err.Error()
	}
	return "sqlpool: COMMIT was sent but its context ended before the server answered; the transaction may or may not have been committed: " + e.Err.Error()
}

// Unwrap returns Err.
func (e *CommitUnknownError) Unwrap() error { return e.Err }

// AmbiguousCommit reports true: the outcome of the COMMIT is unknown.
func (e *CommitUnknownError) AmbiguousCommit() bool { return true }

// ErrorContext is what the pool knows about the connection an error came from.
type ErrorContext struct {
	// ReadOnlyTx: the borrower opened a read-only transaction itself.
	ReadOnlyTx bool
	// Conn is the connection the error came from; nil for a failed connect.
	Conn driver.Conn
}

// ErrorClass is a Dialect's verdict on one error.
type ErrorClass struct {
	// Fatal: the connection must not be used again.
	Fatal bool
	// ServerGone: the server went away or changed role; idle connections are probed before reuse.
	// Only with Fatal.
	ServerGone bool
	// Transient: a retried transaction may not meet it again (deadlock, lock timeout); the
	// connection stays usable.
	Transient bool
	// StatementLimit: the server refused to prepare one more statement; the cache is emptied.
	StatementLimit bool
	// StaleStatement: the server refused a statement prepared earlier as no longer fitting.
	StaleStatement bool
	// Login: the server refused a login for a reason a retry does not fix (credentials, grants,
	// unknown database, blocked host). A dial failing so is retried slowly: see Pool.Redial.
	Login bool
	// Reason is a short static description of a fatal error; empty when Fatal is false.
	Reason string
}

// SessionTracker follows one connection's session state from the statements a borrower sends, and
// plans its reset at release. It is called only from the goroutine holding the connection.
type SessionTracker interface {
	// Begin, Commit, Rollback, Statement and Result report the borrower's calls; Failed a failure.
	Begin(opts driver.TxOptions)
	Commit()
	Rollback()
	Statement(query string)
	Result(r driver.Result)
	Failed()
	// Unknown: the borrower reached the driver connection directly (sql.Conn.Raw).
	Unknown()
	// Clean: the session is as at connect, so release sends nothing. It is asked once at every
	// release of a connection the pool keeps (after Hooks.AfterRelease), and so marks the end of
	// a borrow.
	Clean() bool
	// ReadOnlyTx: the borrower opened a read-only transaction itself.
	ReadOnlyTx() bool
	// Plan says what release must do; Done follows its success and marks the session clean.
	Plan() ReleasePlan
	Done()
	// BeforeClose returns statements to run, errors ignored, before the pool closes a healthy
	// connection whose borrower may hold server-side locks; nil for none.
	BeforeClose() []string
	// Scope is what statement names resolve against (the statement cache's key); !known: no caching.
	Scope() (scope string, known bool)
	// Caps is asked once, right after NewSession.
	Caps() SessionCaps
}

// SessionCaps is what a SessionTracker can do besides following the session. The zero value asks
// for nothing. See docs/postgresql.md.
type SessionCaps struct {
	// Alive, if set, tells without blocking or I/O that the connection is alive; else it is closed.
	Alive func() bool
	// SkipDriverReset: do not call the driver's ResetSession, which repeats the pool's checks.
	SkipDriverReset bool
	// IsValid, if set with SkipDriverReset, stands in for a missing driver.Validator at return.
	IsValid func() bool
	// CacheFirst, if set and true, runs repeated statements through the cache; false in a
	// transaction.
	CacheFirst func() bool
	// Before, if set, is called before each statement a borrower (or a BeforeAcquire or
	// AfterRelease hook) runs — an Exec, a Query, an execution of a prepared statement, with its
	// args; result: the driver reports its driver.Result — and with query "" before the pool
	// hands out the driver's connection (Unwrap). It may first run statements of its own on the
	// connection, with ctx: a reset deferred from an earlier release until a statement could
	// observe what it resets (MySQL: LAST_INSERT_ID()). Its error is the statement's, which is
	// then not sent. It is called on every statement, so it must return at once, without
	// allocating, when nothing is deferred.
	Before func(ctx context.Context, query string, args []driver.NamedValue, result bool) error
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
	e.before = caps.Before
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

// ReleasePlan is what release does with a session that is not clean.
type ReleasePlan struct {
	// Statements run in order; the first error closes the connection. A first "ROLLBACK" counts as
	// a rollback.
	Statements []string
	// Discard closes the connection instead.
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

// RegisterDialect makes d New's dialect for connectors whose type or Driver() type is in
// pkgPaths ("" matches any); the last call wins.
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
	paths := []string{rawconn.PkgPath(c)}
	if d := safeDriver(c); d != nil {
		paths = append(paths, rawconn.PkgPath(d))
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
