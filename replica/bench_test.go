package replica_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

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
	direct := b.replicas[0].OpenDB()
	defer direct.Close()
	direct2 := b.replicas[1].OpenDB()
	defer direct2.Close()
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
		{"write causal off", write(ctx, none.Writer())},
		{"write causal on", write(replica.WithToken(ctx, b.r.NewToken()), b.r.Writer())},
	}
	const rounds, per = 9, 2000
	rates := make([][]float64, len(variants))
	for r := 0; r < rounds; r++ {
		// Each round in another order, and the replicas idle (caught up with the writes)
		// before each variant, so that no variant pays for another's replication.
		for j := range variants {
			i := (j + r) % len(variants)
			v := variants[i]
			if err := b.repl.WaitCaughtUp(ctx); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for range per {
				if err := v.op(); err != nil {
					t.Fatalf("%s: %v", v.name, err)
				}
			}
			rates[i] = append(rates[i], per/time.Since(start).Seconds())
		}
	}
	med := make([]float64, len(variants))
	for i, v := range variants {
		slices.Sort(rates[i])
		med[i] = rates[i][rounds/2]
		t.Logf("%-28s median %8.0f ops/s (min %8.0f, max %8.0f)", v.name, med[i], rates[i][0], rates[i][rounds-1])
	}
	st := b.r.Stats()
	t.Logf("token read / unmarked read: %.3f (bar ≥ 0.9); waits during the run: %d",
		med[1]/med[0], st.Replicas[0].Waits+st.Replicas[1].Waits)
	t.Logf("unmarked read through the router / replica pool directly: %.3f; / two replica pools in turn: %.3f", med[0]/med[2], med[0]/med[3])
	t.Logf("write with causal reads on / off: %.3f (the extra SELECT @@last_gtid)", med[5]/med[4])
	if r := med[1] / med[0]; r < 0.9 {
		t.Errorf("token read at %.3f× an unmarked read, want ≥ 0.9", r)
	}
	fmt.Fprintln(os.Stderr)
}
