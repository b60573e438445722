package validate

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
)

func myErr(number uint16, state, msg string) *mysql.MySQLError {
	e := &mysql.MySQLError{Number: number, Message: msg}
	copy(e.SQLState[:], state)
	return e
}

// confirmed is the table as checked against the sources named in the report
// (MySQL server error reference via Connector/J MysqlErrorNumbers, MariaDB
// error-code pages, MariaDB JIRA CONJ-492 for 1927). It guards the exported
// table against accidental edits.
var confirmed = map[uint16]struct {
	state, name string
	gone        bool
}{
	1047: {"08S01", "ER_UNKNOWN_COM_ERROR", true},
	1053: {"08S01", "ER_SERVER_SHUTDOWN", true},
	1077: {"HY000", "ER_NORMAL_SHUTDOWN", true},
	1079: {"HY000", "ER_SHUTDOWN_COMPLETE", true},
	1080: {"08S01", "ER_FORCING_CLOSE", true},
	1152: {"08S01", "ER_ABORTING_CONNECTION", false},
	1153: {"08S01", "ER_NET_PACKET_TOO_LARGE", false},
	1154: {"08S01", "ER_NET_READ_ERROR_FROM_PIPE", false},
	1155: {"08S01", "ER_NET_FCNTL_ERROR", false},
	1156: {"08S01", "ER_NET_PACKETS_OUT_OF_ORDER", false},
	1157: {"08S01", "ER_NET_UNCOMPRESS_ERROR", false},
	1158: {"08S01", "ER_NET_READ_ERROR", false},
	1159: {"08S01", "ER_NET_READ_INTERRUPTED", false},
	1160: {"08S01", "ER_NET_ERROR_ON_WRITE", false},
	1161: {"08S01", "ER_NET_WRITE_INTERRUPTED", false},
	1184: {"08S01", "ER_NEW_ABORTING_CONNECTION", false},
	1290: {"HY000", "ER_OPTION_PREVENTS_STATEMENT", true},
	1792: {"25006", "ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION", true},
	1836: {"HY000", "ER_READ_ONLY_MODE", true},
	1927: {"70100", "ER_CONNECTION_KILLED", true},
	4031: {"HY000", "ER_CLIENT_INTERACTION_TIMEOUT", false},
}

// fatalMessage is a real server message for each code (the one that makes
// a conditional code fatal).
var fatalMessage = map[uint16]string{
	1047: "WSREP has not yet prepared node for application use",
	1053: "Server shutdown in progress",
	1077: "mariadbd: Normal shutdown",
	1079: "mariadbd: Shutdown complete",
	1080: "mariadbd: Forcing close of thread 12 user: 'app'",
	1152: "Aborted connection 12 to db: 'zipkin' user: 'app' (Got an error reading communication packets)",
	1153: "Got a packet bigger than 'max_allowed_packet' bytes",
	1154: "Got a read error from the connection pipe",
	1155: "Got an error from fcntl()",
	1156: "Got packets out of order",
	1157: "Couldn't uncompress communication packet",
	1158: "Got an error reading communication packets",
	1159: "Got timeout reading communication packets",
	1160: "Got an error writing communication packets",
	1161: "Got timeout writing communication packets",
	1184: "Aborted connection 12 to db: 'zipkin' user: 'app' host: '10.0.0.1' (init_connect command failed)",
	1290: "The MariaDB server is running with the --read-only option so it cannot execute this statement",
	1792: "Cannot execute statement in a READ ONLY transaction.",
	1836: "Running in read-only mode",
	1927: "Connection was killed",
	4031: "The client was disconnected by the server because of inactivity. See wait_timeout and interactive_timeout for configuring this behavior.",
}

// wrappings returns err as callers see it: bare, %w-wrapped once and twice,
// and inside errors.Join next to a harmless error.
func wrappings(err error) map[string]error {
	return map[string]error{
		"bare":    err,
		"wrapped": fmt.Errorf("exec insert: %w", err),
		"twice":   fmt.Errorf("pool: %w", fmt.Errorf("exec insert: %w", err)),
		"joined":  errors.Join(sql.ErrNoRows, err),
	}
}

func TestCodesTable(t *testing.T) {
	seen := map[uint16]bool{}
	for _, c := range Codes() {
		t.Run(fmt.Sprint(c.Number), func(t *testing.T) {
			seen[c.Number] = true
			want, ok := confirmed[c.Number]
			if !ok {
				t.Fatalf("code %d is in the table but not in the confirmed list", c.Number)
			}
			if c.SQLState != want.state || c.Name != want.name || c.ServerGone != want.gone {
				t.Errorf("row = %s %s gone=%v, confirmed %s %s gone=%v",
					c.SQLState, c.Name, c.ServerGone, want.state, want.name, want.gone)
			}
			if len(c.SQLState) != 5 {
				t.Errorf("SQLSTATE %q is not 5 characters", c.SQLState)
			}
			if !strings.Contains(c.Reason, fmt.Sprint(c.Number)) {
				t.Errorf("reason %q does not name the number", c.Reason)
			}
			msg, ok := fatalMessage[c.Number]
			if !ok {
				t.Fatalf("no server message for %d", c.Number)
			}
			for how, err := range wrappings(myErr(c.Number, c.SQLState, msg)) {
				v := Check(err, Session{})
				if !v.Fatal || v.Reason != c.Reason || v.ServerGone != c.ServerGone {
					t.Errorf("%s: Check = %+v, want fatal %q gone=%v", how, v, c.Reason, c.ServerGone)
				}
				if fatal, reason := IsFatal(err); !fatal || reason != c.Reason {
					t.Errorf("%s: IsFatal = %v %q", how, fatal, reason)
				}
				if ServerGone(err) != c.ServerGone {
					t.Errorf("%s: ServerGone = %v", how, !c.ServerGone)
				}
			}
		})
	}
	for n := range confirmed {
		if !seen[n] {
			t.Errorf("confirmed code %d missing from Codes()", n)
		}
	}
}

func TestCodesIsACopy(t *testing.T) {
	c := Codes()
	c[0].Reason = "changed"
	if Codes()[0].Reason == "changed" {
		t.Fatal("Codes exposes the internal table")
	}
	s := Sentinels()
	s[0].Err = nil
	if Sentinels()[0].Err == nil {
		t.Fatal("Sentinels exposes the internal table")
	}
}

func TestConditionalCodes(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		s       Session
		fatal   bool
		gone    bool
		reason  string
		comment string
	}{
		{name: "1290 MariaDB read-only", err: myErr(1290, "HY000", "The MariaDB server is running with the --read-only option so it cannot execute this statement"), fatal: true, gone: true, reason: "read-only server (1290 --read-only)"},
		{name: "1290 MySQL read-only", err: myErr(1290, "HY000", "The MySQL server is running with the --read-only option so it cannot execute this statement"), fatal: true, gone: true, reason: "read-only server (1290 --read-only)"},
		{name: "1290 MySQL super-read-only", err: myErr(1290, "HY000", "The MySQL server is running with the --super-read-only option so it cannot execute this statement"), fatal: true, gone: true, reason: "read-only server (1290 --read-only)"},
		{name: "1290 secure-file-priv", err: myErr(1290, "HY000", "The MySQL server is running with the --secure-file-priv option so it cannot execute this statement")},
		{name: "1290 MariaDB secure-file-priv", err: myErr(1290, "HY000", "The MariaDB server is running with the --secure-file-priv option so it cannot execute this statement")},
		{name: "1290 skip-grant-tables", err: myErr(1290, "HY000", "The MariaDB server is running with the --skip-grant-tables option so it cannot execute this statement")},
		{name: "1792 failover", err: myErr(1792, "25006", "Cannot execute statement in a READ ONLY transaction."), fatal: true, gone: true, reason: "read-only transaction the borrower did not open (1792)"},
		{name: "1792 borrower's own read-only tx", err: myErr(1792, "25006", "Cannot execute statement in a READ ONLY transaction."), s: Session{ReadOnlyTx: true}},
		{name: "1792 own tx, wrapped", err: fmt.Errorf("tx: %w", myErr(1792, "25006", "Cannot execute statement in a READ ONLY transaction.")), s: Session{ReadOnlyTx: true}},
		{name: "4031 MySQL inactivity", err: myErr(4031, "HY000", fatalMessage[4031]), fatal: true, reason: "disconnected by server for inactivity (4031)"},
		{name: "4031 no message", err: myErr(4031, "HY000", ""), fatal: true, reason: "disconnected by server for inactivity (4031)"},
		{name: "4031 MariaDB trigger", err: myErr(4031, "HY000", "Referenced trigger 'trg1' for the given action time and event type does not exist")},
		{name: "read-only session does not excuse 1290", err: myErr(1290, "HY000", fatalMessage[1290]), s: Session{ReadOnlyTx: true}, fatal: true, gone: true, reason: "read-only server (1290 --read-only)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Check(tt.err, tt.s)
			if v.Fatal != tt.fatal || v.ServerGone != tt.gone || v.Reason != tt.reason {
				t.Fatalf("Check = %+v, want fatal=%v gone=%v %q", v, tt.fatal, tt.gone, tt.reason)
			}
			if fatal, reason := Classify(tt.err, tt.s); fatal != tt.fatal || reason != tt.reason {
				t.Fatalf("Classify = %v %q", fatal, reason)
			}
		})
	}
	// IsFatal knows no session: 1792 counts as a failover.
	if fatal, _ := IsFatal(myErr(1792, "25006", "")); !fatal {
		t.Error("IsFatal(1792) = false, want true without session knowledge")
	}
}

func TestSentinels(t *testing.T) {
	for _, s := range Sentinels() {
		t.Run(s.Reason, func(t *testing.T) {
			for how, err := range wrappings(s.Err) {
				v := Check(err, Session{})
				if !v.Fatal || v.Reason != s.Reason || v.ServerGone != s.ServerGone {
					t.Errorf("%s: Check = %+v, want fatal %q gone=%v", how, v, s.Reason, s.ServerGone)
				}
			}
		})
	}
}

// isBadConn is an error type that reports itself as driver.ErrBadConn
// through an Is method, as some wrappers do.
type isBadConn struct{}

func (isBadConn) Error() string        { return "wrapper: connection lost" }
func (isBadConn) Is(target error) bool { return target == driver.ErrBadConn }

// loop unwraps to itself.
type loop struct{}

func (l *loop) Error() string { return "loop" }
func (l *loop) Unwrap() error { return l }

func opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3306}, Err: err}
}

func canceledDialErr(t *testing.T) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:9")
	if err == nil {
		t.Fatal("dial with a cancelled context succeeded")
	}
	return err
}

func TestTransportAndOtherErrors(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		fatal  bool
		gone   bool
		reason string
	}{
		{"nil", nil, false, false, ""},
		{"reset in OpError", opErr("read", &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}), true, true, "connection reset by peer"},
		{"reset wrapped OpError", fmt.Errorf("query: %w", opErr("read", &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET})), true, true, "connection reset by peer"},
		{"reset bare errno", syscall.ECONNRESET, true, true, "connection reset by peer"},
		{"broken pipe", opErr("write", &os.SyscallError{Syscall: "write", Err: syscall.EPIPE}), true, true, "broken pipe"},
		{"refused", opErr("dial", &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}), true, true, "connection refused"},
		{"aborted", fmt.Errorf("x: %w", syscall.ECONNABORTED), true, false, "connection aborted"},
		{"kernel timeout", opErr("read", &os.SyscallError{Syscall: "read", Err: syscall.ETIMEDOUT}), true, false, "connection timed out"},
		{"host unreachable", opErr("dial", syscall.EHOSTUNREACH), true, false, "host unreachable"},
		{"socket deadline", opErr("read", os.ErrDeadlineExceeded), true, false, "network timeout"},
		{"socket deadline wrapped", fmt.Errorf("read packet: %w", opErr("read", os.ErrDeadlineExceeded)), true, false, "network timeout"},
		{"bare deadline", os.ErrDeadlineExceeded, true, false, "network timeout"},
		{"other net error", opErr("read", errors.New("weird")), true, false, "network error"},
		{"closed conn in OpError", opErr("read", net.ErrClosed), true, false, "use of closed network connection"},
		{"dns error", &net.DNSError{Err: "no such host", Name: "db"}, true, false, "network error"},
		{"errno not about sockets", syscall.ENOENT, false, false, ""},
		{"custom Is method", fmt.Errorf("w: %w", isBadConn{}), true, false, "driver: bad connection"},
		{"join non-fatal then fatal", errors.Join(myErr(1062, "23000", "Duplicate entry"), io.EOF), true, true, "EOF from server"},
		{"join net fallback then specific", errors.Join(opErr("read", errors.New("x")), myErr(1053, "08S01", "")), true, true, "server shutdown (1053)"},
		{"class 08 unknown number", myErr(1040, "08004", "Too many connections"), true, false, "connection exception (SQLSTATE class 08)"},
		{"class 08S01 handshake", myErr(1043, "08S01", "Bad handshake"), true, false, "connection exception (SQLSTATE class 08)"},
		{"self-unwrapping chain", &loop{}, false, false, ""},
		{"nil MySQLError pointer", (*mysql.MySQLError)(nil), false, false, ""},

		// Not fatal: the server answered, or the caller gave up.
		{"1062 duplicate", myErr(1062, "23000", "Duplicate entry '1' for key 'PRIMARY'"), false, false, ""},
		{"1213 deadlock", myErr(1213, "40001", "Deadlock found when trying to get lock; try restarting transaction"), false, false, ""},
		{"1205 lock wait", myErr(1205, "HY000", "Lock wait timeout exceeded; try restarting transaction"), false, false, ""},
		{"1064 syntax", myErr(1064, "42000", "You have an error in your SQL syntax"), false, false, ""},
		{"1317 query interrupted (70100)", myErr(1317, "70100", "Query execution was interrupted"), false, false, ""},
		{"1969 statement timeout (70100)", myErr(1969, "70100", "Query execution was interrupted (max_statement_time exceeded)"), false, false, ""},
		{"1040 without SQLSTATE", myErr(1040, "", "Too many connections"), false, false, ""},
		{"sql.ErrNoRows", sql.ErrNoRows, false, false, ""},
		{"driver.ErrSkip", driver.ErrSkip, false, false, ""},
		{"ErrPktTooLarge", mysql.ErrPktTooLarge, false, false, ""},
		{"context.Canceled", context.Canceled, false, false, ""},
		{"context.DeadlineExceeded", context.DeadlineExceeded, false, false, ""},
		{"wrapped Canceled", fmt.Errorf("exec: %w", context.Canceled), false, false, ""},
		{"wrapped DeadlineExceeded", fmt.Errorf("exec: %w", context.DeadlineExceeded), false, false, ""},
		{"net dial cancelled by ctx", canceledDialErr(t), false, false, ""},
		{"caller cancel beats driver error", errors.Join(mysql.ErrInvalidConn, context.Canceled), false, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Check(tt.err, Session{})
			if v.Fatal != tt.fatal || v.ServerGone != tt.gone || v.Reason != tt.reason {
				t.Fatalf("Check(%v) = %+v, want fatal=%v gone=%v %q", tt.err, v, tt.fatal, tt.gone, tt.reason)
			}
			if fatal, reason := IsFatal(tt.err); fatal != tt.fatal || reason != tt.reason {
				t.Fatalf("IsFatal = %v %q", fatal, reason)
			}
			if got := ServerGone(tt.err); got != tt.gone {
				t.Fatalf("ServerGone = %v", got)
			}
		})
	}
}

func TestServerGoneImpliesFatal(t *testing.T) {
	var errs []error
	for _, c := range Codes() {
		errs = append(errs, myErr(c.Number, c.SQLState, fatalMessage[c.Number]), myErr(c.Number, c.SQLState, "other"))
	}
	for _, s := range Sentinels() {
		errs = append(errs, s.Err)
	}
	for _, err := range errs {
		for _, s := range []Session{{}, {ReadOnlyTx: true}} {
			if v := Check(err, s); v.ServerGone && !v.Fatal {
				t.Errorf("Check(%v, %+v) = %+v: ServerGone without Fatal", err, s, v)
			}
			if v := Check(err, s); v.Fatal != (v.Reason != "") {
				t.Errorf("Check(%v, %+v) = %+v: reason must be set exactly when fatal", err, s, v)
			}
		}
	}
}

var allocCases = []struct {
	name string
	err  error
}{
	{"1062", myErr(1062, "23000", "Duplicate entry '1' for key 'PRIMARY'")},
	{"1213 wrapped", fmt.Errorf("tx: %w", myErr(1213, "40001", "Deadlock found"))},
	{"1290 secure-file-priv", myErr(1290, "HY000", "The MySQL server is running with the --secure-file-priv option so it cannot execute this statement")},
	{"ErrNoRows", sql.ErrNoRows},
	{"Canceled wrapped", fmt.Errorf("q: %w", context.Canceled)},
	{"nil", nil},
	{"fatal 1053", myErr(1053, "08S01", "Server shutdown in progress")},
	{"fatal ErrInvalidConn wrapped", fmt.Errorf("q: %w", mysql.ErrInvalidConn)},
	{"fatal reset", opErr("read", &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET})},
}

func TestIsFatalDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	for _, c := range allocCases {
		if n := testing.AllocsPerRun(100, func() { IsFatal(c.err) }); n != 0 {
			t.Errorf("IsFatal(%s) allocates %.1f times", c.name, n)
		}
	}
}

func BenchmarkIsFatal(b *testing.B) {
	for _, c := range allocCases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				IsFatal(c.err)
			}
		})
	}
}
