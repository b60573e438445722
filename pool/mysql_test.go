package pool_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/sqlpool/sqlpool/internal/leakcheck"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/internal/testutil"
	_ "github.com/sqlpool/sqlpool/mysqldialect" // MySQL's dialect, for these tests and the internal ones (mysqlDialect)
	"github.com/sqlpool/sqlpool/pool"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}

var quietLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

// mysqlConnector returns a go-sql-driver/mysql connector for dsn, without the driver's logging.
func mysqlConnector(t testing.TB, dsn string) driver.Connector {
	t.Helper()
	return mysqltest.QuietConnector(t, dsn)
}

func newMySQLPool(t testing.TB, dsn string, cfg pool.Config) *pool.Pool {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLog
	}
	p, err := pool.New(mysqlConnector(t, dsn), cfg)
	if err != nil {
		t.Fatalf("pool.New: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// The database/sql round trip, in both ways a user can put database/sql in front:
// p.OpenDB() and sql.OpenDB(p).
func TestMySQLRoundTrip(t *testing.T) {
	dsn := mysqltest.DSN(t)
	for i, way := range []string{"sql.OpenDB", "OpenDB"} {
		t.Run(way, func(t *testing.T) {
			p := newMySQLPool(t, dsn, pool.Config{MaxConns: 4, MinIdleConns: -1})
			var db *sql.DB
			if way == "sql.OpenDB" {
				db = sql.OpenDB(p)
			} else {
				db = p.OpenDB()
			}
			defer db.Close()
			ctx := context.Background()
			table := fmt.Sprintf("pool_roundtrip_%d", i)
			mustExec(t, db, "DROP TABLE IF EXISTS "+table)
			mustExec(t, db, "CREATE TABLE "+table+" (id INT PRIMARY KEY, v VARCHAR(32))")
			defer mustExec(t, db, "DROP TABLE IF EXISTS "+table)

			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for j := 0; j < 10; j++ {
				if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+" VALUES (?, ?)", j, fmt.Sprint("v", j)); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil || n != 10 {
				t.Fatalf("count = %d, %v; want 10", n, err)
			}
			var v string
			if err := db.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = ?", 7).Scan(&v); err != nil || v != "v7" {
				t.Fatalf("v = %q, %v", v, err)
			}
			stmt, err := db.PrepareContext(ctx, "SELECT v FROM "+table+" WHERE id = ?")
			if err != nil {
				t.Fatal(err)
			}
			for j := 0; j < 5; j++ {
				if err := stmt.QueryRowContext(ctx, j).Scan(&v); err != nil || v != fmt.Sprint("v", j) {
					t.Fatalf("stmt: %q, %v", v, err)
				}
			}
			_ = stmt.Close()
			if err := db.PingContext(ctx); err != nil {
				t.Fatal(err)
			}
			if s := p.Stats(); s.Total > 4 || s.Created == 0 {
				t.Fatalf("stats: %+v", s)
			}
		})
	}
}

// waitFor polls cond until it holds or 10 s pass; only for background work (the creator).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, what, cond)
}

func mustExec(t testing.TB, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// Invariant 1: after warm-up, db.Conn+Close cycles through p.OpenDB() send nothing, and cycles
// running autocommit statements send exactly what plain database/sql sends for them.
func TestZeroBytesCleanCycle(t *testing.T) {
	dsn := mysqltest.DSN(t)
	cfg, _ := mysql.ParseDSN(dsn)
	proxy := mysqltest.NewProxy(t, cfg.Addr)
	p := newMySQLPool(t, proxy.DSN(dsn), pool.Config{MaxConns: 2})
	db := p.OpenDB()
	defer db.Close()
	ctx := context.Background()

	cycles := 10000
	if testing.Short() {
		cycles = 1000
	}
	// Warm up: the creator fills the pool and every connection has been used once.
	waitFor(t, "the pool is full", func() bool { return p.Stats().Idle == 2 })
	for i := 0; i < 10; i++ {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}
	proxy.Reset()
	for i := 0; i < cycles; i++ {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := proxy.Counts(); got.ClientBytes != 0 || got.ServerBytes != 0 {
		t.Fatalf("%d clean db.Conn+Close cycles sent %d bytes (%d packets) to the server and got %d back; want 0",
			cycles, got.ClientBytes, got.ClientPackets, got.ServerBytes)
	}

	// Clean cycles that run something — autocommit SELECTs and committed transactions — add
	// nothing to what the borrower sends: the same workload through plain database/sql sends
	// the same bytes and packets.
	table := "pool_zero_bytes"
	mustExec(t, db, "DROP TABLE IF EXISTS "+table)
	// No AUTO_INCREMENT: an INSERT that generates an id changes LAST_INSERT_ID(), which the
	// release then resets (measured below).
	mustExec(t, db, "CREATE TABLE "+table+" (id INT PRIMARY KEY, v INT)")
	defer mustExec(t, db, "DROP TABLE IF EXISTS "+table)
	workCycles := 10000
	if !mysqltest.IsMariaDB() || testing.Short() {
		workCycles = 2000 // the embedded server is slow; MariaDB (CI) runs the full count
	}
	workload := func(db *sql.DB) {
		for i := 0; i < workCycles; i++ {
			if i%2 == 0 {
				var one int
				if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
					t.Fatal(err)
				}
				continue
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, "REPLACE INTO "+table+" (id, v) VALUES ("+strconv.Itoa(i)+", 1)"); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	proxy.Reset()
	workload(db)
	pooled := proxy.Counts()

	plain := sql.OpenDB(mysqlConnector(t, proxy.DSN(dsn)))
	defer plain.Close()
	plain.SetMaxIdleConns(2)
	if err := plain.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	proxy.Reset()
	workload(plain)
	direct := proxy.Counts()
	if pooled.ClientBytes != direct.ClientBytes || pooled.ClientPackets != direct.ClientPackets {
		t.Fatalf("%d cycles of autocommit SELECTs and committed transactions sent %d bytes/%d packets through the pool; plain database/sql sent %d/%d",
			workCycles, pooled.ClientBytes, pooled.ClientPackets, direct.ClientBytes, direct.ClientPackets)
	}
	if s := p.Stats(); s.ReleasePlans != 0 || s.Validations != 0 {
		t.Fatalf("clean cycles ran release plans or validations: %+v", s)
	}

	// A cycle whose INSERT generates an AUTO_INCREMENT id sends exactly what plain database/sql
	// sends: the stale LAST_INSERT_ID() is reset only before a later statement that could read
	// it, one packet of 4+1+20 bytes (SET last_insert_id=0) before that statement — and once
	// here, before cycle 1's INSERT: its value 1 may be the id cycle 0 generated (whose own
	// value 1 left open whether v is the AUTO_INCREMENT column); cycle 1's generated id 2 settles it.
	ai := "pool_zero_bytes_ai"
	mustExec(t, db, "DROP TABLE IF EXISTS "+ai)
	mustExec(t, db, "CREATE TABLE "+ai+" (id INT PRIMARY KEY AUTO_INCREMENT, v INT)")
	defer mustExec(t, db, "DROP TABLE IF EXISTS "+ai)
	const aiCycles = 500
	insert := func(db *sql.DB) time.Duration {
		start := time.Now()
		for i := 0; i < aiCycles; i++ {
			if i%2 == 0 {
				if _, err := db.ExecContext(ctx, "INSERT INTO "+ai+" (v) VALUES (1)"); err != nil {
					t.Fatal(err)
				}
				continue
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+ai+" (v) VALUES ("+strconv.Itoa(i)+")"); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start)
	}
	plans := p.Stats().ReleasePlans
	proxy.Reset()
	pooledTime := insert(db)
	pooled = proxy.Counts()
	proxy.Reset()
	directTime := insert(plain)
	direct = proxy.Counts()
	if pooled.ClientBytes != direct.ClientBytes+25 || pooled.ClientPackets != direct.ClientPackets+1 {
		t.Fatalf("%d AUTO_INCREMENT insert cycles sent %d bytes/%d packets through the pool; plain database/sql %d/%d; want one reset (25 bytes) more",
			aiCycles, pooled.ClientBytes, pooled.ClientPackets, direct.ClientBytes, direct.ClientPackets)
	}
	if n := p.Stats().ReleasePlans - plans; n != 0 {
		t.Fatalf("%d release plans for %d AUTO_INCREMENT insert cycles; want none", n, aiCycles)
	}
	t.Logf("AUTO_INCREMENT insert cycle: %v through the pool, %v through plain database/sql",
		pooledTime/aiCycles, directTime/aiCycles)

	// A later borrow that reads LAST_INSERT_ID() gets the reset, as a packet of its own, first
	// (the embedded server ignores it: its value is checked on MariaDB).
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var reads [2]mysqltest.Counts
	for i := range reads {
		proxy.Reset()
		var id int64
		if err := c.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		if id != 0 && mysqltest.IsMariaDB() {
			t.Fatalf("SELECT LAST_INSERT_ID() after insert cycles read %d; want 0, as on a new connection", id)
		}
		reads[i] = proxy.Counts()
	}
	const resetBytes = int64(4 + 1 + len("SET last_insert_id=0"))
	if reads[0].ClientBytes != reads[1].ClientBytes+resetBytes || reads[0].ClientPackets != reads[1].ClientPackets+1 {
		t.Fatalf("the first SELECT LAST_INSERT_ID() after insert cycles sent %d bytes/%d packets, the second %d/%d; want one %d-byte reset packet more",
			reads[0].ClientBytes, reads[0].ClientPackets, reads[1].ClientBytes, reads[1].ClientPackets, resetBytes)
	}
}

// Outside the bypass window an acquire sends one COM_PING (5 bytes) and nothing else.
func TestProbeOutsideWindowIsOnePing(t *testing.T) {
	dsn := mysqltest.DSN(t)
	cfg, _ := mysql.ParseDSN(dsn)
	proxy := mysqltest.NewProxy(t, cfg.Addr)
	p := newMySQLPool(t, proxy.DSN(dsn), pool.Config{MaxConns: 1, AliveBypassWindow: -1})
	db := p.OpenDB()
	defer db.Close()
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	proxy.Reset()
	c, err = db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if got := proxy.Counts(); got.ClientPackets != 1 || got.ClientBytes != 5 {
		t.Fatalf("acquire with validation sent %d packets, %d bytes; want one COM_PING (1 packet, 5 bytes)", got.ClientPackets, got.ClientBytes)
	}
}

// BenchmarkDriverResetSession measures go-sql-driver/mysql's zero-byte liveness check (a
// non-blocking read on the socket) — the cost the pool would add to every acquire inside the
// bypass window if it ran it. See ARCHITECTURE.md, "Inside the bypass window".
func BenchmarkDriverResetSession(b *testing.B) {
	c := mysqlConnector(b, mysqltest.DSN(b))
	dc, err := c.Connect(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer dc.Close()
	sr := dc.(driver.SessionResetter)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := sr.ResetSession(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
