package validate_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/validate"
)

// The table-driven tests in fatal_test.go check every row of Codes() against the SQLSTATE of the
// MySQL 8.0 server error reference (1047, 1053, 1077, 1079, 1080, 1152-1161, 1184, 1290, 1836,
// 4031) and MariaDB's error codes (1927). This test makes a real MariaDB send the codes it can
// be made to send, and checks that the number and SQLSTATE on the wire are the table's and that
// Check gives the table's verdict. The others are not reproducible on demand: shutdown and
// forced-close notices (1053, 1077, 1079, 1080) go to the error log while clients see a dropped
// socket (checked below as what they do see), 1152/1154-1161/1184 are logged for aborted
// connections, 1047 needs Galera or a raw protocol command, and 1836 and MySQL's 4031 need
// MySQL.

type liveNopLogger struct{}

func (liveNopLogger) Print(...any) {}

func liveDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = liveNopLogger{} // the dropped sockets below are on purpose
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestServerErrorsOnMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: fault test: provokes server errors on a private mariadbd")
	}
	m := mysqltest.StartMariaDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := liveDB(t, m.DSN())
	ro := liveDB(t, m.UnprivilegedDSN())
	m.Exec(t, "CREATE TABLE test.live (id INT PRIMARY KEY) ENGINE=InnoDB")
	m.Exec(t, "CREATE TABLE test.live_trg (id INT)")
	rows := map[uint16]validate.Code{}
	for _, c := range validate.Codes() {
		rows[c.Number] = c
	}
	insert := func(c *sql.Conn) error {
		_, err := c.ExecContext(ctx, "INSERT INTO live VALUES (1)")
		return err
	}

	tests := []struct {
		name    string
		number  uint16
		state   string // expected SQLSTATE for numbers not in the table
		session validate.Session
		fatal   bool // expected; a fatal row must also give the table's reason and ServerGone
		produce func(t *testing.T) error
	}{
		{name: "KILL of the own connection", number: 1927, fatal: true, produce: func(t *testing.T) error {
			c, err := admin.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var id int64
			if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				t.Fatal(err)
			}
			_, err = c.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
			return err
		}},
		{name: "write on a server switched to read_only", number: 1290, fatal: true, produce: func(t *testing.T) error {
			m.Exec(t, "SET GLOBAL read_only = 1")
			defer m.Exec(t, "SET GLOBAL read_only = 0")
			c, err := ro.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			return insert(c)
		}},
		{name: "write in a read-only transaction, judged without session knowledge (a failover)", number: 1792, fatal: true, produce: func(t *testing.T) error {
			c, err := ro.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.ExecContext(ctx, "START TRANSACTION READ ONLY"); err != nil {
				t.Fatal(err)
			}
			defer c.ExecContext(ctx, "ROLLBACK") //nolint:errcheck
			return insert(c)
		}},
		{name: "write in the borrower's own read-only transaction", number: 1792, session: validate.Session{ReadOnlyTx: true}, produce: func(t *testing.T) error {
			tx, err := ro.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback() //nolint:errcheck
			_, err = tx.ExecContext(ctx, "INSERT INTO live VALUES (2)")
			return err
		}},
		{name: "packet bigger than max_allowed_packet", number: 1153, fatal: true, produce: func(t *testing.T) error {
			m.Exec(t, "SET GLOBAL max_allowed_packet = 1024")
			defer m.Exec(t, "SET GLOBAL max_allowed_packet = 16777216")
			db := liveDB(t, m.DSN()) // new sessions take the new limit
			_, err := db.ExecContext(ctx, "DO '"+strings.Repeat("x", 100_000)+"'")
			return err
		}},
		{name: "on MariaDB a trigger error, not an idle timeout", number: 4031, produce: func(t *testing.T) error {
			_, err := admin.ExecContext(ctx, "CREATE TRIGGER live_trg2 BEFORE INSERT ON live_trg FOR EACH ROW FOLLOWS no_such_trigger SET @x = 1")
			return err
		}},
		{name: "too many connections (class 08, not in the table)", number: 1040, state: "08004", fatal: true, produce: func(t *testing.T) error {
			m.Exec(t, "SET GLOBAL max_connections = 10") // MariaDB's minimum
			defer m.Exec(t, "SET GLOBAL max_connections = 151")
			var held []*sql.Conn
			defer func() {
				for _, c := range held {
					_ = c.Close()
				}
				ro.SetMaxIdleConns(0) // close them, not just park them: the restore needs a slot
				ro.SetMaxIdleConns(2)
			}()
			for range 20 {
				c, err := ro.Conn(ctx)
				if err != nil {
					return err
				}
				held = append(held, c)
			}
			t.Fatal("20 connections opened with max_connections = 10")
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d %s", tt.number, tt.name), func(t *testing.T) {
			err := tt.produce(t)
			var me *mysql.MySQLError
			if !errors.As(err, &me) || me.Number != tt.number {
				t.Fatalf("got %v; want server error %d", err, tt.number)
			}
			state := string(me.SQLState[:])
			row, inTable := rows[tt.number]
			want := tt.state
			if inTable {
				want = row.SQLState
			}
			if state != want {
				t.Fatalf("the server sent %d with SQLSTATE %s; the table says %s", tt.number, state, want)
			}
			v := validate.Check(err, tt.session)
			if v.Fatal != tt.fatal {
				t.Fatalf("Check(%v, %+v) = %+v; want fatal=%v", err, tt.session, v, tt.fatal)
			}
			if tt.fatal && inTable && (v.Reason != row.Reason || v.ServerGone != row.ServerGone) {
				t.Fatalf("Check(%v) = %+v; want the table's reason %q and ServerGone=%v", err, v, row.Reason, row.ServerGone)
			}
			t.Logf("%d (%s) %q → %+v", me.Number, state, me.Message, v)
		})
	}

	// What clients see when the server drops them without an error packet.
	t.Run("idle connection killed", func(t *testing.T) {
		c, err := ro.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var id int64
		if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; {
			var n int
			if err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("thread %d still in the process list", id)
			}
			time.Sleep(5 * time.Millisecond)
		}
		err = c.PingContext(ctx)
		if v := validate.Check(err, validate.Session{}); !v.Fatal || !v.ServerGone {
			t.Fatalf("ping on a killed connection: %v → %+v; want fatal and ServerGone", err, v)
		}
		t.Logf("ping on a killed idle connection: %v → %+v", err, validate.Check(err, validate.Session{}))
	})
	t.Run("server stopped", func(t *testing.T) {
		c, err := ro.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		m.Stop(t)
		err = c.PingContext(ctx)
		if v := validate.Check(err, validate.Session{}); !v.Fatal || !v.ServerGone {
			t.Fatalf("ping after shutdown: %v → %+v; want fatal and ServerGone", err, v)
		}
		t.Logf("ping on a connection across shutdown: %v → %+v", err, validate.Check(err, validate.Session{}))
		err = liveDB(t, m.DSN()).PingContext(ctx)
		if v := validate.Check(err, validate.Session{}); !v.Fatal || !v.ServerGone {
			t.Fatalf("dial to a stopped server: %v → %+v; want fatal and ServerGone", err, v)
		}
		t.Logf("dial to the stopped server: %v → %+v", err, validate.Check(err, validate.Session{}))
	})
}
