// Package pgtest starts private PostgreSQL servers for the module's tests: initdb into a
// directory of its own under the system temporary directory, trust authentication, listening
// on a free port of 127.0.0.1 only (and a unix socket in that directory), fsync off. Run as
// root, the server runs as the postgres user (or PGTEST_USER), since PostgreSQL refuses root.
//
// PG_TEST_DSN names an existing server to use instead (a superuser's URL, such as
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable); tests that need to stop or
// restart the server then skip. When no server can be had the tests skip, or fail when
// SQLPOOL_REQUIRE_POSTGRES=1.
//
// The package links no PostgreSQL driver, so that the library module needs none: it waits for
// a starting server with pg_isready and reaches it through the drivers the test binary links
// (package pgdialect links both): pgx's stdlib by its database/sql name "pgx", lib/pq through
// the constructor registered with RegisterConnector.
package pgtest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ReadyTimeout bounds the wait for a starting server to accept connections.
const ReadyTimeout = 60 * time.Second

// Server is one PostgreSQL server: private (started here) or external (PG_TEST_DSN).
type Server struct {
	dsn     string // superuser URL
	dir     string // "" for an external server
	bin     string
	port    int
	cred    *syscall.Credential
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	extra   []string // postgres -c settings after the defaults (StartServer)
}

// Missing returns why no server can be had here ("" when one can): PG_TEST_DSN unset and no
// initdb/postgres found under /usr/lib/postgresql/*/bin or on PATH.
func Missing() string {
	if os.Getenv("PG_TEST_DSN") != "" {
		return ""
	}
	if binDir() == "" {
		return "PostgreSQL is not installed (apt-get install postgresql-15) and PG_TEST_DSN is not set"
	}
	return ""
}

func skipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv("SQLPOOL_REQUIRE_POSTGRES") == "1" {
		tb.Fatalf("pgtest: "+format+" (SQLPOOL_REQUIRE_POSTGRES=1)", args...)
	}
	tb.Skipf("pgtest: "+format, args...)
}

// binDir is the newest /usr/lib/postgresql/N/bin holding initdb, postgres and pg_isready, or
// the directory of initdb on PATH; "" when none.
func binDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) && isExec(filepath.Join(d, "pg_isready")) {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && isExec(filepath.Join(filepath.Dir(p), "postgres")) &&
		isExec(filepath.Join(filepath.Dir(p), "pg_isready")) {
		return filepath.Dir(p)
	}
	return ""
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

var shared struct {
	once sync.Once
	s    *Server
	err  error
}

// Shared returns the test binary's shared server, started on first use (or PG_TEST_DSN's),
// and skips or fails the test as the package documentation says when there is none. Stop it
// with Run in TestMain; the server also dies with the test process.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	if why := Missing(); why != "" {
		skipOrFail(tb, "%s", why)
		return nil
	}
	shared.once.Do(func() { shared.s, shared.err = open() })
	if shared.err != nil {
		tb.Fatalf("pgtest: %v", shared.err)
	}
	return shared.s
}

// Run runs the tests and then stops the shared server, if one was started: call it from
// TestMain as os.Exit(pgtest.Run(m)).
func Run(m *testing.M) int {
	code := m.Run()
	if shared.s != nil {
		if err := shared.s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Start starts a private server for one test and closes it in tb.Cleanup. Tests that stop,
// restart or otherwise disturb the server use it; with PG_TEST_DSN set they skip.
func Start(tb testing.TB) *Server {
	tb.Helper()
	if os.Getenv("PG_TEST_DSN") != "" {
		tb.Skip("pgtest: PG_TEST_DSN is set; this test needs a private server it can restart")
	}
	if why := Missing(); why != "" {
		skipOrFail(tb, "%s", why)
		return nil
	}
	s, err := open()
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return s
}

func open() (*Server, error) {
	if dsn := os.Getenv("PG_TEST_DSN"); dsn != "" {
		return &Server{dsn: dsn}, nil
	}
	return startPrivate()
}

// Options configure StartServer.
type Options struct {
	// Settings are extra "name=value" server settings, passed as postgres -c options after
	// pgtest's own (fsync=off, synchronous_commit=off, full_page_writes=off,
	// max_connections=200, shared_buffers=32MB), so that they override them. Default none.
	Settings []string
}

// StartServer starts a private server outside a test (a benchmark's), as Start does, with the
// extra settings of o. Close stops it and removes its files; it also dies with the process
// that started it. It returns an error when PostgreSQL is not installed (Missing).
func StartServer(o Options) (*Server, error) {
	if bin := binDir(); bin == "" {
		return nil, errors.New("pgtest: PostgreSQL is not installed (apt-get install postgresql-15)")
	}
	return startPrivate(o.Settings...)
}

func startPrivate(extra ...string) (*Server, error) {
	s := &Server{bin: binDir(), extra: extra}
	dir, err := os.MkdirTemp("", "sqlpool-pg-")
	if err != nil {
		return nil, err
	}
	s.dir = dir
	if os.Geteuid() == 0 {
		name := os.Getenv("PGTEST_USER")
		if name == "" {
			name = "postgres"
		}
		u, err := user.Lookup(name)
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, PostgreSQL needs another user: %v (create user postgres, or set PGTEST_USER)", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	initdb := exec.Command(filepath.Join(s.bin, "initdb"), "-D", s.dataDir(), "-U", "postgres",
		"--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if out, err := initdb.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	for attempt := 0; attempt < 3; attempt++ {
		if s.port, err = freePort(); err != nil {
			break
		}
		s.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
		if err = s.start(); err == nil {
			return s, nil
		}
		if !strings.Contains(s.log(), "already in use") {
			break
		}
	}
	err = fmt.Errorf("start postgres: %v\n%s", err, s.logTail())
	_ = os.RemoveAll(dir)
	return nil, err
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *Server) logPath() string { return filepath.Join(s.dir, "server.log") }

func (s *Server) log() string {
	b, _ := os.ReadFile(s.logPath())
	return string(b)
}

func (s *Server) logTail() string {
	l := s.log()
	if len(l) > 4000 {
		l = l[len(l)-4000:]
	}
	return l
}

func (s *Server) start() error {
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.dataDir(),
		"-c", "listen_addresses=127.0.0.1", "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "shared_buffers=32MB")
	for _, kv := range s.extra {
		cmd.Args = append(cmd.Args, "-c", kv)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd = cmd
	s.exited = make(chan struct{})
	exited := s.exited
	go func() {
		s.waitErr = cmd.Wait()
		close(exited)
	}()
	if err := s.waitReady(); err != nil {
		_ = s.stop()
		return err
	}
	return nil
}

func (s *Server) waitReady() error {
	deadline := time.Now().Add(ReadyTimeout)
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited: %v", s.waitErr)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		// pg_isready exits 0 once the server accepts connections (1 while it starts up).
		out, err := exec.CommandContext(ctx, filepath.Join(s.bin, "pg_isready"), "-q", "-h", "127.0.0.1",
			"-p", strconv.Itoa(s.port), "-U", "postgres", "-d", "postgres").CombinedOutput()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after %v: pg_isready: %v %s", ReadyTimeout, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop stops the server with a fast shutdown (SIGINT), SIGKILL after 30 s.
func (s *Server) stop() error {
	if s.cmd == nil {
		return nil
	}
	select {
	case <-s.exited:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-s.exited:
		return nil
	case <-t.C:
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
	return errors.New("postgres did not stop within 30 s of SIGINT; killed")
}

// Close stops a private server and removes its directory; an external one is left alone.
func (s *Server) Close() error {
	if s.dir == "" {
		return nil
	}
	err := s.stop()
	if rerr := os.RemoveAll(s.dir); err == nil {
		err = rerr
	}
	return err
}

// PID is the process ID of a running private server's postmaster (its backends are its
// children), or 0.
func (s *Server) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Private reports whether the server was started here (it can be stopped and restarted).
func (s *Server) Private() bool { return s.dir != "" }

// DSN is the superuser's URL.
func (s *Server) DSN() string { return s.dsn }

// Addr is the server's "host:port".
func (s *Server) Addr() string {
	u, err := url.Parse(s.dsn)
	if err != nil {
		return ""
	}
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), "5432")
	}
	return u.Host
}

// Via returns a copy of s whose DSN and connectors go to addr instead (a proxy in front of
// the server). Stop and restart the server through s, not through the copy.
func (s *Server) Via(addr string) *Server {
	c := *s
	u, err := url.Parse(s.dsn)
	if err == nil {
		u.Host = addr
		c.dsn = u.String()
	}
	return &c
}

// Stop stops a private server (fast shutdown).
func (s *Server) Stop(tb testing.TB) {
	tb.Helper()
	if !s.Private() {
		tb.Skip("pgtest: an external server cannot be stopped")
	}
	if err := s.stop(); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
}

// StartAgain starts a stopped private server on the same port.
func (s *Server) StartAgain(tb testing.TB) {
	tb.Helper()
	if err := s.start(); err != nil {
		tb.Fatalf("pgtest: restart: %v\n%s", err, s.logTail())
	}
}

// Restart stops and starts a private server on the same port.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.Stop(tb)
	s.StartAgain(tb)
}

// PgxConnector returns pgx stdlib's connector for the superuser, with extra DSN parameters
// (such as "default_query_exec_mode=simple_protocol") appended. The test binary must link
// github.com/jackc/pgx/v5/stdlib.
func (s *Server) PgxConnector(tb testing.TB, params ...string) driver.Connector {
	tb.Helper()
	return connector(tb, "pgx", "github.com/jackc/pgx/v5/stdlib", s.withParams(params))
}

// PqConnector returns lib/pq's connector for the superuser. The test binary must link
// github.com/lib/pq.
func (s *Server) PqConnector(tb testing.TB, params ...string) driver.Connector {
	tb.Helper()
	return connector(tb, "postgres", "github.com/lib/pq", s.withParams(params))
}

var connectors struct {
	mu sync.Mutex
	m  map[string]func(dsn string) (driver.Connector, error)
}

// RegisterConnector makes newConnector the way PgxConnector ("pgx") or PqConnector
// ("postgres") builds its driver's connector. lib/pq's Driver has no OpenConnector, so a test
// binary that calls PqConnector registers pq.NewConnector (from an init function of a test
// file); pgx's stdlib needs no registration.
func RegisterConnector(driverName string, newConnector func(dsn string) (driver.Connector, error)) {
	connectors.mu.Lock()
	defer connectors.mu.Unlock()
	if connectors.m == nil {
		connectors.m = map[string]func(string) (driver.Connector, error){}
	}
	connectors.m[driverName] = newConnector
}

// connector returns the connector of the database/sql driver registered as name for dsn.
func connector(tb testing.TB, name, pkg, dsn string) driver.Connector {
	tb.Helper()
	connectors.mu.Lock()
	f := connectors.m[name]
	connectors.mu.Unlock()
	if f == nil {
		db, err := sql.Open(name, dsn)
		if err != nil {
			tb.Fatalf("pgtest: %v: the test binary must import %s (package pgdialect does)", err, pkg)
		}
		drv := db.Driver()
		_ = db.Close()
		dc, ok := drv.(driver.DriverContext)
		if !ok {
			tb.Fatalf("pgtest: the driver registered as %q (%T) has no OpenConnector: call "+
				"pgtest.RegisterConnector(%q, ...) with %s's connector constructor from an init function of a test file", name, drv, name, pkg)
		}
		f = dc.OpenConnector
	}
	c, err := f(dsn)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return c
}

func (s *Server) withParams(params []string) string {
	d := s.dsn
	for _, p := range params {
		if strings.Contains(d, "?") {
			d += "&" + p
		} else {
			d += "?" + p
		}
	}
	return d
}

// Admin opens a plain database/sql handle (pgx stdlib) for the test's own checks; it is closed
// in tb.Cleanup.
func (s *Server) Admin(tb testing.TB) *sql.DB {
	tb.Helper()
	db := sql.OpenDB(s.PgxConnector(tb))
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// Exec runs statements as the superuser on a connection of its own (pgx stdlib).
func (s *Server) Exec(tb testing.TB, queries ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := sql.OpenDB(s.PgxConnector(tb))
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		tb.Fatalf("pgtest: connect: %v", err)
	}
	defer c.Close()
	for _, q := range queries {
		if _, err := c.ExecContext(ctx, q); err != nil {
			tb.Fatalf("pgtest: exec %q: %v", q, err)
		}
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
