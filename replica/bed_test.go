package replica_test

import (
	"context"
	"database/sql"
	"log/slog"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/cluster"
	"github.com/sqlpool/sqlpool/internal/leakcheck"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
	_ "github.com/sqlpool/sqlpool/mysqldialect"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/replica"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}

// bed is a MariaDB primary with two GTID replicas and a Router over pools on them: the
// primary's pool over the driver's connector, each replica's over a one-host cluster.Connector
// (its heartbeat and probes feed Replica.Up).
type bed struct {
	repl     *mysqltest.Replication
	r        *replica.Router
	primary  *pool.Pool
	replicas []*pool.Pool
	conns    []*cluster.Connector
	direct   *sql.DB // the primary, outside the router
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(discard{}, nil))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func newBed(t testing.TB, cfg replica.Config) *bed {
	t.Helper()
	repl := mysqltest.StartReplication(t, 2)
	b := &bed{repl: repl}
	var err error
	b.primary, err = pool.New(mysqltest.QuietConnector(t, repl.Primary.DSN()), pool.Config{Name: "primary", MaxConns: 20, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.primary.Close() })
	cfg.Primary = b.primary
	cfg.Flavor = replica.MariaDB
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	for i, m := range repl.Replicas {
		c, err := cluster.New(cluster.Config{
			Hosts:            []cluster.Host{{Name: m.Addr(), Connector: mysqltest.QuietConnector(t, m.DSN())}},
			HostTimeout:      time.Second,
			ProbeInterval:    100 * time.Millisecond,
			MaxProbeInterval: 500 * time.Millisecond,
			Logger:           quietLogger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		p, err := pool.New(c, pool.Config{Name: "replica" + string(rune('1'+i)), MaxConns: 20, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		b.replicas = append(b.replicas, p)
		b.conns = append(b.conns, c)
		cfg.Replicas = append(cfg.Replicas, replica.Replica{Name: m.Addr(), Connector: p,
			Up: func() bool { return c.Hosts()[0].Up }})
	}
	b.r, err = replica.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.r.Close() })
	b.direct, err = sql.Open("mysql", repl.Primary.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.direct.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.exec(t, ctx, "CREATE TABLE kv (k INT PRIMARY KEY, v BIGINT NOT NULL, c BIGINT NOT NULL)")
	b.exec(t, ctx, "CREATE TABLE clock (id INT PRIMARY KEY, c BIGINT NOT NULL)")
	b.exec(t, ctx, "INSERT INTO clock VALUES (1, 0)")
	for k := 0; k < 8; k++ {
		b.exec(t, ctx, "INSERT INTO kv VALUES (?, 0, 0)", k)
	}
	if err := repl.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	b.waitUsable(t, ctx, 0, true)
	b.waitUsable(t, ctx, 1, true)
	return b
}

func (b *bed) exec(t testing.TB, ctx context.Context, q string, args ...any) {
	t.Helper()
	if _, err := b.direct.ExecContext(ctx, q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// waitUsable waits until replica i is (or is not) in rotation.
func (b *bed) waitUsable(t testing.TB, ctx context.Context, i int, want bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		if b.r.Stats().Replicas[i].Usable == want {
			return time.Since(start)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("replica %d usable=%v not reached: %+v", i, want, b.r.Stats().Replicas[i])
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// write bumps the clock and row k through the writer in one transaction and returns the
// clock value it committed.
func write(ctx context.Context, db *sql.DB, k int) (int64, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "UPDATE clock SET c = c + 1 WHERE id = 1"); err != nil {
		return 0, err
	}
	var c int64
	if err := tx.QueryRowContext(ctx, "SELECT c FROM clock WHERE id = 1").Scan(&c); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE kv SET v = v + 1, c = ? WHERE k = ?", c, k); err != nil {
		return 0, err
	}
	return c, tx.Commit()
}

// snapshot reads the clock and every row in one statement: the state it saw is the clock.
type snapshot struct {
	clock int64
	rows  map[int]int64 // k → the clock of its last write
}

type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

func readSnapshot(ctx context.Context, q querier) (snapshot, error) {
	rows, err := q.QueryContext(ctx, "SELECT k, c, (SELECT c FROM clock WHERE id = 1) FROM kv ORDER BY k")
	if err != nil {
		return snapshot{}, err
	}
	defer rows.Close()
	s := snapshot{rows: map[int]int64{}}
	for rows.Next() {
		var k int
		var c, clock int64
		if err := rows.Scan(&k, &c, &clock); err != nil {
			return snapshot{}, err
		}
		s.rows[k], s.clock = c, clock
	}
	return s, rows.Err()
}
