package mysqltest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Users that StartMariaDB creates. Both exist @'127.0.0.1' and @'localhost'.
const (
	// MariaDBUser has ALL PRIVILEGES ON *.* WITH GRANT OPTION.
	MariaDBUser     = "sqlpool"
	MariaDBPassword = "sqlpool"
	// MariaDBUnprivilegedUser has only data privileges on database test
	// (SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER,
	// CREATE TEMPORARY TABLES, LOCK TABLES), so read_only applies to it.
	MariaDBUnprivilegedUser     = "sqlpool_ro"
	MariaDBUnprivilegedPassword = "sqlpool_ro"
)

// MariaDBReadyTimeout bounds how long StartMariaDB and (*MariaDB).Start wait
// for the server to accept connections.
const MariaDBReadyTimeout = 60 * time.Second

// MariaDB is a private mariadbd started by StartMariaDB for one test.
type MariaDB struct {
	datadir string
	tmpdir  string // private tmpdir (--tmpdir), beside datadir
	sockdir string
	port    int
	bin     string

	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has been waited for
	waitErr error
}

// StartMariaDB starts a private mariadbd for one test: a temporary data dir
// under tb.TempDir, a free port on 127.0.0.1, --user=root, and a process
// group of its own. It creates database test, a privileged TCP user
// (MariaDBUser) and an unprivileged one (MariaDBUnprivilegedUser), and stops
// the server in tb.Cleanup. When mariadbd is not installed it skips the
// test, or fails it when SQLPOOL_REQUIRE_MARIADB=1.
func StartMariaDB(tb testing.TB) *MariaDB {
	tb.Helper()
	bin := lookPath("mariadbd")
	installDB := lookPath("mariadb-install-db")
	if bin == "" || installDB == "" {
		skipOrFail(tb, "mariadbd or mariadb-install-db is not installed (apt-get install mariadb-server)")
		return nil
	}
	dir := tb.TempDir()
	m := &MariaDB{datadir: filepath.Join(dir, "data"), tmpdir: filepath.Join(dir, "tmp"), bin: bin}
	// Each server gets its own tmpdir: with the default (/tmp) servers started at the same
	// time by packages tested in parallel collide on internal temporary table names
	// ("Error on delete of '/tmp/#sql-temptable-…'" from mariadb-install-db).
	if err := os.Mkdir(m.tmpdir, 0o700); err != nil {
		tb.Fatalf("mysqltest: %v", err)
	}
	// Unix socket paths are limited to ~107 bytes; keep the socket short.
	sockdir, err := os.MkdirTemp("", "mysqltest-")
	if err != nil {
		tb.Fatalf("mysqltest: %v", err)
	}
	m.sockdir = sockdir
	tb.Cleanup(func() { _ = os.RemoveAll(sockdir) })

	out, err := exec.Command(installDB, "--no-defaults", "--user=root", "--datadir="+m.datadir,
		"--tmpdir="+m.tmpdir, "--auth-root-authentication-method=socket", "--skip-test-db").CombinedOutput()
	if err != nil {
		tb.Fatalf("mysqltest: mariadb-install-db: %v\n%s", err, out)
	}
	initFile := filepath.Join(m.datadir, "mysqltest-init.sql")
	if err := os.WriteFile(initFile, []byte(mariaDBInitSQL), 0o600); err != nil {
		tb.Fatalf("mysqltest: %v", err)
	}

	tb.Cleanup(func() { m.Stop(tb) })
	// The port is chosen free but may be taken before mariadbd binds it.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		if m.port, err = freePort(); err != nil {
			tb.Fatalf("mysqltest: %v", err)
		}
		if lastErr = m.start("--init-file=" + initFile); lastErr == nil {
			return m
		}
		if !strings.Contains(m.errorLog(), "Address already in use") {
			break
		}
	}
	tb.Fatalf("mysqltest: start mariadbd: %v\n%s", lastErr, m.errorLogTail())
	return nil
}

const mariaDBInitSQL = `CREATE DATABASE IF NOT EXISTS test;
CREATE USER IF NOT EXISTS 'sqlpool'@'127.0.0.1' IDENTIFIED BY 'sqlpool';
CREATE USER IF NOT EXISTS 'sqlpool'@'localhost' IDENTIFIED BY 'sqlpool';
GRANT ALL PRIVILEGES ON *.* TO 'sqlpool'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'sqlpool'@'localhost' WITH GRANT OPTION;
CREATE USER IF NOT EXISTS 'sqlpool_ro'@'127.0.0.1' IDENTIFIED BY 'sqlpool_ro';
CREATE USER IF NOT EXISTS 'sqlpool_ro'@'localhost' IDENTIFIED BY 'sqlpool_ro';
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER, CREATE TEMPORARY TABLES, LOCK TABLES ON test.* TO 'sqlpool_ro'@'127.0.0.1';
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER, CREATE TEMPORARY TABLES, LOCK TABLES ON test.* TO 'sqlpool_ro'@'localhost';
`

// DSN returns the DSN of the privileged TCP user, database test.
func (m *MariaDB) DSN() string { return m.dsn(MariaDBUser, MariaDBPassword) }

// UnprivilegedDSN returns the DSN of the unprivileged TCP user, database test.
func (m *MariaDB) UnprivilegedDSN() string {
	return m.dsn(MariaDBUnprivilegedUser, MariaDBUnprivilegedPassword)
}

func (m *MariaDB) dsn(user, pass string) string {
	return m.config(user, pass).FormatDSN()
}

func (m *MariaDB) config(user, pass string) *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = user, pass
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", m.Addr(), "test"
	return cfg
}

// Addr returns the server's TCP address, "127.0.0.1:port".
func (m *MariaDB) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.port)) }

// DataDir returns the server's data directory.
func (m *MariaDB) DataDir() string { return m.datadir }

// Socket returns the path of the server's unix socket.
func (m *MariaDB) Socket() string { return filepath.Join(m.sockdir, "sock") }

// ErrorLogPath returns the path of the server's error log.
func (m *MariaDB) ErrorLogPath() string { return filepath.Join(m.datadir, "mysqltest-error.log") }

// Running reports whether the server process is running.
func (m *MariaDB) Running() bool {
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// Stop stops the server (SIGTERM, then wait; SIGKILL to its process group
// after 30 s) and keeps its data dir. Stopping a stopped server does nothing.
func (m *MariaDB) Stop(tb testing.TB) {
	tb.Helper()
	if err := m.stop(); err != nil {
		tb.Errorf("mysqltest: stop mariadbd: %v", err)
	}
}

// Start starts the server again on the same port and data dir and waits
// until it accepts connections. Starting a running server does nothing.
func (m *MariaDB) Start(tb testing.TB) {
	tb.Helper()
	if m.Running() {
		return
	}
	if err := m.start(); err != nil {
		tb.Fatalf("mysqltest: start mariadbd: %v\n%s", err, m.errorLogTail())
	}
}

// Restart stops the server and starts it again on the same port and data
// dir; connections open before the restart are broken.
func (m *MariaDB) Restart(tb testing.TB) {
	tb.Helper()
	m.Stop(tb)
	m.Start(tb)
}

// Exec runs query as the privileged user (ALL PRIVILEGES ON *.*) on a
// connection of its own, failing the test on error.
func (m *MariaDB) Exec(tb testing.TB, query string) {
	tb.Helper()
	db, err := sql.Open("mysql", m.DSN())
	if err != nil {
		tb.Fatalf("mysqltest: %v", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		_, err := db.ExecContext(ctx, query)
		if err == nil {
			return
		}
		// 1040 too many connections: a test that lowered max_connections restores it while
		// the connections it filled the server with are still closing. Wait for them.
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1040 && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		tb.Fatalf("mysqltest: exec %q: %v", query, err)
	}
}

func (m *MariaDB) start(extra ...string) error {
	args := []string{
		"--no-defaults",
		"--user=root",
		"--datadir=" + m.datadir,
		"--tmpdir=" + m.tmpdir,
		"--socket=" + m.Socket(),
		"--pid-file=" + filepath.Join(m.datadir, "mysqltest.pid"),
		"--log-error=" + m.ErrorLogPath(),
		"--port=" + strconv.Itoa(m.port),
		"--bind-address=127.0.0.1",
		"--skip-networking=0",
		"--skip-name-resolve",
		"--skip-log-bin",
		"--performance-schema=OFF",
	}
	args = append(args, extra...)
	cmd := exec.Command(m.bin, args...)
	// A process group of its own keeps terminal signals away from it; the
	// parent-death signal stops it if the test process dies without cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Stdout and stderr go to the error log's directory as a file, so that
	// no copying goroutines are needed.
	out, err := os.OpenFile(filepath.Join(m.datadir, "mysqltest-stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	m.cmd = cmd
	m.exited = make(chan struct{})
	m.waitErr = nil
	exited := m.exited
	go func() {
		m.waitErr = cmd.Wait()
		close(exited)
	}()
	if err := m.waitReady(); err != nil {
		_ = m.stop()
		return err
	}
	return nil
}

// waitReady waits until the privileged user can ping the server over TCP.
func (m *MariaDB) waitReady() error {
	deadline := time.Now().Add(MariaDBReadyTimeout)
	cfg := m.config(MariaDBUser, MariaDBPassword)
	cfg.Timeout = 2 * time.Second
	cfg.Logger = mysql.Logger(nopLogger{})
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	for {
		select {
		case <-m.exited:
			return fmt.Errorf("mariadbd exited: %v", m.waitErr)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mariadbd not ready after %v: %v", MariaDBReadyTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (m *MariaDB) stop() error {
	if m.cmd == nil {
		return nil
	}
	select {
	case <-m.exited:
		return nil
	default:
	}
	pid := m.cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGTERM)
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-m.exited:
		return nil
	case <-t.C:
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-m.exited
	return errors.New("mariadbd did not stop within 30s of SIGTERM; killed")
}

func (m *MariaDB) errorLog() string {
	b, _ := os.ReadFile(m.ErrorLogPath())
	return string(b)
}

func (m *MariaDB) errorLogTail() string {
	s := m.errorLog()
	if len(s) > 4000 {
		s = "..." + s[len(s)-4000:]
	}
	return "mariadbd error log (" + m.ErrorLogPath() + "):\n" + s
}

// lookPath finds name on PATH or in the sbin directories, which a non-login
// root shell may lack; it returns "" when name is not found.
func lookPath(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/sbin", "/usr/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// nopLogger discards go-sql-driver/mysql's log output while waiting for a
// server that is still starting.
type nopLogger struct{}

func (nopLogger) Print(...any) {}
