package mysqltest

import (
	"bytes"
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

// Users that StartMariaDB and StartMariaDBServer create. Both exist
// @'127.0.0.1' and @'localhost'.
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

// MariaDBReadyTimeout bounds how long StartMariaDB, StartMariaDBServer and
// (*MariaDB).Start wait for the server to accept connections.
const MariaDBReadyTimeout = 60 * time.Second

// mariaDBStopTimeout is how long a stop waits after SIGTERM before it kills
// the server's process group.
const mariaDBStopTimeout = 30 * time.Second

// mariaDBMarker is the file that marks a directory made by
// StartMariaDBServer; StopMariaDBDir removes only directories that hold it.
const mariaDBMarker = "sqlpool-mariadb"

// MariaDBOptions configures StartMariaDBServer. The zero value starts a
// server in a fresh temporary directory, tied to the calling process, with
// no extra mariadbd options and no CPU pinning.
type MariaDBOptions struct {
	// Dir is an existing empty directory for the server's files: data dir,
	// tmpdir, unix socket, pid file and logs. Its path must be short (a unix
	// socket path is limited to about 107 bytes). When Dir is empty,
	// StartMariaDBServer creates a directory under os.TempDir, and Close
	// removes it; a Dir given here is left in place. A Dir that already
	// holds a data dir of an earlier server (data/mysql) is started as it
	// is, without initialising it again (its databases and users kept).
	Dir string
	// Name, when set, is part of the temporary directory's name, to tell
	// servers apart; it is ignored when Dir is set. Empty means none.
	Name string
	// Args are extra mariadbd options, appended after the fixed ones (a
	// later option wins), e.g. "--max-connections=500". Nil means none.
	Args []string
	// CPUs, when set, runs mariadbd under `taskset -c CPUs` (e.g. "1" or
	// "0-1"). Empty means no pinning.
	CPUs string
	// Detach, when true, starts the server in a session of its own that
	// outlives the calling process: it runs until Close, or until
	// StopMariaDBDir from any process. When false (the default) the server
	// also gets a parent-death signal, so that a crashed test process
	// leaves no server behind.
	Detach bool
}

// MariaDB is a private mariadbd started by StartMariaDB or
// StartMariaDBServer: its own data dir, tmpdir and socket in one directory, a
// free port on 127.0.0.1, database test and the users MariaDBUser and
// MariaDBUnprivilegedUser.
type MariaDB struct {
	dir     string
	ownDir  bool // dir was created by StartMariaDBServer; Close removes it
	port    int
	bin     string
	opts    MariaDBOptions
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has been waited for
	waitErr error
}

// StartMariaDB starts a private mariadbd for one test (StartMariaDBServer
// with the zero MariaDBOptions) and stops it and removes its directory in
// tb.Cleanup. When mariadbd is not installed it skips the test, or fails it
// when SQLPOOL_REQUIRE_MARIADB=1.
func StartMariaDB(tb testing.TB) *MariaDB {
	tb.Helper()
	if why := MariaDBMissing(); why != "" {
		skipOrFail(tb, "%s", why)
		return nil
	}
	m, err := StartMariaDBServer(MariaDBOptions{})
	if err != nil {
		tb.Fatalf("mysqltest: %v", err)
	}
	tb.Cleanup(func() {
		if err := m.Close(); err != nil {
			tb.Errorf("mysqltest: %v", err)
		}
	})
	return m
}

// MariaDBMissing returns why StartMariaDBServer cannot run here (mariadbd or
// mariadb-install-db not found on PATH or in the sbin directories), or ""
// when it can.
func MariaDBMissing() string {
	if lookPath("mariadbd") == "" || lookPath("mariadb-install-db") == "" {
		return "mariadbd or mariadb-install-db is not installed (apt-get install mariadb-server)"
	}
	return ""
}

// StartMariaDBServer starts a private mariadbd as opts says: it initialises
// a data dir with mariadb-install-db (root authenticates by unix socket
// only), starts mariadbd with --no-defaults on a free port bound to
// 127.0.0.1 (no binary log, no performance schema, a private tmpdir),
// creates database test and the users MariaDBUser and
// MariaDBUnprivilegedUser, and waits until the privileged user can connect
// over TCP. A port taken between choosing and binding it is retried twice
// with another port. On error nothing is left running, and a directory it
// created is removed.
func StartMariaDBServer(opts MariaDBOptions) (*MariaDB, error) {
	if why := MariaDBMissing(); why != "" {
		return nil, errors.New("mysqltest: " + why)
	}
	m := &MariaDB{dir: opts.Dir, bin: lookPath("mariadbd"), opts: opts}
	if opts.CPUs != "" && lookPath("taskset") == "" {
		return nil, errors.New("mysqltest: CPUs is set but taskset is not installed (util-linux)")
	}
	if m.dir == "" {
		prefix := "sqlpool-mariadb-"
		if opts.Name != "" {
			prefix += opts.Name + "-"
		}
		dir, err := os.MkdirTemp("", prefix)
		if err != nil {
			return nil, fmt.Errorf("mysqltest: %w", err)
		}
		m.dir, m.ownDir = dir, true
	}
	if n := len(m.Socket()); n > 100 {
		return nil, fmt.Errorf("mysqltest: socket path %s is %d bytes, too long for a unix socket; use a shorter Dir", m.Socket(), n)
	}
	reuse := false
	if opts.Dir != "" {
		if fi, err := os.Stat(filepath.Join(m.DataDir(), "mysql")); err == nil && fi.IsDir() {
			reuse = true
		}
	}
	if !reuse {
		if err := m.install(); err != nil {
			_ = m.removeDir()
			return nil, err
		}
	}
	// The port is chosen free but may be taken before mariadbd binds it.
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if m.port, err = freePort(); err != nil {
			break
		}
		var extra []string
		if !reuse {
			extra = append(extra, "--init-file="+filepath.Join(m.dir, "init.sql"))
		}
		if err = m.start(extra...); err == nil {
			return m, nil
		}
		if !strings.Contains(m.errorLog(), "Address already in use") {
			break
		}
	}
	err = fmt.Errorf("mysqltest: start mariadbd: %v\n%s", err, m.errorLogTail())
	_ = m.removeDir()
	return nil, err
}

func (m *MariaDB) install() error {
	// Each server gets its own tmpdir: with the default (/tmp) servers started at the same
	// time by packages tested in parallel collide on internal temporary table names
	// ("Error on delete of '/tmp/#sql-temptable-…'" from mariadb-install-db).
	if err := os.Mkdir(m.tmpdir(), 0o700); err != nil {
		return fmt.Errorf("mysqltest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(m.dir, mariaDBMarker), []byte("a private mariadbd started by internal/mysqltest\n"), 0o600); err != nil {
		return fmt.Errorf("mysqltest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(m.dir, "init.sql"), []byte(mariaDBInitSQL), 0o600); err != nil {
		return fmt.Errorf("mysqltest: %w", err)
	}
	out, err := exec.Command(lookPath("mariadb-install-db"), "--no-defaults", "--user=root", "--datadir="+m.DataDir(),
		"--tmpdir="+m.tmpdir(), "--auth-root-authentication-method=socket", "--skip-test-db").CombinedOutput()
	if err != nil {
		return fmt.Errorf("mysqltest: mariadb-install-db: %v\n%s", err, out)
	}
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

// Port returns the server's TCP port on 127.0.0.1.
func (m *MariaDB) Port() int { return m.port }

// Dir returns the directory that holds the server's files.
func (m *MariaDB) Dir() string { return m.dir }

// DataDir returns the server's data directory.
func (m *MariaDB) DataDir() string { return filepath.Join(m.dir, "data") }

func (m *MariaDB) tmpdir() string { return filepath.Join(m.dir, "tmp") }

// Socket returns the path of the server's unix socket.
func (m *MariaDB) Socket() string { return filepath.Join(m.dir, "sock") }

// ErrorLogPath returns the path of the server's error log.
func (m *MariaDB) ErrorLogPath() string { return filepath.Join(m.dir, "error.log") }

func (m *MariaDB) pidFile() string { return filepath.Join(m.dir, "mariadbd.pid") }

// PID returns the process id of the running server, or 0 when it is not
// running.
func (m *MariaDB) PID() int {
	if !m.Running() {
		return 0
	}
	return m.cmd.Process.Pid
}

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

// Close stops the server (as Stop does) and, when StartMariaDBServer created
// the directory, removes it. Closing a closed server does nothing.
func (m *MariaDB) Close() error {
	err := m.stop()
	if rerr := m.removeDir(); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("mysqltest: stop mariadbd: %w", err)
	}
	return nil
}

func (m *MariaDB) removeDir() error {
	if !m.ownDir {
		return nil
	}
	return os.RemoveAll(m.dir)
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
		"--datadir=" + m.DataDir(),
		"--tmpdir=" + m.tmpdir(),
		"--socket=" + m.Socket(),
		"--pid-file=" + m.pidFile(),
		"--log-error=" + m.ErrorLogPath(),
		"--port=" + strconv.Itoa(m.port),
		"--bind-address=127.0.0.1",
		"--skip-networking=0",
		"--skip-name-resolve",
		"--skip-log-bin",
		"--performance-schema=OFF",
	}
	args = append(args, extra...)
	args = append(args, m.opts.Args...)
	cmd := exec.Command(m.bin, args...)
	if m.opts.CPUs != "" {
		cmd = exec.Command(lookPath("taskset"), append([]string{"-c", m.opts.CPUs, m.bin}, args...)...)
	}
	if m.opts.Detach {
		// A session of its own: no terminal signals, and it outlives this process.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		// A process group of its own keeps terminal signals away from it; the
		// parent-death signal stops it if the test process dies without cleanup.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	// Stdout and stderr go to a file, so that no copying goroutines are needed.
	out, err := os.OpenFile(filepath.Join(m.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
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
	cfg.Logger = QuietLogger{} // a server that is still starting is expected here
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
	t := time.NewTimer(mariaDBStopTimeout)
	defer t.Stop()
	select {
	case <-m.exited:
		return nil
	case <-t.C:
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-m.exited
	return fmt.Errorf("mariadbd did not stop within %v of SIGTERM; killed", mariaDBStopTimeout)
}

// StopMariaDBDir stops the server whose directory is dir (MariaDB.Dir) from
// any process, as Stop does (SIGTERM, SIGKILL to its process group after
// 30 s), and removes dir. It is how a server started with Detach is stopped
// after the process that started it has exited. It refuses a directory that
// StartMariaDBServer did not create; a server that is not running is not an
// error.
func StopMariaDBDir(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, mariaDBMarker)); err != nil {
		return fmt.Errorf("mysqltest: %s is not a directory made by StartMariaDBServer: %w", dir, err)
	}
	var stopErr error
	if pid := readPID(filepath.Join(dir, "mariadbd.pid")); pid > 0 && isMariaDBD(pid) {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		if !waitGone(pid, mariaDBStopTimeout) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitGone(pid, 5*time.Second)
			stopErr = fmt.Errorf("mysqltest: mariadbd (pid %d) did not stop within %v of SIGTERM; killed", pid, mariaDBStopTimeout)
		}
	}
	if err := os.RemoveAll(dir); err != nil && stopErr == nil {
		stopErr = fmt.Errorf("mysqltest: %w", err)
	}
	return stopErr
}

func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// isMariaDBD reports whether pid is a live (not zombie) mariadbd process.
// The check of the name guards against a pid reused since the pid file was
// written.
func isMariaDBD(pid int) bool {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil // no /proc: trust the pid file
	}
	if strings.TrimSpace(string(comm)) != "mariadbd" {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name: "pid (comm) S ...".
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	return true
}

// waitGone polls until pid is no longer a live mariadbd, for at most d, and
// reports whether it is gone. The process is not a child of this one, so
// there is nothing to wait on but its state.
func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for isMariaDBD(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
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
