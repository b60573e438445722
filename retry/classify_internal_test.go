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

// pgError is a PostgreSQL server error as retry sees one: pgx's *pgconn.PgError and lib/pq's
// *pq.Error both have SQLState (this module's tests import no PostgreSQL driver outside the
// PostgreSQL packages, which test the real ones).
type pgError struct{ code string }

func (e *pgError) Error() string    { return "ERROR: something (SQLSTATE " + e.code + ")" }
func (e *pgError) SQLState() string { return e.code }

func pgErr(code string) error { return &pgError{code: code} }

// unsent is a pgx connection error: SafeToRetry reports that nothing was written.
type unsent struct{ safe bool }

func (e *unsent) Error() string     { return "failed to write: conn closed" }
func (e *unsent) SafeToRetry() bool { return e.safe }

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

		// PostgreSQL's answers to COMMIT (an error with a SQLState method, as pgx's and lib/pq's).
		{"pg 57P01 terminated during COMMIT", live, pgErr("57P01"), false, Ambiguous},
		{"pg 08006 during COMMIT", live, pgErr("08006"), false, Ambiguous},
		{"pg 08007 resolution unknown", live, pgErr("08007"), false, Ambiguous},
		{"pg 40001 commit-time serialization failure", live, pgErr("40001"), false, Transient},
		{"pg 40P01", live, pgErr("40P01"), false, Transient},
		{"pg 53300 refused", live, pgErr("53300"), false, Transient},
		{"pg 25006 standby, not ours", live, pgErr("25006"), false, Transient},
		{"pg 25006 ours", live, pgErr("25006"), true, Permanent},
		{"pg 23505 deferred constraint", live, pgErr("23505"), false, Permanent},
		{"pg 40002 integrity violation", live, pgErr("40002"), false, Permanent},
		{"pg XX000 internal error", live, pgErr("XX000"), false, Ambiguous},
		{"pg 58030 I/O error (a PANIC on WAL fsync)", live, pgErr("58030"), false, Ambiguous},
		{"pg 53100 disk full", live, pgErr("53100"), false, Ambiguous},
		{"pg 57P05 idle session timeout", live, pgErr("57P05"), false, Ambiguous},
		{"pg wrapped 40001", live, fmt.Errorf("commit: %w", pgErr("40001")), false, Transient},
		// pgx v5.12 returns "conn closed" with SafeToRetry true also when the connection was
		// lost after COMMIT was written (TestRetryCommitAnswerLost in pgdialect): at COMMIT
		// SafeToRetry proves nothing.
		{"pgx: SafeToRetry at COMMIT", live, &unsent{safe: true}, false, Ambiguous},
		{"pgx: not SafeToRetry", live, &unsent{safe: false}, false, Ambiguous},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err, got := classifyCommit(tc.ctx, tc.err, tc.readOnly, nil)
			if got != tc.want {
				t.Errorf("classifyCommit(%v) = %v, want %v", tc.err, got, tc.want)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("classifyCommit lost the cause: %v", err)
			}
		})
	}
	err, _ := classifyCommit(cancelled, sql.ErrTxDone, false, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("ErrTxDone after ctx ended does not match context.Canceled: %v", err)
	}
}

// PostgreSQL's codes outside COMMIT: a rolled-back transaction or a lost connection runs
// again, 08007 is ambiguous, every other server answer is permanent.
func TestClassifyPostgres(t *testing.T) {
	for _, tc := range []struct {
		code     string
		readOnly bool
		want     Class
	}{
		{"40001", false, Transient}, {"40P01", false, Transient}, {"55P03", false, Transient},
		{"57P01", false, Transient}, {"57P02", false, Transient}, {"57P03", false, Transient},
		{"57P05", false, Transient}, {"25P03", false, Transient}, {"53300", false, Transient},
		{"08006", false, Transient}, {"08001", false, Transient},
		{"25006", false, Transient}, {"25006", true, Permanent},
		{"08007", false, Ambiguous},
		{"57P04", false, Permanent}, {"25P04", false, Permanent}, {"57014", false, Permanent},
		{"23505", false, Permanent}, {"42601", false, Permanent}, {"25P02", false, Permanent},
	} {
		if got := classify(pgErr(tc.code), tc.readOnly, nil); got != tc.want {
			t.Errorf("classify(%s, readOnlyTx %v) = %v, want %v", tc.code, tc.readOnly, got, tc.want)
		}
	}
	if got := classify(fmt.Errorf("update: %w", pgErr("40P01")), false, nil); got != Transient {
		t.Errorf("wrapped 40P01 = %v, want transient", got)
	}
}

// The read-only flag of Tx turns 1792 into the caller's own mistake.
func TestClassifyReadOnlyTx(t *testing.T) {
	e := mysqlErr(1792, "25006", "Cannot execute statement in a READ ONLY transaction")
	if got := classify(e, true, nil); got != Permanent {
		t.Errorf("1792 in our read-only tx = %v, want permanent", got)
	}
	if got := classify(e, false, nil); got != Transient {
		t.Errorf("1792 not in our read-only tx = %v, want transient", got)
	}
}
