package retry_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/retry"
)

func myErr(number uint16, state, msg string) *mysql.MySQLError {
	e := &mysql.MySQLError{Number: number, Message: msg}
	copy(e.SQLState[:], state)
	return e
}

var (
	errDeadlock     = myErr(1213, "40001", "Deadlock found when trying to get lock; try restarting transaction")
	errLockWait     = myErr(1205, "HY000", "Lock wait timeout exceeded; try restarting transaction")
	errDuringCommit = myErr(1180, "HY000", "Got error 149 \"Lock deadlock; Retry transaction\" during COMMIT")
)

// Every code and sentinel the package documentation lists, plain and wrapped.
func TestClassify(t *testing.T) {
	netReset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	dialRefused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tc := range []struct {
		name string
		err  error
		want retry.Class
	}{
		{"nil", nil, retry.Permanent},

		// Transient: the listed codes.
		{"1213 deadlock", errDeadlock, retry.Transient},
		{"1205 lock wait timeout", errLockWait, retry.Transient},
		{"1040 too many connections", myErr(1040, "08004", "Too many connections"), retry.Transient},
		{"1203 too many user connections", myErr(1203, "42000", "User sqlpool already has more than 'max_user_connections' active connections"), retry.Transient},
		{"1290 --read-only", myErr(1290, "HY000", "The MariaDB server is running with the --read-only option so it cannot execute this statement"), retry.Transient},
		{"1290 --super-read-only", myErr(1290, "HY000", "The MySQL server is running with the --super-read-only option so it cannot execute this statement"), retry.Transient},
		{"1836 read-only mode", myErr(1836, "HY000", "Running in read-only mode"), retry.Transient},
		{"1792 read-only transaction", myErr(1792, "25006", "Cannot execute statement in a READ ONLY transaction"), retry.Transient},
		{"1047 Galera not ready", myErr(1047, "08S01", "WSREP has not yet prepared node for application use"), retry.Transient},
		{"driver.ErrBadConn", driver.ErrBadConn, retry.Transient},

		// Transient: a connection lost outside COMMIT (see the package docs).
		{"mysql.ErrInvalidConn", mysql.ErrInvalidConn, retry.Transient},
		{"io.EOF", io.EOF, retry.Transient},
		{"io.ErrUnexpectedEOF", io.ErrUnexpectedEOF, retry.Transient},
		{"ECONNRESET", netReset, retry.Transient},
		{"dial refused", dialRefused, retry.Transient},
		{"1053 shutdown", myErr(1053, "08S01", "Server shutdown in progress"), retry.Transient},
		{"1927 killed", myErr(1927, "70100", "Connection was killed"), retry.Transient},
		{"4031 idle timeout", myErr(4031, "HY000", "The client was disconnected by the server because of inactivity."), retry.Transient},

		// Ambiguous.
		{"1180 error during commit", errDuringCommit, retry.Ambiguous},
		{"ErrAmbiguousCommit", retry.ErrAmbiguousCommit, retry.Ambiguous},
		{"1180 with a cancelled ctx", errors.Join(context.Canceled, errDuringCommit), retry.Ambiguous},

		// Permanent.
		{"context.Canceled", context.Canceled, retry.Permanent},
		{"context.DeadlineExceeded", context.DeadlineExceeded, retry.Permanent},
		{"deadlock with a cancelled ctx", errors.Join(errDeadlock, context.Canceled), retry.Permanent},
		{"lost connection with an expired ctx", errors.Join(mysql.ErrInvalidConn, context.DeadlineExceeded), retry.Permanent},
		{"1290 --secure-file-priv", myErr(1290, "HY000", "The MariaDB server is running with the --secure-file-priv option so it cannot execute this statement"), retry.Permanent},
		{"1153 packet too large", myErr(1153, "08S01", "Got a packet bigger than 'max_allowed_packet' bytes"), retry.Permanent},
		{"mysql.ErrPktTooLarge", mysql.ErrPktTooLarge, retry.Permanent},
		{"1062 duplicate", myErr(1062, "23000", "Duplicate entry '1' for key 'PRIMARY'"), retry.Permanent},
		{"1064 syntax", myErr(1064, "42000", "You have an error in your SQL syntax"), retry.Permanent},
		{"1317 query interrupted", myErr(1317, "70100", "Query execution was interrupted"), retry.Permanent},
		{"1969 statement timeout", myErr(1969, "70100", "Query execution was interrupted (max_statement_time exceeded)"), retry.Permanent},
		{"3024 query timeout", myErr(3024, "HY000", "Query execution was interrupted, maximum statement execution time exceeded"), retry.Permanent},
		{"3572 NOWAIT", myErr(3572, "HY000", "Statement aborted because lock(s) could not be acquired immediately and NOWAIT is set."), retry.Permanent},
		{"1129 host blocked", myErr(1129, "HY000", "Host '10.0.0.1' is blocked because of many connection errors"), retry.Permanent},
		{"sql.ErrNoRows", sql.ErrNoRows, retry.Permanent},
		{"sql.ErrTxDone", sql.ErrTxDone, retry.Permanent},
		{"plain error", errors.New("boom"), retry.Permanent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := retry.Classify(tc.err); got != tc.want {
				t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
			}
			if tc.err == nil {
				return
			}
			wrapped := fmt.Errorf("insert span: %w", tc.err)
			if got := retry.Classify(wrapped); got != tc.want {
				t.Errorf("Classify(wrapped %v) = %v, want %v", tc.err, got, tc.want)
			}
			joined := errors.Join(errors.New("context"), wrapped)
			if got := retry.Classify(joined); got != tc.want {
				t.Errorf("Classify(joined %v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestClassString(t *testing.T) {
	for c, want := range map[retry.Class]string{retry.Permanent: "permanent", retry.Transient: "transient", retry.Ambiguous: "ambiguous", 7: "Class(7)"} {
		if got := c.String(); got != want {
			t.Errorf("Class(%d).String() = %q, want %q", uint8(c), got, want)
		}
	}
	if retry.OpDo.String() != "do" || retry.OpTx.String() != "tx" || retry.Op(9).String() != "Op(9)" {
		t.Error("Op.String")
	}
}

// An acquire timeout of package pool wraps the last connection error, and
// matches context.DeadlineExceeded when the caller's deadline ended it; the
// shape is reproduced here (retry may not import pool).
type acquireTimeout struct {
	ctxDeadline bool
	last        error
}

func (e *acquireTimeout) Error() string { return "acquire timeout" }
func (e *acquireTimeout) Unwrap() error { return e.last }
func (e *acquireTimeout) Is(target error) bool {
	return e.ctxDeadline && target == context.DeadlineExceeded
}

func TestClassifyAcquireTimeout(t *testing.T) {
	if got := retry.Classify(&acquireTimeout{last: myErr(1040, "08004", "Too many connections")}); got != retry.Transient {
		t.Errorf("acquire timeout after 1040: %v, want transient", got)
	}
	if got := retry.Classify(&acquireTimeout{}); got != retry.Permanent {
		t.Errorf("acquire timeout, every connection busy: %v, want permanent", got)
	}
	if got := retry.Classify(&acquireTimeout{ctxDeadline: true, last: myErr(1040, "08004", "Too many connections")}); got != retry.Permanent {
		t.Errorf("acquire timeout at the ctx deadline: %v, want permanent", got)
	}
}

func TestClassifyDoesNotAllocate(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", errDeadlock)
	if n := testing.AllocsPerRun(100, func() { retry.Classify(err) }); n != 0 {
		t.Errorf("Classify allocates %v times", n)
	}
}
