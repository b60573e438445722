package mysqltest

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func mysqlErrNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// TestStartMariaDB starts a private server, checks its users, and stops,
// starts and restarts it.
func TestStartMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: fault test: starts, stops and restarts a private mariadbd")
	}
	start := time.Now()
	m := StartMariaDB(t)
	t.Logf("mariadbd at %s ready in %v", m.Addr(), time.Since(start))
	ctx := ctxT(t, 60*time.Second)

	db := openDB(t, m.DSN())
	mustExec(t, db, "CREATE TABLE kept (id INT PRIMARY KEY)")
	mustExec(t, db, "INSERT INTO kept VALUES (1), (2)")
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	t.Logf("version %s", version)

	// The unprivileged user has data privileges on test but is subject to
	// read_only, which the privileged user bypasses.
	ro := openDB(t, m.UnprivilegedDSN())
	mustExec(t, ro, "INSERT INTO kept VALUES (3)")
	if _, err := ro.ExecContext(ctx, "SET GLOBAL read_only = 1"); mysqlErrNumber(err) != 1227 {
		t.Fatalf("unprivileged SET GLOBAL read_only: %v, want error 1227", err)
	}
	m.Exec(t, "SET GLOBAL read_only = 1")
	if _, err := ro.ExecContext(ctx, "INSERT INTO kept VALUES (4)"); mysqlErrNumber(err) != 1290 {
		t.Fatalf("unprivileged INSERT under read_only: %v, want error 1290", err)
	}
	mustExec(t, db, "INSERT INTO kept VALUES (4)")
	m.Exec(t, "SET GLOBAL read_only = 0")
	if _, err := ro.ExecContext(ctx, "CREATE DATABASE other"); mysqlErrNumber(err) != 1044 {
		t.Fatalf("unprivileged CREATE DATABASE: %v, want error 1044", err)
	}

	// Through a proxy, db.Ping is one 5-byte COM_PING as on the embedded server.
	p := NewProxy(t, m.Addr())
	pdb := openDB(t, p.DSN(m.DSN()))
	pdb.SetMaxOpenConns(1)
	if err := pdb.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	if err := pdb.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	if c := p.Counts(); c.ClientPackets != 1 || c.ClientBytes != 5 || c.ServerPackets != 1 {
		t.Fatalf("db.Ping through the proxy: %+v", c)
	}

	// A connection open across a restart breaks; new ones work and the data
	// is kept.
	held, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := held.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	m.Restart(t)
	t.Logf("restart took %v", time.Since(start))
	if err := held.PingContext(ctx); err == nil {
		t.Fatal("connection survived a restart")
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM kept").Scan(&n); err != nil || n != 4 {
		t.Fatalf("rows after restart = %d, %v; want 4", n, err)
	}

	m.Stop(t)
	if m.Running() {
		t.Fatal("Running after Stop")
	}
	db2 := openDB(t, m.DSN())
	if err := db2.PingContext(ctx); err == nil {
		t.Fatal("ping to a stopped server succeeded")
	}
	m.Stop(t) // stopping twice is harmless
	m.Start(t)
	if err := db2.PingContext(ctx); err != nil {
		t.Fatalf("ping after Start: %v", err)
	}
	if _, err := os.Stat(m.ErrorLogPath()); err != nil {
		t.Errorf("error log: %v", err)
	}
}

// TestConfiguredMariaDB checks the MariaDB named by the environment (CI).
func TestConfiguredMariaDB(t *testing.T) {
	RequireMariaDB(t, "checks the configured MariaDB users")
	ctx := ctxT(t, 30*time.Second)
	db := openDB(t, DSN(t))
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	t.Logf("MYSQL_TEST_DSN server version %s", version)
	ro := openDB(t, UnprivilegedDSN(t))
	var dbname string
	if err := ro.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbname); err != nil || dbname != "test" {
		t.Fatalf("unprivileged DATABASE() = %q, %v", dbname, err)
	}
	// Fails without changing anything: the user lacks SUPER/READ ONLY ADMIN.
	if _, err := ro.ExecContext(ctx, "SET GLOBAL read_only = 1"); mysqlErrNumber(err) != 1227 {
		t.Fatalf("unprivileged SET GLOBAL read_only: %v, want error 1227", err)
	}
}

func TestRequireMariaDBEnv(t *testing.T) {
	if IsMariaDB() != (os.Getenv(EnvDSN) != "") {
		t.Fatal("IsMariaDB disagrees with the environment")
	}
	ft := &fakeTB{TB: t}
	t.Setenv(EnvDSN, "")
	t.Setenv(EnvDSNUnprivileged, "")
	t.Setenv(EnvRequireMariaDB, "")
	runFake(func() { RequireMariaDB(ft, "why") })
	if !ft.skipped || ft.failed {
		t.Fatalf("without MariaDB: skipped=%v failed=%v", ft.skipped, ft.failed)
	}
	ft = &fakeTB{TB: t}
	t.Setenv(EnvRequireMariaDB, "1")
	runFake(func() { RequireMariaDB(ft, "why") })
	if ft.skipped || !ft.failed {
		t.Fatalf("without MariaDB, required: skipped=%v failed=%v", ft.skipped, ft.failed)
	}
	ft = &fakeTB{TB: t}
	runFake(func() { UnprivilegedDSN(ft) })
	if !ft.failed {
		t.Fatal("UnprivilegedDSN unset and required did not fail")
	}
	ft = &fakeTB{TB: t}
	t.Setenv(EnvDSN, "x@tcp(127.0.0.1:1)/test")
	runFake(func() { RequireMariaDB(ft, "why") })
	if ft.skipped || ft.failed || !IsMariaDB() || DSN(t) != "x@tcp(127.0.0.1:1)/test" {
		t.Fatalf("with MariaDB: skipped=%v failed=%v", ft.skipped, ft.failed)
	}
}

// fakeTB records skips and failures instead of ending the test.
type fakeTB struct {
	testing.TB
	skipped, failed bool
}

type fakeStop struct{}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Skipf(string, ...any)  { f.skipped = true; panic(fakeStop{}) }
func (f *fakeTB) Fatalf(string, ...any) { f.failed = true; panic(fakeStop{}) }
func (f *fakeTB) Errorf(string, ...any) { f.failed = true }
func (f *fakeTB) Logf(string, ...any)   {}

func runFake(fn func()) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(fakeStop); !ok {
				panic(r)
			}
		}
	}()
	fn()
}

// TestStartMariaDBServerReusesDir starts a server in a given directory,
// stops it, and starts another on the same directory: it keeps the data
// and the users, and Close leaves the directory in place.
func TestStartMariaDBServerReusesDir(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a private mariadbd twice")
	}
	if why := MariaDBMissing(); why != "" {
		skipOrFail(t, "%s", why)
		return
	}
	dir, err := os.MkdirTemp("", "sqlpool-reuse-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx := ctxT(t, 60*time.Second)
	for i, want := range []int{0, 1} {
		m, err := StartMariaDBServer(MariaDBOptions{Dir: dir})
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		db := openDB(t, m.DSN())
		mustExec(t, db, "CREATE TABLE IF NOT EXISTS kept (id INT PRIMARY KEY)")
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM kept").Scan(&n); err != nil || n != want {
			t.Fatalf("start %d: rows = %d, %v; want %d", i, n, err, want)
		}
		mustExec(t, db, "INSERT INTO kept VALUES (1 + (SELECT COUNT(*) FROM kept k))")
		db.Close()
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(m.DataDir()); err != nil {
			t.Fatalf("after Close: %v", err)
		}
	}
}
