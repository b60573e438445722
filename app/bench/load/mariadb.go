package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// mariaDB is a private MariaDB started the way .ci/run starts it
// (mariadb-install-db, then mariadbd --no-defaults on 127.0.0.1 with the
// binary log and performance schema off), plus an explicit buffer pool
// size, pinned to cpus with taskset.
type mariaDB struct {
	dir  string
	port int
	cmd  *exec.Cmd
	db   *sql.DB // root-equivalent user "sqlpool" over TCP
}

const mdbUser, mdbPass = "sqlpool", "sqlpool"

func startMariaDB(ctx context.Context, cpus, bufferPool string, logf func(string, ...any)) (*mariaDB, error) {
	for _, b := range []string{"mariadbd", "mariadb-install-db", "mariadb", "mariadb-admin"} {
		if _, err := exec.LookPath(b); err != nil {
			return nil, fmt.Errorf("%s not found on PATH (add /usr/sbin, or apt-get install mariadb-server mariadb-client as .ci/run does): %w", b, err)
		}
	}
	dir, err := os.MkdirTemp("", "sqlpool-load-mariadb.")
	if err != nil {
		return nil, err
	}
	m := &mariaDB{dir: dir}
	data := filepath.Join(dir, "data")
	inst := exec.CommandContext(ctx, "mariadb-install-db", "--no-defaults", "--user=root", "--datadir="+data,
		"--auth-root-authentication-method=socket", "--skip-test-db")
	if out, err := inst.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("mariadb-install-db: %v\n%s", err, out)
	}
	sock := filepath.Join(dir, "sock")
	for attempt := 0; attempt < 5; attempt++ {
		m.port = 20000 + rand.IntN(40000)
		if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(m.port)); err == nil {
			c.Close()
			continue
		}
		args := []string{"-c", cpus, "mariadbd", "--no-defaults", "--user=root", "--datadir=" + data,
			"--socket=" + sock, "--pid-file=" + filepath.Join(dir, "pid"), "--log-error=" + filepath.Join(dir, "error.log"),
			"--port=" + strconv.Itoa(m.port), "--bind-address=127.0.0.1", "--skip-networking=0",
			"--skip-name-resolve", "--skip-log-bin", "--performance-schema=OFF",
			"--innodb-buffer-pool-size=" + bufferPool, "--max-connections=500"}
		m.cmd = exec.Command("taskset", args...)
		m.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := m.cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("starting mariadbd: %w", err)
		}
		exited := make(chan struct{})
		go func() { _ = m.cmd.Wait(); close(exited) }()
		ready := false
		for i := 0; i < 600 && !ready; i++ {
			select {
			case <-exited:
				i = 600
				continue
			case <-time.After(100 * time.Millisecond):
			}
			ready = exec.Command("mariadb-admin", "--no-defaults", "--protocol=socket", "-S", sock, "-uroot", "ping").Run() == nil
		}
		if ready {
			break
		}
		log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		if strings.Contains(string(log), "Address already in use") {
			continue
		}
		m.stop()
		return nil, fmt.Errorf("mariadbd did not start; error log:\n%s", log)
	}
	setup := fmt.Sprintf(`CREATE USER '%[1]s'@'127.0.0.1' IDENTIFIED BY '%[2]s';
GRANT ALL PRIVILEGES ON *.* TO '%[1]s'@'127.0.0.1' WITH GRANT OPTION;`, mdbUser, mdbPass)
	cli := exec.Command("mariadb", "--no-defaults", "--protocol=socket", "-S", sock, "-uroot")
	cli.Stdin = strings.NewReader(setup)
	if out, err := cli.CombinedOutput(); err != nil {
		m.stop()
		return nil, fmt.Errorf("creating the benchmark user: %v\n%s", err, out)
	}
	m.db, err = sql.Open("mysql", m.dsn(""))
	if err != nil {
		m.stop()
		return nil, err
	}
	logf("MariaDB %s on 127.0.0.1:%d (pid %d, cpus %s, innodb_buffer_pool_size=%s, data in %s)",
		m.version(), m.port, m.cmd.Process.Pid, cpus, bufferPool, dir)
	return m, nil
}

func (m *mariaDB) dsn(db string) string {
	return fmt.Sprintf("%s:%s@tcp(127.0.0.1:%d)/%s", mdbUser, mdbPass, m.port, db)
}

func (m *mariaDB) pid() int {
	if m.cmd == nil || m.cmd.Process == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

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
// annotations, the service index of the schema additions, dependencies),
// keeping the schema and the name table. The load test calls it before each
// interleaved run: one run stores about 400,000 spans per configuration at
// this machine's rates, and a database that keeps growing from run to run
// makes every later step slower than the one before (bigger indexes, more
// pages to decompress: Zipkin's tables are ROW_FORMAT=COMPRESSED), so the
// runs would measure the data's growth instead of the server.
func (m *mariaDB) truncateData(ctx context.Context, name string) error {
	for _, t := range []string{"zipkin_spans", "zipkin_annotations", "zipkin_service_spans", "zipkin_dependencies"} {
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
	if m.cmd != nil && m.cmd.Process != nil {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		for i := 0; i < 300; i++ {
			if m.cmd.Process.Signal(syscall.Signal(0)) != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		_ = m.cmd.Process.Kill()
	}
	os.RemoveAll(m.dir)
}
