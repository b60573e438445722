package cluster_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/cluster"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/retry"
)

// The bar tests of the multi-host pool on a real 3-node MariaDB Galera cluster (scripts/galera:
// evs.suspect_timeout=PT2S, evs.inactive_timeout=PT4S, keepalive and check period 0.5 s). One
// cluster serves every subtest; each leaves it with three Synced nodes. Figures go to the test
// log (go test -v -run TestGalera ./cluster/); docs/cluster.md quotes them.
func TestGalera(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: Galera: starts a 3-node cluster (15-30 s) and kills and restarts nodes")
	}
	g := mysqltest.StartGalera(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	setup, err := sql.Open("mysql", g.DSN(1))
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close()
	// No AUTO_INCREMENT key: when a node leaves, Galera gives new sessions
	// another auto_increment_increment/offset while sessions opened before
	// keep theirs, so two nodes can hand out the same id and the second
	// insert fails with a duplicate key (1062), not with a retryable
	// certification conflict — a server-side effect the pool cannot help.
	if _, err := setup.ExecContext(ctx, `CREATE TABLE txlog (
		txid VARCHAR(64) NOT NULL PRIMARY KEY,
		node VARCHAR(64) NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	setup.Close()

	t.Run("spread", func(t *testing.T) { galeraSpread(t, g) })
	t.Run("kill-one", func(t *testing.T) { galeraKillOne(ctx, t, g) })
	t.Run("kill-two", func(t *testing.T) { galeraKillTwo(ctx, t, g) })
	t.Run("freeze-one", func(t *testing.T) { galeraFreezeOne(ctx, t, g) })
}

type galeraBed struct {
	c    *cluster.Connector
	p    *pool.Pool
	db   *sql.DB
	log  *logCapture
	node map[string]int // host name → node number
}

const galeraRebalancePeriod = 5 * time.Second

func newGaleraBed(t *testing.T, g *mysqltest.Galera, s cluster.Strategy, maxConns int) *galeraBed {
	t.Helper()
	var dsns []string
	b := &galeraBed{log: &logCapture{}, node: map[string]int{}}
	for n := 1; n <= mysqltest.GaleraNodes; n++ {
		// wsrep_sync_wait=1: reads see every write committed anywhere in the cluster before.
		dsns = append(dsns, g.DSN(n)+"&wsrep_sync_wait=1")
		b.node[g.Addr(n)] = n
	}
	hosts, err := cluster.MySQLHosts(dsns...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.New(cluster.Config{Hosts: hosts, Strategy: s, Ready: cluster.GaleraReady,
		HostTimeout: 2 * time.Second, ProbeInterval: 250 * time.Millisecond, MaxProbeInterval: 500 * time.Millisecond,
		RebalancePeriod: galeraRebalancePeriod, Logger: slog.New(b.log)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(c, pool.Config{Name: "galera-" + s.String(), MaxConns: maxConns,
		AcquireTimeout: 10 * time.Second, Logger: slog.New(b.log)})
	if err != nil {
		t.Fatal(err)
	}
	b.c, b.p, b.db = c, p, p.OpenDB()
	t.Cleanup(func() {
		b.db.Close()
		if err := p.Close(); err != nil {
			t.Errorf("pool Close: %v", err)
		}
	})
	return b
}

// perNode returns the pool's open connections per node number.
func (b *galeraBed) perNode() map[int]int {
	m := map[int]int{}
	for _, h := range b.c.Hosts() {
		m[b.node[h.Name]] = h.Conns.Total
	}
	return m
}

func galeraSpread(t *testing.T, g *mysqltest.Galera) {
	for _, tc := range []struct {
		s     cluster.Strategy
		conns int
	}{{cluster.RoundRobin, 10}, {cluster.LeastConnections, 11}, {cluster.Sequential, 6}} {
		t.Run(tc.s.String(), func(t *testing.T) {
			b := newGaleraBed(t, g, tc.s, tc.conns)
			eventually(t, "pool full", func() bool { return b.p.Stats().Total == tc.conns })
			got := b.perNode()
			t.Logf("%s, %d connections: per node %v", tc.s, tc.conns, got)
			if tc.s == cluster.Sequential {
				if got[1] != tc.conns {
					t.Fatalf("sequential: per node %v, want all %d on node 1", got, tc.conns)
				}
				return
			}
			even := float64(tc.conns) / 3
			for n := 1; n <= 3; n++ {
				if d := float64(got[n]) - even; d < -1 || d > 1 {
					t.Fatalf("%s: per node %v, node %d not within ±1 of %.2f", tc.s, got, n, even)
				}
			}
		})
	}
}

// op is one caller operation of the workload.
type op struct {
	write      bool
	txid       string
	start, end time.Time
	err        error
}

type workload struct {
	mu   sync.Mutex
	ops  []op
	stop atomic.Bool
	wg   sync.WaitGroup
	seq  atomic.Int64
}

// run starts 16 goroutines that each loop: one transaction through retry.Tx inserting a row
// with a unique transaction ID, then a read of it through retry.Do.
func (w *workload) run(ctx context.Context, db *sql.DB, tag string) {
	pol := retry.Policy{MaxAttempts: 5, BaseDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond,
		Budget: retry.NewBudget(retry.BudgetConfig{MinRetriesPerSec: 1000})}
	for i := 0; i < 16; i++ {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for !w.stop.Load() {
				txid := fmt.Sprintf("%s-%d", tag, w.seq.Add(1))
				o := op{write: true, txid: txid, start: time.Now()}
				o.err = retry.Tx(ctx, db, nil, pol, func(ctx context.Context, tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, "INSERT INTO txlog (txid, node) VALUES (?, @@wsrep_node_name)", txid)
					return err
				})
				o.end = time.Now()
				w.add(o)
				failed := o.err != nil
				if !failed {
					r := op{txid: txid, start: time.Now()}
					r.err = retry.Do(ctx, pol, func(ctx context.Context) error {
						var n int
						if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM txlog WHERE txid = ?", txid).Scan(&n); err != nil {
							return err
						}
						if n != 1 {
							return fmt.Errorf("read back %d rows of %s, want 1", n, txid)
						}
						return nil
					})
					r.end = time.Now()
					w.add(r)
					failed = r.err != nil
				}
				if failed && !w.stop.Load() {
					time.Sleep(10 * time.Millisecond) // pace a caller that gets errors
				}
			}
		}()
	}
}

func (w *workload) add(o op) { w.mu.Lock(); w.ops = append(w.ops, o); w.mu.Unlock() }

func (w *workload) finish() []op {
	w.stop.Store(true)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	out := append([]op(nil), w.ops...)
	sort.Slice(out, func(i, j int) bool { return out[i].end.Before(out[j].end) })
	return out
}

// successes counts successful writes (or reads) so far.
func (w *workload) successes(write bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, o := range w.ops {
		if o.write == write && o.err == nil {
			n++
		}
	}
	return n
}

// firstOKAfter returns the end of the first successful operation of the kind that started at
// or after t.
func firstOKAfter(ops []op, write bool, t time.Time) (time.Time, bool) {
	for _, o := range ops {
		if o.write == write && o.err == nil && !o.start.Before(t) {
			return o.end, true
		}
	}
	return time.Time{}, false
}

// nodeWatch polls each node's wsrep status every 20 ms and records when a condition first held.
type nodeWatch struct {
	g    *mysqltest.Galera
	mu   sync.Mutex
	last [4]mysqltest.NodeStatus
	down [4]bool
	stop chan struct{}
	done chan struct{}
}

func watchNodes(g *mysqltest.Galera) *nodeWatch {
	w := &nodeWatch{g: g, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			for n := 1; n <= 3; n++ {
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				st, err := g.Status(ctx, n)
				cancel()
				w.mu.Lock()
				w.last[n], w.down[n] = st, err != nil
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *nodeWatch) close() { close(w.stop); <-w.done }

// await waits until cond holds for node n's status and returns when it was first seen.
func (w *nodeWatch) await(t *testing.T, what string, n int, cond func(st mysqltest.NodeStatus, down bool) bool) time.Time {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		w.mu.Lock()
		ok := cond(w.last[n], w.down[n])
		w.mu.Unlock()
		if ok {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for node %d: %s (last %+v)", n, what, w.last[n])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func primaryOf(size int) func(mysqltest.NodeStatus, bool) bool {
	return func(st mysqltest.NodeStatus, down bool) bool {
		return !down && st.ClusterStatus == "Primary" && st.ClusterSize == size && st.LocalState == "Synced"
	}
}

// verify checks every successful write is on the given nodes once, and returns the counts.
func verify(ctx context.Context, t *testing.T, g *mysqltest.Galera, ops []op, tag string, nodes ...int) (ok, failed int) {
	t.Helper()
	want := map[string]bool{}
	for _, o := range ops {
		if !o.write {
			continue
		}
		if o.err == nil {
			want[o.txid] = true
			ok++
		} else {
			failed++
		}
	}
	for _, n := range nodes {
		db, err := sql.Open("mysql", g.DSN(n)+"&wsrep_sync_wait=1")
		if err != nil {
			t.Fatal(err)
		}
		rows, err := db.QueryContext(ctx, "SELECT txid, COUNT(*) FROM txlog WHERE txid LIKE ? GROUP BY txid", tag+"-%")
		if err != nil {
			db.Close()
			t.Fatalf("node %d: %v", n, err)
		}
		have := map[string]bool{}
		for rows.Next() {
			var id string
			var c int
			if err := rows.Scan(&id, &c); err != nil {
				t.Fatal(err)
			}
			if c != 1 {
				t.Errorf("node %d: transaction %s stored %d times", n, id, c)
			}
			have[id] = true
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		db.Close()
		missing := 0
		for id := range want {
			if !have[id] {
				missing++
				if missing <= 5 {
					t.Errorf("node %d: transaction %s reported success but is missing", n, id)
				}
			}
		}
		t.Logf("node %d: %d of %d successful transactions present (%d rows for %d attempted, %d reported errors); missing %d",
			n, len(want)-missing, len(want), len(have), ok+failed, failed, missing)
	}
	return ok, failed
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func galeraKillOne(ctx context.Context, t *testing.T, g *mysqltest.Galera) {
	const victim = 2
	b := newGaleraBed(t, g, cluster.RoundRobin, 12)
	eventually(t, "pool full", func() bool { return b.p.Stats().Total == 12 })
	watch := watchNodes(g)
	defer watch.close()
	w := &workload{}
	w.run(ctx, b.db, "k1")
	eventually(t, "warm-up writes", func() bool { return w.successes(true) >= 100 })

	tKill := time.Now()
	g.Kill(victim)
	tKilled := time.Now()
	tPC := watch.await(t, "survivors form a 2-node primary component", 1, primaryOf(2))
	t.Logf("kill-one: SIGKILL node %d took %s; Galera's own detection (survivors see cluster size 2, Primary): %s after the kill",
		victim, ms(tKilled.Sub(tKill)), ms(tPC.Sub(tKill)))
	eventually(t, "host down in the connector", func() bool { return !b.c.Hosts()[victim-1].Up })
	eventually(t, "writes after the new primary component", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		n := 0
		for _, o := range w.ops {
			if o.write && o.err == nil && o.start.After(tPC.Add(2*time.Second)) {
				n++
			}
		}
		return n >= 20
	})
	perNodeDown := b.perNode()

	tStart := time.Now()
	g.Start(victim)
	tSynced := time.Now()
	eventually(t, "host back in the connector", func() bool { return b.c.Hosts()[victim-1].Up })
	tBack := time.Now()
	var tBalanced time.Time
	eventually(t, "connections back on the restarted node", func() bool {
		if b.perNode()[victim] >= 3 { // an even share of 12 over 3 is 4; within ±1
			tBalanced = time.Now()
			return true
		}
		return false
	})
	perNodeBack := b.perNode()
	ops := w.finish()

	// Resume: the first operation of each kind that started after the new primary component
	// and succeeded.
	wOK, okW := firstOKAfter(ops, true, tPC)
	rOK, okR := firstOKAfter(ops, false, tPC)
	if !okW || !okR {
		t.Fatalf("no successful write (%v) or read (%v) after the new primary component", okW, okR)
	}
	t.Logf("kill-one: after the new primary component, first write started and succeeded by +%s, first read by +%s",
		ms(wOK.Sub(tPC)), ms(rOK.Sub(tPC)))
	if wOK.Sub(tPC) > 2*time.Second || rOK.Sub(tPC) > 2*time.Second {
		t.Errorf("work resumed more than 2 s after the new primary component: write +%v, read +%v", wOK.Sub(tPC), rOK.Sub(tPC))
	}
	// Errors: only transactions in flight on the killed node when it died.
	var errs []string
	for _, o := range ops {
		if o.err == nil {
			continue
		}
		inFlight := o.start.Before(tKilled) && o.end.After(tKill)
		errs = append(errs, fmt.Sprintf("%v write=%v start %+v end %+v: %v", inFlight, o.write,
			ms(o.start.Sub(tKill)), ms(o.end.Sub(tKill)), o.err))
		if !inFlight || !o.write || !errors.Is(o.err, retry.ErrAmbiguousCommit) {
			t.Errorf("caller error outside the transactions in flight at the kill (write=%v, started %s after the kill): %v",
				o.write, ms(o.start.Sub(tKill)), o.err)
		}
	}
	t.Logf("kill-one: %d caller errors: %s", len(errs), strings.Join(errs, "; "))
	t.Logf("kill-one: node %d restarted in %s (Synced); back in the connector %s later; %d+ connections on it %s after it came back (rebalance period %v); per node while down %v, after %v",
		victim, ms(tSynced.Sub(tStart)), ms(tBack.Sub(tSynced)), perNodeBack[victim], ms(tBalanced.Sub(tBack)),
		galeraRebalancePeriod, perNodeDown, perNodeBack)
	if d := tBalanced.Sub(tBack); d > galeraRebalancePeriod+3*time.Second {
		t.Errorf("connections returned to the restarted node %v after it came back, beyond the rebalance period %v", d, galeraRebalancePeriod)
	}
	ok, failed := verify(ctx, t, g, ops, "k1", 1, 3, victim)
	t.Logf("kill-one: %d transactions succeeded, %d reported errors, %d reads", ok, failed, len(ops)-ok-failed)
	logs(t, b.log, tKill)
}

func galeraKillTwo(ctx context.Context, t *testing.T, g *mysqltest.Galera) {
	// Node 1 dies, nodes 2 and 3 form a primary component, node 2 dies: node 3 alone has no
	// quorum (1047). Restarting node 2, the last to die, restores the primary component
	// {2, 3} (pc.recovery); node 1 then rejoins.
	b := newGaleraBed(t, g, cluster.RoundRobin, 12)
	eventually(t, "pool full", func() bool { return b.p.Stats().Total == 12 })
	watch := watchNodes(g)
	defer watch.close()
	w := &workload{}
	w.run(ctx, b.db, "k2")
	eventually(t, "warm-up writes", func() bool { return w.successes(true) >= 100 })

	tKill1 := time.Now()
	g.Kill(1)
	tPC := watch.await(t, "nodes 2 and 3 form a primary component", 3, primaryOf(2))
	eventually(t, "writes on nodes 2 and 3", func() bool { return w.successes(true) >= 200 })
	tKill2 := time.Now()
	g.Kill(2)
	tNonPrim := watch.await(t, "node 3 non-Primary", 3, func(st mysqltest.NodeStatus, down bool) bool {
		return !down && st.ClusterStatus == "non-Primary"
	})
	eventually(t, "all hosts down in the connector", func() bool { return b.c.AllHostsDownEvents() >= 1 })
	tAllDown := time.Now()
	t.Logf("kill-two: node 1 killed; 2-node primary component after %s; node 2 killed %s later; node 3 non-Primary %s after that; connector: all hosts down %s after node 3 turned non-Primary",
		ms(tPC.Sub(tKill1)), ms(tKill2.Sub(tKill1)), ms(tNonPrim.Sub(tKill2)), ms(tAllDown.Sub(tNonPrim)))
	// Each acquire fails at once while every host is down: direct calls, no retry.
	var direct []time.Duration
	for i := 0; i < 20; i++ {
		start := time.Now()
		_, err := b.db.ExecContext(ctx, "DO 1")
		d := time.Since(start)
		direct = append(direct, d)
		if !errors.Is(err, cluster.ErrAllHostsDown) || !errors.Is(err, pool.ErrUnavailable) {
			t.Errorf("direct call while all hosts are down: %v, want ErrAllHostsDown and pool.ErrUnavailable", err)
		}
		if d > time.Second {
			t.Errorf("direct call while all hosts are down took %v", d)
		}
	}
	sort.Slice(direct, func(i, j int) bool { return direct[i] < direct[j] })
	t.Logf("kill-two: 20 direct calls (no retry) while all hosts were down: median %v, slowest %v", direct[10], direct[19])
	// Let callers meet the outage for a while.
	eventually(t, "callers fail fast", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		n := 0
		for _, o := range w.ops {
			if o.err != nil && o.start.After(tAllDown) {
				n++
			}
		}
		return n >= 50
	})

	tStart := time.Now()
	startErr := make(chan error, 1)
	go func() { startErr <- g.TryStart(2) }()
	tQuorum := watch.await(t, "primary component back", 3, func(st mysqltest.NodeStatus, down bool) bool {
		return !down && st.ClusterStatus == "Primary" && st.LocalState == "Synced"
	})
	if err := <-startErr; err != nil {
		t.Fatal(err)
	}
	tResumed := time.Time{}
	eventually(t, "writes after quorum is back", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, o := range w.ops {
			if o.write && o.err == nil && !o.start.Before(tQuorum) {
				tResumed = o.end
				return true
			}
		}
		return false
	})
	// Node 1 rejoins by state transfer from node 2 or 3, whose donor role takes it out of use:
	// both must be in use first, or the donor's turn would be a second "all hosts down".
	eventually(t, "nodes 2 and 3 in use", func() bool { h := b.c.Hosts(); return h[1].Up && h[2].Up })
	g.Start(1)
	eventually(t, "writes with three nodes", func() bool { return w.successes(true) >= 400 })
	ops := w.finish()

	// One log line per episode of all hosts down, never repeated while down. Node 2 rejoins
	// through node 3, the only node left, whose donor turn can be a second short episode.
	if n, back := b.log.count("sqlpool: all hosts down"), b.log.count("sqlpool: hosts available again"); n < 1 || n != back {
		t.Errorf("%d all-hosts-down log lines for %d returns, want exactly one per episode", n, back)
	}
	// Fast errors: every operation that started while all hosts were down (after the connector
	// said so, before quorum came back) ended within a second.
	var slow, fast int
	var worst time.Duration
	var sample string
	for _, o := range ops {
		if o.start.Before(tAllDown) || !o.start.Before(tQuorum) || o.err == nil {
			continue
		}
		d := o.end.Sub(o.start)
		worst = max(worst, d)
		if d > time.Second {
			slow++
		} else {
			fast++
		}
		if sample == "" {
			sample = o.err.Error()
		}
		if !errors.Is(o.err, cluster.ErrAllHostsDown) {
			t.Errorf("error while all hosts were down does not say so: %v", o.err)
		}
	}
	t.Logf("kill-two: while all hosts were down: %d caller errors within 1 s, %d slower, slowest %s (retry.Tx: 5 attempts, 20-200 ms backoff); e.g. %q", fast, slow, ms(worst), sample)
	if worst > 3*time.Second {
		t.Errorf("a call took %v to fail while all hosts were down (its retry policy allows well under 1 s of backoff)", worst)
	}
	// Before the connector knew, calls ended with Galera's 1047 or waited for node 3's commits.
	var before []string
	for _, o := range ops {
		if o.err != nil && o.start.Before(tAllDown) {
			before = append(before, fmt.Sprintf("write=%v start %s dur %s: %.120s", o.write, ms(o.start.Sub(tKill2)), ms(o.end.Sub(o.start)), o.err))
		}
	}
	t.Logf("kill-two: %d caller errors of calls started before all-hosts-down: %s", len(before), strings.Join(before, "; "))
	t.Logf("kill-two: node 2 restarted at +%s after all-down; primary component back %s after the start; first write that started after it succeeded %s after quorum",
		ms(tStart.Sub(tAllDown)), ms(tQuorum.Sub(tStart)), ms(tResumed.Sub(tQuorum)))
	if d := tResumed.Sub(tQuorum); d > 2*time.Second {
		t.Errorf("work resumed %v after quorum was back, want within 2 s", d)
	}
	ok, failed := verify(ctx, t, g, ops, "k2", 1, 2, 3)
	t.Logf("kill-two: %d transactions succeeded, %d reported errors", ok, failed)
	logs(t, b.log, tKill1)
}

// logs prints the host events of the connector, timed from t0.
func logs(t *testing.T, l *logCapture, t0 time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var lines []string
	for i, m := range l.msgs {
		if strings.Contains(m, "host") || strings.Contains(m, "rebalanc") {
			lines = append(lines, fmt.Sprintf("%+.3fs %s %s", l.times[i].Sub(t0).Seconds(), m, l.attrs[i]))
		}
	}
	t.Logf("connector events:\n\t%s", strings.Join(lines, "\n\t"))
}
