// Package mysqldialect is MySQL's and MariaDB's pool.Dialect, for go-sql-driver/mysql.
// Importing it registers it: pool.New then chooses it for go-sql-driver's connector and for
// every connector no other dialect is registered for, and a program writes
//
//	import _ "github.com/sqlpool/sqlpool/mysqldialect"
//	…
//	p, err := pool.New(connector, pool.Config{})
//
// or sets pool.Config.Dialect to mysqldialect.Dialect explicitly. Without it, pool.New refuses
// go-sql-driver's connector (and any connector no dialect is registered for) with an error
// that names this package, instead of running without MySQL's session tracking.
//
// Errors are classified by package validate; ER_LOCK_DEADLOCK (1213) and ER_LOCK_WAIT_TIMEOUT
// (1205) are transient, ER_MAX_PREPARED_STMT_COUNT_REACHED (1461) empties the connection's
// statement cache, and a refused login (1045, 1044, 1698, 1049, 1129, 1130, 1862, 4151) is
// pool.ErrorClass.Login. The session is followed by package txstate's Tracker from a baseline
// recorded at connect (txstate.BaselineQuery, one round trip); liveness is validate.Probe. A
// transaction begun with a context that can end is committed with go-sql-driver's ExecContext,
// which watches it. Server-side cancel is KILL QUERY (see Dialect). The package imports no
// driver.
package mysqldialect

import (
	"context"
	"database/sql/driver"
	"errors"
	"time"

	"github.com/sqlpool/sqlpool/internal/rawconn"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/validate"
)

// Dialect is the MySQL/MariaDB dialect. It also implements pool.ServerCancel: the session id
// is CONNECTION_ID(), appended to the dial-time baseline query so that learning it costs no
// round trip; a statement is stopped with KILL QUERY <id> (any user may kill its own threads;
// other users' need the CONNECTION_ADMIN or SUPER privilege), and a session has ended when its
// thread is no longer in information_schema.PROCESSLIST (a user sees its own threads there
// without the PROCESS privilege). KILL QUERY returns as soon as the kill flag is set, not when
// the thread stops, hence the processlist poll.
var Dialect pool.Dialect = dialect{}

// goSQLDriver is go-sql-driver/mysql's package path.
const goSQLDriver = "github.com/go-sql-driver/mysql"

func init() {
	// "" makes MySQL's rules those of every connector no other dialect is registered for, as
	// they were when the pool had MySQL built in.
	pool.RegisterDialect(Dialect, goSQLDriver, "")
}

type dialect struct{}

var _ pool.ServerCancel = dialect{}

// erLockDeadlock and erLockWaitTimeout are MySQL's transient errors (ER_LOCK_DEADLOCK,
// ER_LOCK_WAIT_TIMEOUT); erMaxPreparedStmtCount is ER_MAX_PREPARED_STMT_COUNT_REACHED.
const (
	erLockDeadlock         = 1213
	erLockWaitTimeout      = 1205
	erMaxPreparedStmtCount = 1461
)

func (dialect) Name() string { return "mysql" }

// loginRefused are the server's refusals of a login that a retry does not fix: access denied
// (1045, 1698), no grant for the database (1044), unknown database (1049), host blocked after
// too many connection errors (1129) or not allowed to connect (1130), password expired (1862),
// account locked (4151, MariaDB).
var loginRefused = map[uint16]bool{1044: true, 1045: true, 1049: true, 1129: true, 1130: true, 1698: true, 1862: true, 4151: true}

func (dialect) Classify(err error, s pool.ErrorContext) pool.ErrorClass {
	v := validate.Check(err, validate.Session{ReadOnlyTx: s.ReadOnlyTx})
	c := pool.ErrorClass{Fatal: v.Fatal, ServerGone: v.ServerGone, Reason: v.Reason}
	if !v.Fatal {
		if n, ok := validate.ErrorNumber(err); ok {
			c.Transient = n == erLockDeadlock || n == erLockWaitTimeout
			c.StatementLimit = n == erMaxPreparedStmtCount
			c.Login = loginRefused[n]
		}
	}
	return c
}

func (dialect) Probe(ctx context.Context, dc driver.Conn, timeout time.Duration) error {
	return validate.Probe(ctx, dc, timeout)
}

// Commit commits t. For a transaction begun with a context that can end (ctx.Done() is not
// nil) on a go-sql-driver connection it sends COMMIT through the connection's ExecContext,
// which watches ctx (go-sql-driver's Tx.Commit sends the same COMMIT without one); when ctx
// ends first the driver closes the socket, and the error is a *pool.CommitUnknownError. When
// the driver sent nothing (driver.ErrBadConn), and for any other driver's transaction, t's own
// Commit answers.
func (dialect) Commit(ctx context.Context, dc driver.Conn, t driver.Tx) error {
	if ctx.Done() == nil {
		return t.Commit()
	}
	err := commitContext(ctx, dc, t)
	if err != nil && ctx.Err() != nil {
		err = &pool.CommitUnknownError{Err: err}
	}
	return err
}

func commitContext(ctx context.Context, dc driver.Conn, t driver.Tx) error {
	if rawconn.PkgPath(t) != goSQLDriver {
		return t.Commit()
	}
	err := rawconn.Exec(ctx, dc, "COMMIT")
	if errors.Is(err, driver.ErrBadConn) {
		// go-sql-driver sent nothing (its connection was closed already): the driver's own
		// Commit answers as plain database/sql would (mysql.ErrInvalidConn).
		return t.Commit()
	}
	return err
}
