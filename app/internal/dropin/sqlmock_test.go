package dropin_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/txstate"
)

// mockConnector opens go-sqlmock connections: every Connect returns the one mock connection of
// its DSN, as go-sqlmock's driver does for every Open of one DSN.
type mockConnector struct {
	drv driver.Driver
	dsn string
}

func (c mockConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c mockConnector) Driver() driver.Driver                        { return c.drv }

var mockSeq atomic.Int64

// The baseline the mock server reports: database app, autocommit on, REPEATABLE-READ,
// read-write, and the session variables of a MariaDB connection.
var mockBaseline = []driver.Value{
	"app", int64(1), "STRICT_TRANS_TABLES", "REPEATABLE-READ", int64(0),
	"SYSTEM", "utf8mb4", "utf8mb4", "utf8mb4", "utf8mb4_general_ci", int64(28800), int64(28800),
	"max_statement_time", "0.000000",
	int64(1), int64(1), int64(50), int64(86400), int64(1048576), "18446744073709551615", int64(4), int64(0),
	int64(1), int64(0), int64(0), int64(1024), int64(30), int64(60), "en_US",
}

func expectBaseline(mock sqlmock.Sqlmock) {
	cols := make([]string, txstate.BaselineColumns)
	for i := range cols {
		cols[i] = fmt.Sprint("c", i)
	}
	mock.ExpectQuery(txstate.BaselineQuery).WillReturnRows(sqlmock.NewRows(cols).AddRow(mockBaseline...))
}

// mockPool is a pool of one connection in front of go-sqlmock: every statement the pool sends
// must be expected, in order. Pings are monitored too, and none is expected: the bypass window
// is an hour.
type mockPool struct {
	mock sqlmock.Sqlmock
	p    *pool.Pool
	db   *sql.DB
}

func newMockPool(t *testing.T) *mockPool {
	t.Helper()
	dsn := fmt.Sprint("sqlpool-dropin-", mockSeq.Add(1))
	mdb, mock, err := sqlmock.NewWithDSN(dsn,
		sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual), sqlmock.MonitorPingsOption(true))
	if err != nil {
		t.Fatal(err)
	}
	expectBaseline(mock) // the pool's first connection, dialled in New
	p, err := pool.New(mockConnector{mdb.Driver(), dsn}, pool.Config{
		MaxConns: 1, AliveBypassWindow: time.Hour, AcquireTimeout: 10 * time.Second, Logger: quietLog,
	})
	if err != nil {
		t.Fatal(err)
	}
	m := &mockPool{mock: mock, p: p, db: p.OpenDB()}
	t.Cleanup(func() {
		m.mock.ExpectClose()
		_ = m.db.Close()
		if err := p.Close(); err != nil {
			t.Errorf("pool Close: %v", err)
		}
		if err := m.mock.ExpectationsWereMet(); err != nil {
			t.Errorf("at Close: %v", err)
		}
		_ = mdb.Close() // go-sqlmock's own handle; its Close is not an expectation here
	})
	if err := mock.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
	return m
}

var errCommit = errors.New("commit failed: connection lost")

// borrow runs the steps on one borrowed connection and returns it. A step is a statement
// (sent with Exec, or Query when it starts with SELECT), or one of "<begin>", "<commit>",
// "<rollback>", "<commit fails>", "<raw>" (sql.Conn.Raw and pool.Unwrap). The expectations for them must be set.
func (m *mockPool) borrow(t *testing.T, steps []string) {
	t.Helper()
	ctx := context.Background()
	c, err := m.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var tx *sql.Tx
	for _, s := range steps {
		switch s {
		case "<begin>":
			tx, err = c.BeginTx(ctx, nil)
		case "<commit>":
			err = tx.Commit()
		case "<rollback>":
			err = tx.Rollback()
		case "<commit fails>":
			if err = tx.Commit(); errors.Is(err, errCommit) {
				err = nil
			}
		case "<raw>":
			// Reaching the driver's connection makes the session state unknown.
			err = c.Raw(func(dc any) error { _ = pool.Unwrap(dc); return nil })
		default:
			if strings.HasPrefix(s, "SELECT") {
				var rows *sql.Rows
				if rows, err = c.QueryContext(ctx, s); err == nil {
					err = rows.Close()
				}
			} else {
				_, err = c.ExecContext(ctx, s)
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// expectSteps sets the expectations for the borrower's own steps.
func expectSteps(mock sqlmock.Sqlmock, steps []string) {
	for _, s := range steps {
		switch s {
		case "<begin>":
			mock.ExpectBegin()
		case "<commit>":
			mock.ExpectCommit()
		case "<rollback>":
			mock.ExpectRollback()
		case "<commit fails>":
			mock.ExpectCommit().WillReturnError(errCommit)
		case "<raw>":
		default:
			if strings.HasPrefix(s, "SELECT") {
				mock.ExpectQuery(s).WillReturnRows(sqlmock.NewRows([]string{"x"}).AddRow(int64(1)))
			} else {
				mock.ExpectExec(s).WillReturnResult(sqlmock.NewResult(0, 0))
			}
		}
	}
}

const (
	mockIsoTail = " /*M!, SESSION tx_isolation='REPEATABLE-READ', SESSION tx_read_only=0 */" +
		" /*!50720 , SESSION transaction_isolation='REPEATABLE-READ', SESSION transaction_read_only=0 */"
	mockSetTx       = "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ WRITE"
	mockSetCharsets = "SET NAMES 'utf8mb4' COLLATE 'utf8mb4_general_ci', collation_connection='utf8mb4_general_ci'"
)

// discard is the expected "plan" of a connection that is closed and replaced.
var discard = []string{"<discard>"}

// The exact statement sequence the pool sends for every row of docs/sessions.md's table: the
// borrower's own statements, then nothing, the release plan (ROLLBACK first, then resets), or
// a close followed by the new connection's baseline query.
func TestSQLMockStatementSequence(t *testing.T) {
	cases := []struct {
		class string
		steps []string
		plan  []string // nil: nothing
	}{
		{"clean cycle", nil, nil},
		{"empty", []string{""}, nil},
		{"query", []string{"SELECT a FROM t WHERE id = 1", "INSERT INTO t VALUES (1)", "UPDATE t SET a = 2"}, nil},
		{"user-lock", []string{"SELECT GET_LOCK('job', 10)"}, []string{"SELECT RELEASE_ALL_LOCKS()"}},
		{"begin", []string{"BEGIN", "INSERT INTO t VALUES (1)"}, []string{"ROLLBACK"}},
		{"begin without statements", []string{"START TRANSACTION READ ONLY"}, []string{"ROLLBACK"}},
		{"driver Begin, committed", []string{"<begin>", "INSERT INTO t VALUES (1)", "<commit>"}, nil},
		{"driver Begin, rolled back", []string{"<begin>", "<rollback>"}, nil},
		{"driver Begin, commit failed", []string{"<begin>", "INSERT INTO t VALUES (1)", "<commit fails>"}, []string{"ROLLBACK"}},
		{"commit", []string{"BEGIN", "INSERT INTO t VALUES (1)", "COMMIT"}, nil},
		{"rollback", []string{"START TRANSACTION", "ROLLBACK WORK"}, nil},
		{"chain", []string{"BEGIN", "COMMIT AND CHAIN"}, []string{"ROLLBACK"}},
		{"savepoint", []string{"BEGIN", "SAVEPOINT a", "ROLLBACK TO SAVEPOINT a"}, []string{"ROLLBACK"}},
		{"xa-start", []string{"XA START 'x'"}, discard},
		{"xa-prepare", []string{"XA START 'x'", "XA END 'x'", "XA PREPARE 'x'"}, discard},
		{"xa-finish", []string{"XA START 'x'", "XA END 'x'", "XA COMMIT 'x' ONE PHASE"}, nil},
		{"set-user-var", []string{"SET @a = 1"}, []string{"SET @`a`=NULL"}},
		{"set-autocommit", []string{"SET autocommit = 0", "INSERT INTO t VALUES (1)"}, []string{"ROLLBACK", "SET autocommit=1"}},
		{"set-autocommit, no statement after", []string{"SET autocommit = 0"}, []string{"SET autocommit=1"}},
		{"set-autocommit, set back", []string{"SET autocommit = 0", "SET autocommit = 1"}, nil},
		{"set-transaction", []string{"SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"}, []string{mockSetTx}},
		{"set-transaction, next transaction only", []string{"SET TRANSACTION READ ONLY"}, []string{mockSetTx}},
		{"set-transaction with autocommit", []string{"SET autocommit = 0, tx_isolation = 'SERIALIZABLE'"}, []string{"SET autocommit=1" + mockIsoTail}},
		{"set-variable", []string{"SET time_zone = '+00:00'"}, []string{"SET time_zone='SYSTEM'"}},
		{"set-variable, then DEFAULT", []string{"SET time_zone = '+00:00'", "SET time_zone = DEFAULT"}, []string{"SET time_zone='SYSTEM'"}},
		{"set-variable, the value already there", []string{"SET time_zone = 'SYSTEM'", "SET NAMES utf8mb4 COLLATE utf8mb4_general_ci"}, nil},
		{"set-variable, NAMES", []string{"SET NAMES latin1"}, []string{mockSetCharsets}},
		{"set-variable, several", []string{"SET sql_mode = 'ANSI', max_statement_time = 5", "SET wait_timeout = 60, interactive_timeout = 60"},
			[]string{"SET sql_mode='STRICT_TRANS_TABLES', max_statement_time=0.000000, wait_timeout=28800, interactive_timeout=28800"}},
		{"set-variable with autocommit and isolation", []string{"SET autocommit = 0", "SET SESSION TRANSACTION READ ONLY", "SET time_zone = '+00:00'"},
			[]string{"SET time_zone='SYSTEM', autocommit=1" + mockIsoTail}},
		{"set-other", []string{"SET foreign_key_checks = 0"}, discard},
		{"set-other, global", []string{"SET GLOBAL time_zone = '+00:00'"}, discard},
		{"SET STATEMENT ... FOR", []string{"SET STATEMENT max_statement_time = 1 FOR SELECT 1"}, nil},
		{"use", []string{"USE reporting"}, []string{"USE `app`"}},
		{"use the baseline database", []string{"USE app"}, nil},
		{"lock-tables", []string{"LOCK TABLES t WRITE"}, []string{"UNLOCK TABLES"}},
		{"unlock-tables", []string{"LOCK TABLES t WRITE", "UNLOCK TABLES"}, nil},
		{"create-temporary", []string{"CREATE TEMPORARY TABLE scratch (a INT)"}, []string{"DROP TEMPORARY TABLE IF EXISTS scratch"}},
		{"drop-temporary", []string{"CREATE TEMPORARY TABLE scratch (a INT)", "DROP TEMPORARY TABLE scratch"}, []string{"DROP TEMPORARY TABLE IF EXISTS scratch"}},
		{"ddl", []string{"BEGIN", "INSERT INTO t VALUES (1)", "CREATE TABLE u (a INT)"}, nil},
		{"ddl, DROP DATABASE", []string{"DROP DATABASE app"}, []string{"USE `app`"}},
		{"call", []string{"CALL p()"}, discard},
		{"prepared", []string{"PREPARE s FROM 'SELECT 1'"}, discard},
		{"handler", []string{"HANDLER t OPEN"}, discard},
		{"multi", []string{"SELECT 1; SELECT 2"}, discard},
		{"unknown", []string{"FLUSH TABLES"}, discard},
		{"Raw() and pool.Unwrap", []string{"<raw>"}, discard},
		{"everything at once", []string{
			"SET autocommit = 0", "LOCK TABLES t WRITE", "SELECT GET_LOCK('job', 1)", "USE reporting",
			"CREATE TEMPORARY TABLE app.scratch (a INT)", "SET time_zone = '+00:00'", "SET SESSION TRANSACTION READ ONLY",
		}, []string{
			"ROLLBACK", "UNLOCK TABLES", "SELECT RELEASE_ALL_LOCKS()", "USE `app`", "DROP TEMPORARY TABLE IF EXISTS app.scratch",
			"SET time_zone='SYSTEM', autocommit=1" + mockIsoTail,
		}},
	}
	for _, c := range cases {
		t.Run(c.class, func(t *testing.T) {
			m := newMockPool(t)
			before := m.p.Stats()
			expectSteps(m.mock, c.steps)
			discarded := len(c.plan) == 1 && c.plan[0] == discard[0]
			switch {
			case discarded:
				m.mock.ExpectClose()
				expectBaseline(m.mock) // the creator's replacement: the same mock connection
			default:
				for _, q := range c.plan {
					m.mock.ExpectExec(q).WillReturnResult(sqlmock.NewResult(0, 0))
				}
			}
			m.borrow(t, c.steps)
			wantClosed := uint64(0)
			if discarded {
				wantClosed = 1
			}
			waitFor(t, "the pool has its connection idle again", func() bool {
				s := m.p.Stats()
				return s.Idle == 1 && s.Closed == before.Closed+wantClosed && s.Created == before.Created+wantClosed
			})
			if err := m.mock.ExpectationsWereMet(); err != nil {
				t.Fatal(err)
			}
			// Nothing unexpected either: an unexpected statement fails at go-sqlmock, which makes
			// the pool close the connection, which these counts would show.
			s := m.p.Stats()
			if s.Closed != before.Closed+wantClosed || s.Created != before.Created+wantClosed || s.Validations != before.Validations {
				t.Fatalf("stats after the release: %+v (before %+v)", s, before)
			}
			// And the next clean borrow sends nothing.
			m.borrow(t, nil)
			if err := m.mock.ExpectationsWereMet(); err != nil {
				t.Fatal(err)
			}
			if s2 := m.p.Stats(); s2.Closed != s.Closed || s2.ReleasePlans != s.ReleasePlans {
				t.Fatalf("a clean borrow after the plan did something: %+v (before %+v)", s2, s)
			}
		})
	}
}
