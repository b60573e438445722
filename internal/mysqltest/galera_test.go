package mysqltest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

// TestGalera starts the cluster, writes on node 1, reads on node 3, and kills and restarts
// node 2.
func TestGalera(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: Galera: starts a 3-node cluster (15-30 s)")
	}
	g := StartGalera(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	open := func(n int) *sql.DB {
		// wsrep_sync_wait=1: a read waits until the node applied every earlier write of the
		// cluster (Galera applies writesets on the other nodes asynchronously).
		db, err := sql.Open("mysql", g.DSN(n)+"&wsrep_sync_wait=1")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db1, db3 := open(1), open(3)
	if _, err := db1.ExecContext(ctx, "CREATE TABLE galera_smoke (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db1.ExecContext(ctx, "INSERT INTO galera_smoke VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db3.QueryRowContext(ctx, "SELECT COUNT(*) FROM galera_smoke").Scan(&n); err != nil || n != 1 {
		t.Fatalf("node 3 sees %d rows (err %v), want 1", n, err)
	}
	g.Kill(2)
	if _, err := g.Status(ctx, 2); err == nil {
		t.Fatal("node 2 answers after Kill")
	}
	// Wait for the survivors to form a primary component of two.
	for {
		st, err := g.Status(ctx, 1)
		if err == nil && st.ClusterSize == 2 && st.ClusterStatus == "Primary" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("node 1 never saw a 2-node primary component: %+v %v", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	g.Start(2)
	st, err := g.Status(ctx, 2)
	if err != nil || st.LocalState != "Synced" || st.ClusterSize != 3 {
		t.Fatalf("node 2 after Start: %+v, %v", st, err)
	}
	waitApplied(ctx, t, g, db1)
	if _, err := db1.ExecContext(ctx, "DROP TABLE galera_smoke"); err != nil {
		t.Fatal(err)
	}
}

// waitApplied checks WaitApplied against a node that lags: FLUSH TABLES WITH READ LOCK on
// node 3 desyncs it and pauses its applier, so a plain read there misses a row committed on
// node 1 (Galera's reads are not causal); WaitApplied must not return before node 3 applied
// it (the lock is released after a second), and a plain read on node 3 then finds it.
func waitApplied(ctx context.Context, t *testing.T, g *Galera, db1 *sql.DB) {
	t.Helper()
	plain3, err := sql.Open("mysql", g.DSN(3))
	if err != nil {
		t.Fatal(err)
	}
	defer plain3.Close()
	lock, err := plain3.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK"); err != nil {
		t.Fatal(err)
	}
	if _, err := db1.ExecContext(ctx, "INSERT INTO galera_smoke VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		var n int
		if err := plain3.QueryRowContext(ctx, "SELECT COUNT(*) FROM galera_smoke WHERE id = 2").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("node 3, applier paused, sees the row committed on node 1 (%d): the premise of this check is gone", n)
	}
	unlocked := make(chan time.Time, 1)
	unlockErr := make(chan error, 1)
	go func() {
		time.Sleep(time.Second)
		unlocked <- time.Now()
		_, err := lock.ExecContext(ctx, "UNLOCK TABLES")
		unlockErr <- err
	}()
	if err := g.WaitApplied(ctx); err != nil {
		t.Fatal(err)
	}
	returned := time.Now()
	if err := <-unlockErr; err != nil {
		t.Fatal(err)
	}
	if at := <-unlocked; returned.Before(at) {
		t.Errorf("WaitApplied returned %s before node 3's applier was resumed", at.Sub(returned))
	}
	if n := count(); n != 1 {
		t.Errorf("node 3 after WaitApplied: %d rows with id 2, want 1", n)
	}
}

// TestGaleraPortWindow checks that every base StartGalera can pick keeps the cluster's ports
// out of the ephemeral range, where an outgoing connection can hold a joiner's SST port.
func TestGaleraPortWindow(t *testing.T) {
	for _, c := range []struct {
		lo, hi, from, to int
		noRoom           bool
	}{
		{32768, 60999, 20000, 32700, false}, // Linux's default
		{49152, 65535, 20000, 49100, false}, // IANA's
		{15000, 65000, 10000, 14900, false},
		{1024, 50000, 50000, 65500, false},
		{1024, 65535, 20000, 20000, true},
	} {
		from, to := galeraPortWindow(c.lo, c.hi)
		if from != c.from || to != c.to {
			t.Errorf("galeraPortWindow(%d, %d) = %d, %d; want %d, %d", c.lo, c.hi, from, to, c.from, c.to)
		}
		if c.noRoom {
			continue
		}
		for _, base := range []int{from, to} {
			if first, last := base+1, base+galeraPorts-1; first <= c.hi && last >= c.lo {
				t.Errorf("range %d-%d: base %d uses ports %d-%d inside it", c.lo, c.hi, base, first, last)
			}
		}
	}
}
