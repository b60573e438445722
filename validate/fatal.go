package validate

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
	"syscall"
)

// Session is what the pool knows about the borrower's session when an error
// comes back from a connection.
type Session struct {
	// ReadOnlyTx reports that the borrower itself opened a read-only
	// transaction (START TRANSACTION READ ONLY, BeginTx with
	// sql.TxOptions.ReadOnly, SET [SESSION] TRANSACTION READ ONLY). A 1792
	// error is then the borrower's own doing, not a failover, and is not
	// fatal.
	ReadOnlyTx bool
}

// Verdict is the full answer for one error: whether the connection that
// returned it must be discarded, whether the whole server seems to have gone
// away, and a short reason for logs and error messages.
type Verdict struct {
	// Fatal reports that the connection must never be used again.
	Fatal bool
	// ServerGone reports that the error says the server as a whole went away
	// or changed role; it is never true unless Fatal is.
	ServerGone bool
	// Reason is a short, static description such as "server shutdown (1053)".
	// It is empty when Fatal is false.
	Reason string
}

// IsFatal reports whether err means the connection it came from must never
// be used again, and a short reason such as "driver: bad connection",
// "server shutdown (1053)" or "read-only server (1290 --read-only)".
//
// IsFatal knows nothing about the session, so it treats 1792 (a write in a
// READ ONLY transaction) as fatal; use [Classify] when the borrower may have
// opened a read-only transaction itself. A cancelled or expired caller
// context is never fatal. See the package documentation for the full rules.
// IsFatal does not allocate.
//
// Pass only errors that report a failure: io.EOF returned by
// driver.Rows.Next or driver.RowsNextResultSet.NextResultSet marks the end of
// the rows and must not be classified (a bare io.EOF from anywhere else is
// a dropped socket and is fatal). driver.ErrSkip and driver.ErrRemoveArgument
// are signals too, though they are not fatal.
func IsFatal(err error) (fatal bool, reason string) {
	v := Check(err, Session{})
	return v.Fatal, v.Reason
}

// Classify is [IsFatal] with what the pool knows about the session: when
// s.ReadOnlyTx is true a 1792 error is the borrower's own doing and is not
// fatal.
func Classify(err error, s Session) (fatal bool, reason string) {
	v := Check(err, s)
	return v.Fatal, v.Reason
}

// ServerGone reports whether err says the whole server went away or changed
// role (shutdown, a killed connection, a Galera node that is not ready, a
// failover to read-only, or a peer that dropped or refused the socket). The
// pool uses it to probe, on their next borrow, every idle connection created
// before that moment. ServerGone implies [IsFatal]. Like IsFatal it assumes
// the borrower did not open a read-only transaction; use [Check] when it
// may have.
func ServerGone(err error) bool {
	return Check(err, Session{}).ServerGone
}

// Check returns the full [Verdict] for err in session s: the answers of
// [Classify] and [ServerGone] in one call. Check walks the error chain
// (errors.Unwrap and errors.Join trees, at most 64 links deep) and does not
// allocate.
func Check(err error, s Session) Verdict {
	if err == nil {
		return Verdict{}
	}
	// The caller's own cancellation or deadline is not a server fault, even
	// when the driver wrapped it (net's "operation was canceled" and the
	// dial "i/o timeout" both match here).
	if callerGaveUp(err, 0) {
		return Verdict{}
	}
	v, _ := inspect(err, s, 0)
	return v
}

// maxDepth bounds the walk over pathological (cyclic or very deep) chains.
const maxDepth = 64

// inspect walks the error tree in errors.Is order (pre-order, depth first)
// and returns the first specific fatal verdict. A generic net.Error is only
// remembered as a fallback, so that an *net.OpError wrapping ECONNRESET is
// reported as the reset it is. The second result reports a specific match.
func inspect(err error, s Session, depth int) (Verdict, bool) {
	var fallback Verdict
	for ; err != nil && depth < maxDepth; depth++ {
		if v, ok := node(err, s); ok {
			return v, true
		}
		if !fallback.Fatal {
			fallback = netFallback(err)
		}
		switch x := err.(type) {
		case interface{ Unwrap() error }:
			err = x.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				v, specific := inspect(e, s, depth+1)
				if specific {
					return v, true
				}
				if !fallback.Fatal {
					fallback = v
				}
			}
			return fallback, false
		default:
			return fallback, false
		}
	}
	return fallback, false
}

// callerGaveUp is errors.Is(err, context.Canceled) ||
// errors.Is(err, context.DeadlineExceeded), bounded by maxDepth so that a
// self-wrapping error cannot hang the pool.
func callerGaveUp(err error, depth int) bool {
	for ; err != nil && depth < maxDepth; depth++ {
		if err == context.Canceled || err == context.DeadlineExceeded {
			return true
		}
		if x, ok := err.(interface{ Is(error) bool }); ok && (x.Is(context.Canceled) || x.Is(context.DeadlineExceeded)) {
			return true
		}
		switch x := err.(type) {
		case interface{ Unwrap() error }:
			err = x.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				if callerGaveUp(e, depth+1) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// node decides a single link of the chain, without looking at what it wraps.
// The two common concrete types are decided first: neither can match a
// sentinel (MySQLError.Is matches only other *MySQLError values, Errno.Is only
// the io/fs errors).
func node(err error, s Session) (Verdict, bool) {
	if x, ok := err.(syscall.Errno); ok {
		return classifyErrno(x)
	}
	if me, ok, isNil := asMySQLError(err); ok {
		if isNil {
			return Verdict{}, false
		}
		return classifyMySQL(me, s)
	}
	isser, hasIs := err.(interface{ Is(error) bool })
	text := ""
	if reflect.TypeOf(err) == errorStringType {
		text = err.Error()
	}
	for i := range sentinels {
		if err == sentinels[i].Err || hasIs && isser.Is(sentinels[i].Err) ||
			text != "" && sentinels[i].byText && text == sentinels[i].Err.Error() {
			return Verdict{Fatal: true, ServerGone: sentinels[i].ServerGone, Reason: sentinels[i].Reason}, true
		}
	}
	return Verdict{}, false
}

// netFallback classifies a generic net.Error. syscall.Errno also satisfies
// net.Error but is judged by its value alone in classifyErrno.
func netFallback(err error) Verdict {
	if _, ok := err.(syscall.Errno); ok {
		return Verdict{}
	}
	ne, ok := err.(net.Error)
	if !ok {
		return Verdict{}
	}
	if ne.Timeout() {
		return Verdict{Fatal: true, Reason: "network timeout"}
	}
	return Verdict{Fatal: true, Reason: "network error"}
}

func classifyErrno(e syscall.Errno) (Verdict, bool) {
	switch e {
	case syscall.ECONNRESET:
		return Verdict{Fatal: true, ServerGone: true, Reason: "connection reset by peer"}, true
	case syscall.EPIPE:
		return Verdict{Fatal: true, ServerGone: true, Reason: "broken pipe"}, true
	case syscall.ECONNREFUSED:
		return Verdict{Fatal: true, ServerGone: true, Reason: "connection refused"}, true
	case syscall.ECONNABORTED:
		return Verdict{Fatal: true, Reason: "connection aborted"}, true
	case syscall.ETIMEDOUT:
		return Verdict{Fatal: true, Reason: "connection timed out"}, true
	case syscall.EHOSTUNREACH:
		return Verdict{Fatal: true, Reason: "host unreachable"}, true
	case syscall.ENETUNREACH:
		return Verdict{Fatal: true, Reason: "network unreachable"}, true
	}
	return Verdict{}, false
}

func classifyMySQL(e mysqlError, s Session) (Verdict, bool) {
	if i, ok := codeIndex[e.Number]; ok {
		c := &codes[i]
		if c.cond.holds(e, s) {
			return Verdict{Fatal: true, ServerGone: c.ServerGone, Reason: c.Reason}, true
		}
	}
	if e.SQLState[0] == '0' && e.SQLState[1] == '8' {
		return Verdict{Fatal: true, Reason: "connection exception (SQLSTATE class 08)"}, true
	}
	return Verdict{}, false
}

// condition is the extra test a conditional code must pass to be fatal.
type condition uint8

const (
	always            condition = iota
	readOnlyOption              // 1290: the message names --read-only or --super-read-only
	notOwnReadOnlyTx            // 1792: the borrower did not open a read-only transaction
	idleTimeoutNotice           // 4031: MySQL's inactivity notice, not MariaDB's trigger error
)

func (c condition) holds(e mysqlError, s Session) bool {
	switch c {
	case readOnlyOption:
		return strings.Contains(e.Message, "read-only") || strings.Contains(e.Message, "read_only")
	case notOwnReadOnlyTx:
		return !s.ReadOnlyTx
	case idleTimeoutNotice:
		return e.Message == "" || strings.Contains(e.Message, "inactivity") || strings.Contains(e.Message, "wait_timeout")
	}
	return true
}

func (c condition) String() string {
	switch c {
	case readOnlyOption:
		return "only when the message names --read-only or --super-read-only"
	case notOwnReadOnlyTx:
		return "only when the borrower did not open a read-only transaction (Session.ReadOnlyTx false)"
	case idleTimeoutNotice:
		return "only when the message mentions inactivity or wait_timeout, or is empty (MariaDB uses 4031 for ER_REFERENCED_TRG_DOES_NOT_EXIST)"
	}
	return ""
}

// Code is one row of the MySQL/MariaDB server error table that [IsFatal]
// consults.
type Code struct {
	// Number is the server error number, as in mysql.MySQLError.Number.
	Number uint16
	// SQLState is the SQLSTATE the server sends with the number.
	SQLState string
	// Name is the symbolic name from mysqld_error.h / errmsg-utf8.txt.
	Name string
	// Servers names the servers that raise the error with this meaning.
	Servers string
	// Reason is the short reason IsFatal returns for it.
	Reason string
	// When is empty when the code is always fatal, and otherwise describes
	// the condition under which it is.
	When string
	// ServerGone reports whether the code also makes [ServerGone] true.
	ServerGone bool

	cond condition
}

// codes is the server error table. SQLSTATEs were checked against the MySQL
// server error reference (as mirrored in Connector/J's MysqlErrorNumbers) and
// the MariaDB error-code pages; see the package tests.
var codes = [...]Code{
	{Number: 1047, SQLState: "08S01", Name: "ER_UNKNOWN_COM_ERROR", Servers: "MySQL, MariaDB (Galera: WSREP has not yet prepared node for application use)", Reason: "unknown command or Galera node not ready (1047)", ServerGone: true},
	{Number: 1053, SQLState: "08S01", Name: "ER_SERVER_SHUTDOWN", Servers: "MySQL, MariaDB", Reason: "server shutdown (1053)", ServerGone: true},
	{Number: 1077, SQLState: "HY000", Name: "ER_NORMAL_SHUTDOWN", Servers: "MySQL, MariaDB", Reason: "server normal shutdown (1077)", ServerGone: true},
	{Number: 1079, SQLState: "HY000", Name: "ER_SHUTDOWN_COMPLETE", Servers: "MySQL, MariaDB", Reason: "server shutdown complete (1079)", ServerGone: true},
	{Number: 1080, SQLState: "08S01", Name: "ER_FORCING_CLOSE", Servers: "MySQL, MariaDB", Reason: "server forcing close of thread (1080)", ServerGone: true},
	{Number: 1152, SQLState: "08S01", Name: "ER_ABORTING_CONNECTION", Servers: "MySQL, MariaDB", Reason: "connection aborted by server (1152)"},
	{Number: 1153, SQLState: "08S01", Name: "ER_NET_PACKET_TOO_LARGE", Servers: "MySQL, MariaDB", Reason: "packet bigger than max_allowed_packet (1153)"},
	{Number: 1154, SQLState: "08S01", Name: "ER_NET_READ_ERROR_FROM_PIPE", Servers: "MySQL, MariaDB", Reason: "read error from connection pipe (1154)"},
	{Number: 1155, SQLState: "08S01", Name: "ER_NET_FCNTL_ERROR", Servers: "MySQL, MariaDB", Reason: "fcntl() error on connection (1155)"},
	{Number: 1156, SQLState: "08S01", Name: "ER_NET_PACKETS_OUT_OF_ORDER", Servers: "MySQL, MariaDB", Reason: "packets out of order (1156)"},
	{Number: 1157, SQLState: "08S01", Name: "ER_NET_UNCOMPRESS_ERROR", Servers: "MySQL, MariaDB", Reason: "could not uncompress packet (1157)"},
	{Number: 1158, SQLState: "08S01", Name: "ER_NET_READ_ERROR", Servers: "MySQL, MariaDB", Reason: "error reading communication packets (1158)"},
	{Number: 1159, SQLState: "08S01", Name: "ER_NET_READ_INTERRUPTED", Servers: "MySQL, MariaDB", Reason: "timeout reading communication packets (1159)"},
	{Number: 1160, SQLState: "08S01", Name: "ER_NET_ERROR_ON_WRITE", Servers: "MySQL, MariaDB", Reason: "error writing communication packets (1160)"},
	{Number: 1161, SQLState: "08S01", Name: "ER_NET_WRITE_INTERRUPTED", Servers: "MySQL, MariaDB", Reason: "timeout writing communication packets (1161)"},
	{Number: 1184, SQLState: "08S01", Name: "ER_NEW_ABORTING_CONNECTION", Servers: "MySQL, MariaDB", Reason: "connection aborted by server (1184)"},
	{Number: 1290, SQLState: "HY000", Name: "ER_OPTION_PREVENTS_STATEMENT", Servers: "MySQL, MariaDB", Reason: "read-only server (1290 --read-only)", ServerGone: true, cond: readOnlyOption},
	{Number: 1792, SQLState: "25006", Name: "ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION", Servers: "MySQL, MariaDB", Reason: "read-only transaction the borrower did not open (1792)", ServerGone: true, cond: notOwnReadOnlyTx},
	{Number: 1836, SQLState: "HY000", Name: "ER_READ_ONLY_MODE", Servers: "MySQL, MariaDB", Reason: "server in read-only mode (1836)", ServerGone: true},
	{Number: 1927, SQLState: "70100", Name: "ER_CONNECTION_KILLED", Servers: "MariaDB", Reason: "connection killed (1927)", ServerGone: true},
	{Number: 4031, SQLState: "HY000", Name: "ER_CLIENT_INTERACTION_TIMEOUT", Servers: "MySQL >= 8.0.24", Reason: "disconnected by server for inactivity (4031)", cond: idleTimeoutNotice},
}

// codeIndex maps a number to its row in codes.
var codeIndex = func() map[uint16]int {
	m := make(map[uint16]int, len(codes))
	for i := range codes {
		codes[i].When = codes[i].cond.String()
		m[codes[i].Number] = i
	}
	return m
}()

// Codes returns a copy of the server error table, ordered by number. Every
// row is fatal (when its condition holds); numbers not listed are fatal
// only if their SQLSTATE is in class 08.
func Codes() []Code {
	out := make([]Code, len(codes))
	copy(out, codes[:])
	return out
}

// Sentinel is one row of the table of sentinel errors that [IsFatal] matches
// with errors.Is semantics.
type Sentinel struct {
	// Err is the sentinel error value. For go-sql-driver's sentinels (ErrInvalidConn,
	// ErrPktSync, ErrPktSyncMul, ErrMalformPkt, ErrBusyBuffer) it is an error with the same
	// text: this package does not import the driver and matches those by their type (the one
	// errors.New returns) and exact text, so the driver's own values match too.
	Err error
	// Reason is the short reason IsFatal returns for it.
	Reason string
	// ServerGone reports whether it also makes [ServerGone] true.
	ServerGone bool

	// byText: go-sql-driver's sentinels (this package does not import the driver) are matched
	// by their type (errors.New's) and exact text.
	byText bool
}

var sentinels = [...]Sentinel{
	{Err: driver.ErrBadConn, Reason: "driver: bad connection"},
	{Err: errors.New("invalid connection"), byText: true, Reason: "mysql: invalid connection", ServerGone: true},
	{Err: errors.New("commands out of sync. You can't run this command now"), byText: true, Reason: "mysql: commands out of sync"},
	{Err: errors.New("commands out of sync. Did you run multiple statements at once?"), byText: true, Reason: "mysql: commands out of sync (multiple statements)"},
	{Err: errors.New("malformed packet"), byText: true, Reason: "mysql: malformed packet"},
	{Err: errors.New("busy buffer"), byText: true, Reason: "mysql: busy buffer"},
	{Err: io.EOF, Reason: "EOF from server", ServerGone: true},
	{Err: io.ErrUnexpectedEOF, Reason: "unexpected EOF from server", ServerGone: true},
	{Err: io.ErrShortWrite, Reason: "short write"},
	{Err: net.ErrClosed, Reason: "use of closed network connection"},
	{Err: ErrProbeTimeout, Reason: "probe timed out"},
}

// Sentinels returns a copy of the sentinel-error table.
func Sentinels() []Sentinel {
	out := make([]Sentinel, len(sentinels))
	copy(out, sentinels[:])
	return out
}
