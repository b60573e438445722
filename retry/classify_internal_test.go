package retry

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
)

func mysqlErr(number uint16, state, msg string) *mysql.MySQLError {
	e := &mysql.MySQLError{Number: number, Message: msg}
	copy(e.SQLState[:], state)
	return e
}

// What an error returned by sql.Tx.Commit means: only a proof that nothing
// was committed makes it anything but Ambiguous.
func TestClassifyCommit(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		err      error
		readOnly bool
		want     Class
	}{
		// The outcome is unknown.
		{"ErrInvalidConn", live, mysql.ErrInvalidConn, false, Ambiguous},
		{"io.EOF", live, io.EOF, false, Ambiguous},
		{"io.ErrUnexpectedEOF", live, io.ErrUnexpectedEOF, false, Ambiguous},
		{"ECONNRESET", live, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, false, Ambiguous},
		{"read timeout", live, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, false, Ambiguous},
		{"1180", live, mysqlErr(1180, "HY000", "Got error 4 during COMMIT"), false, Ambiguous},
		{"1053 shutdown during COMMIT", live, mysqlErr(1053, "08S01", "Server shutdown in progress"), false, Ambiguous},
		{"1927 killed during COMMIT", live, mysqlErr(1927, "70100", "Connection was killed"), false, Ambiguous},
		{"unknown error", live, errors.New("some driver error"), false, Ambiguous},
		{"wrapped ErrInvalidConn", live, fmt.Errorf("commit: %w", mysql.ErrInvalidConn), false, Ambiguous},

		// Nothing was committed.
		{"ErrBadConn: nothing sent", live, driver.ErrBadConn, false, Transient},
		{"1213 Galera certification failure", live, mysqlErr(1213, "40001", "Deadlock: wsrep aborted transaction"), false, Transient},
		{"1205", live, mysqlErr(1205, "HY000", "Lock wait timeout exceeded"), false, Transient},
		{"1290 read-only", live, mysqlErr(1290, "HY000", "The MariaDB server is running with the --read-only option so it cannot execute this statement"), false, Transient},
		{"1836 read-only", live, mysqlErr(1836, "HY000", "Running in read-only mode"), false, Transient},
		{"1792 not ours", live, mysqlErr(1792, "25006", "Cannot execute statement in a READ ONLY transaction"), false, Transient},
		{"1792 ours", live, mysqlErr(1792, "25006", "Cannot execute statement in a READ ONLY transaction"), true, Permanent},
		{"1047 Galera not ready", live, mysqlErr(1047, "08S01", "WSREP has not yet prepared node for application use"), false, Transient},
		{"1062 at commit", live, mysqlErr(1062, "23000", "Duplicate entry"), false, Permanent},
		{"ctx checked before COMMIT", cancelled, context.Canceled, false, Permanent},
		{"ErrTxDone after ctx ended", cancelled, sql.ErrTxDone, false, Permanent},
		{"ErrTxDone, fn ended the tx", live, sql.ErrTxDone, false, Permanent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err, got := classifyCommit(tc.ctx, tc.err, tc.readOnly)
			if got != tc.want {
				t.Errorf("classifyCommit(%v) = %v, want %v", tc.err, got, tc.want)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("classifyCommit lost the cause: %v", err)
			}
		})
	}
	err, _ := classifyCommit(cancelled, sql.ErrTxDone, false)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("ErrTxDone after ctx ended does not match context.Canceled: %v", err)
	}
}

// The read-only flag of Tx turns 1792 into the caller's own mistake.
func TestClassifyReadOnlyTx(t *testing.T) {
	e := mysqlErr(1792, "25006", "Cannot execute statement in a READ ONLY transaction")
	if got := classify(e, true); got != Permanent {
		t.Errorf("1792 in our read-only tx = %v, want permanent", got)
	}
	if got := classify(e, false); got != Transient {
		t.Errorf("1792 not in our read-only tx = %v, want transient", got)
	}
}
