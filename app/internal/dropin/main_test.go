package dropin_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/internal/testutil"
	_ "github.com/sqlpool/sqlpool/mysqldialect" // MySQL's pool.Dialect, registered on import
	"github.com/sqlpool/sqlpool/pool"
)

func TestMain(m *testing.M) {
	// GORM with PrepareStmt starts one goroutine per statement store that never ends
	// (gorm.io/gorm/internal/lru says so: "done channel is never closed").
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("gorm.io/gorm/internal/lru.NewLRU[...].func1"))
}

var quietLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

// mysqlConnector returns a go-sql-driver/mysql connector for dsn, without the driver's logging.
func mysqlConnector(t testing.TB, dsn string) driver.Connector {
	t.Helper()
	return mysqltest.QuietConnector(t, dsn)
}

// newPool returns a pool over dsn, closed in t.Cleanup. Unless cfg says otherwise the bypass
// window is a minute, so that a loaded machine never turns a borrow into a probe.
func newPool(t testing.TB, dsn string, cfg pool.Config) *pool.Pool {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLog
	}
	if cfg.AliveBypassWindow == 0 {
		cfg.AliveBypassWindow = time.Minute
	}
	if cfg.AcquireTimeout == 0 {
		cfg.AcquireTimeout = 20 * time.Second
	}
	p, err := pool.New(mysqlConnector(t, dsn), cfg)
	if err != nil {
		t.Fatalf("pool.New: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("pool Close: %v", err)
		}
	})
	return p
}

// forEachServer runs f on the embedded server and on MariaDB (MYSQL_TEST_DSN). Without
// MariaDB that subtest skips, or fails when SQLPOOL_REQUIRE_MARIADB=1.
func forEachServer(t *testing.T, f func(t *testing.T, srv server)) {
	t.Run("embedded", func(t *testing.T) { f(t, server{dsn: mysqltest.EmbeddedDSN(t)}) })
	t.Run("mariadb", func(t *testing.T) {
		mysqltest.RequireMariaDB(t, "the drop-in tests run on both servers")
		f(t, server{dsn: os.Getenv(mysqltest.EnvDSN), mariadb: true})
	})
}

// server is a test server: its DSN, and whether it is MariaDB rather than the embedded one.
type server struct {
	dsn     string
	mariadb bool
}

// waitFor polls cond until it holds, failing the test after 20 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, what, cond)
}

func mustExec(t testing.TB, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// assertConnectionClean checks, after a transaction function panicked and its transaction was
// rolled back, that the connection went back to the pool without a release plan or a
// reconnect, and that the next borrower finds no transaction open (@@in_transaction, which
// only MariaDB has).
func assertConnectionClean(t *testing.T, srv server, p *pool.Pool, before pool.Stats, db *sql.DB) {
	t.Helper()
	s := p.Stats()
	// No release plan: the function's INSERT generated an id, and LAST_INSERT_ID() is not
	// transactional, but its reset waits for a statement that could read it (the next
	// borrower's SELECT LAST_INSERT_ID() below gets it first).
	if s.Active != 0 || s.Closed != before.Closed || s.ReleasePlans != before.ReleasePlans {
		t.Fatalf("after the panic: %v, release plans %d (before: %v, release plans %d); want the connection back, unchanged",
			s, s.ReleasePlans, before, before.ReleasePlans)
	}
	if srv.mariadb && s.MaxConns == 1 {
		ctx := context.Background()
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var inTx int
		if err := c.QueryRowContext(ctx, "SELECT @@in_transaction").Scan(&inTx); err != nil || inTx != 0 {
			t.Fatalf("next borrower: @@in_transaction = %d (%v); want 0", inTx, err)
		}
		var id int64
		if err := c.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&id); err != nil || id != 0 {
			t.Fatalf("next borrower: LAST_INSERT_ID() = %d (%v); want 0", id, err)
		}
	}
}

// cancelMidQuery runs query (a 3-second SLEEP) with a context cancelled 200 ms in, and checks
// that it returns context.Canceled well before the sleep ends, and that the pool closes the
// connection the driver abandoned and serves the next borrower.
func cancelMidQuery(t *testing.T, p *pool.Pool, db *sql.DB, query func(ctx context.Context) error) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: waits out a 3 s SLEEP on the server")
	}
	before := p.Stats()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	timer := time.AfterFunc(200*time.Millisecond, cancel)
	defer timer.Stop()
	start := time.Now()
	err := query(ctx)
	elapsed := time.Since(start)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled query returned %v; want context.Canceled", err)
	}
	if elapsed > 2500*time.Millisecond {
		t.Fatalf("cancelled query returned after %v; want well before its 3 s sleep ends", elapsed)
	}
	waitFor(t, "the pool closed the cancelled connection and has a replacement idle", func() bool {
		s := p.Stats()
		return s.Closed > before.Closed && s.Active == 0 && s.Idle == s.MaxConns
	})
	// The embedded server does not stop a query whose client went away: wait until the
	// SLEEP has ended on the server, so that its goroutines do not outlive the test.
	waitFor(t, "the server finished the abandoned SLEEP", func() bool {
		var n int
		err := db.QueryRowContext(context.Background(),
			"SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE CONCAT('SELECT SLE', 'EP(%')").Scan(&n)
		if err != nil {
			t.Fatalf("reading the process list: %v", err)
		}
		return n == 0
	})
}
