package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// mariaDB is a private MariaDB started by mysqltest.StartMariaDBServer, the
// one way the repository starts one (scripts/mariadb-up, .ci/run and the
// tests use it too), plus an explicit buffer pool size and a higher
// connection limit, pinned to cpus with taskset.
type mariaDB struct {
	srv *mysqltest.MariaDB
	db  *sql.DB // the privileged user over TCP
}

// startMariaDB starts the server; dir, when not empty, is its directory
// (created if missing, kept after stop, and started as it is when it holds
// an earlier server's data dir).
func startMariaDB(ctx context.Context, cpus, bufferPool, dir string, logf func(string, ...any)) (*mariaDB, error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	srv, err := mysqltest.StartMariaDBServer(mysqltest.MariaDBOptions{
		Dir:  dir,
		Name: "load",
		CPUs: cpus,
		Args: []string{"--innodb-buffer-pool-size=" + bufferPool, "--max-connections=500"},
	})
	if err != nil {
		return nil, err
	}
	m := &mariaDB{srv: srv}
	m.db, err = sql.Open("mysql", m.dsn(""))
	if err != nil {
		m.stop()
		return nil, err
	}
	if err := m.db.PingContext(ctx); err != nil {
		m.stop()
		return nil, err
	}
	logf("MariaDB %s on %s (pid %d, cpus %s, innodb_buffer_pool_size=%s, files in %s)",
		m.version(), srv.Addr(), srv.PID(), cpus, bufferPool, srv.Dir())
	return m, nil
}

func (m *mariaDB) dsn(db string) string {
	return fmt.Sprintf("%s:%s@tcp(%s)/%s", mysqltest.MariaDBUser, mysqltest.MariaDBPassword, m.srv.Addr(), db)
}

func (m *mariaDB) pid() int { return m.srv.PID() }

func (m *mariaDB) version() string {
	var v string
	if m.db != nil {
		_ = m.db.QueryRow("SELECT VERSION()").Scan(&v)
	}
	return v
}

// resetDatabase drops and creates database name.
func (m *mariaDB) resetDatabase(ctx context.Context, name string) error {
	if _, err := m.db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
		return err
	}
	_, err := m.db.ExecContext(ctx, "CREATE DATABASE "+name)
	return err
}

// truncateData empties the span tables of database name (spans,
// annotations, the service and tag indexes of the schema additions,
// dependencies),
// keeping the schema and the name table. The load test calls it before each
// interleaved run: one run stores about 400,000 spans per configuration at
// this machine's rates, and a database that keeps growing from run to run
// makes every later step slower than the one before (bigger indexes, more
// pages to decompress: Zipkin's tables are ROW_FORMAT=COMPRESSED), so the
// runs would measure the data's growth instead of the server.
func (m *mariaDB) truncateData(ctx context.Context, name string) error {
	for _, t := range []string{"zipkin_spans", "zipkin_annotations", "zipkin_service_spans", "zipkin_tags", "zipkin_dependencies"} {
		if _, err := m.db.ExecContext(ctx, "TRUNCATE TABLE "+name+"."+t); err != nil {
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == 1146 { // no such table (no schema additions)
				continue
			}
			return err
		}
	}
	return nil
}

// countSpans returns the rows of zipkin_spans in database name.
func (m *mariaDB) countSpans(ctx context.Context, name string) (int64, error) {
	var n int64
	err := m.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+name+".zipkin_spans").Scan(&n)
	var me interface{ Error() string }
	if errors.As(err, &me) && strings.Contains(err.Error(), "doesn't exist") {
		return 0, nil
	}
	return n, err
}

func (m *mariaDB) stop() {
	if m.db != nil {
		m.db.Close()
	}
	if err := m.srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
	}
}
