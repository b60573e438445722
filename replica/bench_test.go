package replica_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/replica"
)

// cycleReplicaRead: SELECT 1 through the reader on caught-up replicas, unmarked and with a
// Token the replicas' cached positions cover (no wait), side by side; and the writer's
// autocommit UPDATE with causal reads off (Mode None) and on (PerToken: one more round trip to
// read @@last_gtid). Interleaved rounds on one bed; the medians' ratios are what count on a
// shared machine. By hand: SQLPOOL_REPLICA_BENCH=1 go test -run TestCycleReplicaRead -v ./replica/
func TestCycleReplicaRead(t *testing.T) {
	if os.Getenv("SQLPOOL_REPLICA_BENCH") != "1" {
		t.Skip("a measurement: set SQLPOOL_REPLICA_BENCH=1")
	}
	b := newBed(t, replica.Config{Mode: replica.PerToken})
	none, err := replica.New(replica.Config{Primary: b.primary, Flavor: replica.MariaDB, Mode: replica.None,
		Replicas: []replica.Replica{{Name: "r1", Connector: b.replicas[0]}, {Name: "r2", Connector: b.replicas[1]}}})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	ctx := context.Background()
	if _, err := b.r.Writer().ExecContext(ctx, "UPDATE kv SET v = v + 1 WHERE k = 0"); err != nil {
		t.Fatal(err)
	}
	if err := b.repl.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the polls see it
	tok := b.r.NewToken()
	if _, err := b.r.Writer().ExecContext(replica.WithToken(ctx, tok), "UPDATE kv SET v = v + 1 WHERE k = 1"); err != nil {
		t.Fatal(err)
	}
	if err := b.repl.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	tctx := replica.WithToken(ctx, tok)
	read := func(ctx context.Context, db *sql.DB) func() error {
		return func() error {
			var n int
			return db.QueryRowContext(ctx, "SELECT 1").Scan(&n)
		}
	}
	write := func(ctx context.Context, db *sql.DB) func() error {
		return func() error {
			_, err := db.ExecContext(ctx, "UPDATE kv SET v = v + 1 WHERE k = 2")
			return err
		}
	}
	// The direct variants use pools of their own: a pool whose connections database/sql holds
	// parked (p.OpenDB) and that is also borrowed from with Connect (the router) brings the
	// parked ones back on every Connect that finds its stack empty, which would charge both.
	ownPool := func(i int) *sql.DB {
		p, err := pool.New(mysqltest.QuietConnector(t, b.repl.Replicas[i].DSN()), pool.Config{Name: fmt.Sprintf("direct%d", i), MaxConns: 4, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		db := p.OpenDB()
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	direct, direct2 := ownPool(0), ownPool(1)
	plainPool := func(i int) *pool.Pool {
		p, err := pool.New(mysqltest.QuietConnector(t, b.repl.Replicas[i].DSN()), pool.Config{Name: fmt.Sprintf("plain%d", i), MaxConns: 4, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return p
	}
	plain, err := replica.New(replica.Config{Primary: b.primary, Flavor: replica.MariaDB, Logger: quietLogger(),
		Replicas: []replica.Replica{{Name: "p1", Connector: plainPool(0)}, {Name: "p2", Connector: plainPool(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	alt := 0
	alternate := func() error {
		alt++
		db := direct
		if alt%2 == 0 {
			db = direct2
		}
		var n int
		return db.QueryRowContext(ctx, "SELECT 1").Scan(&n)
	}
	variants := []struct {
		name string
		op   func() error
	}{
		{"read unmarked", read(ctx, b.r.Reader())},
		{"read token", read(tctx, b.r.Reader())},
		{"read replica pool directly", read(ctx, direct)},
		{"read 2 replica pools in turn", alternate},
		{"read unmarked, plain pools", read(ctx, plain.Reader())},
		{"write causal off", write(ctx, none.Writer())},
		{"write causal on", write(replica.WithToken(ctx, b.r.NewToken()), b.r.Writer())},
	}
	// Op by op in turn (A, B, C, … A, B, C, …), each call timed: on a loaded machine the
	// variants then share every slow moment, and the medians of the per-call latencies compare.
	// Reads 20,000 calls each, writes 2,000 (rounds of 10 reads per write).
	// SQLPOOL_REPLICA_BENCH_VARIANTS=n keeps the first n variants (e.g. 4: reads alone).
	if n, err := strconv.Atoi(os.Getenv("SQLPOOL_REPLICA_BENCH_VARIANTS")); err == nil && n > 0 {
		variants = variants[:n]
	}
	lat := make([][]time.Duration, len(variants))
	for i := 0; i < 20000; i++ {
		for jj := range variants {
			j := (jj + i) % len(variants) // each variant in each position in turn
			v := variants[j]
			if j >= 5 && i%10 != 0 {
				continue // the writes
			}
			t0 := time.Now()
			if err := v.op(); err != nil {
				t.Fatalf("%s: %v", v.name, err)
			}
			lat[j] = append(lat[j], time.Since(t0))
		}
	}
	med := make([]float64, len(variants))
	for i, v := range variants {
		slices.Sort(lat[i])
		n := len(lat[i])
		med[i] = 1 / lat[i][n/2].Seconds()
		t.Logf("%-28s median %8v (%6.0f/s), p90 %8v, p99 %8v, n %d", v.name, lat[i][n/2], med[i], lat[i][n*9/10], lat[i][n*99/100], n)
	}
	st := b.r.Stats()
	t.Logf("stats %+v", st)
	if len(variants) < 7 {
		return
	}
	t.Logf("token read / unmarked read (inverse median latencies): %.3f (bar ≥ 0.9); waits during the run: %d",
		med[1]/med[0], st.Replicas[0].Waits+st.Replicas[1].Waits)
	t.Logf("unmarked read through the router / replica pool directly: %.3f; / two replica pools in turn: %.3f", med[0]/med[2], med[0]/med[3])
	t.Logf("write with causal reads on / off: %.3f (the extra SELECT @@last_gtid)", med[6]/med[5])
	if r := med[1] / med[0]; r < 0.9 {
		t.Errorf("token read at %.3f× an unmarked read, want ≥ 0.9", r)
	}
}
