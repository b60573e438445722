package cluster_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/cluster"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/retry"
)

// silentOp is one caller transaction of the silent-host workload.
type silentOp struct {
	txid       string
	start, end time.Time
	inserted   time.Time // when the INSERT of the last attempt returned (COMMIT next)
	err        error
}

// A server that stops answering: three hosts, each a fault proxy in front of the same server,
// under 16 callers committing one-row transactions with a 1 s deadline each; proxy 2 is
// stalled (Blackhole: it accepts, holds what it reads and never answers) for 2.5 s and then
// resumed, three times. Asserted each run: the heartbeat marks the host down within 1 s; no
// caller waits past its own deadline (+100 ms) except one whose COMMIT was in flight on the
// stalled host (database/sql's Tx.Commit takes no context, and go-sql-driver does not watch
// one for it: such a COMMIT waits for the host; counted and logged); the only errors are those of callers whose
// transaction was on the stalled host before it was marked down (their deadline, or
// ErrAmbiguousCommit); a transaction that started after the stall commits on another host
// within 1.5 s; the host is back, with an even share (±1) of the pool's connections, within 5 s
// of the resume. At the end every successful commit is in the table exactly once.
func TestSilentHostBehindProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: stalls a proxied server three times under load")
	}
	// The embedded server does not keep every committed row under this load (seen: a third
	// of them missing), so the lost-commit check needs a real server.
	mysqltest.RequireMariaDB(t, "counts every committed row of a proxied server")
	dsn := mysqltest.DSN(t)
	setup, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close()
	table := fmt.Sprintf("silent_%d", time.Now().UnixNano())
	if _, err := setup.Exec("CREATE TABLE " + table + " (id BIGINT AUTO_INCREMENT PRIMARY KEY, txid VARCHAR(64) NOT NULL, UNIQUE KEY (txid))"); err != nil {
		t.Fatal(err)
	}
	defer setup.Exec("DROP TABLE " + table)

	var proxies []*mysqltest.Proxy
	var dsns []string
	for range 3 {
		px := mysqltest.NewProxy(t, mysqlAddr(t, dsn))
		proxies = append(proxies, px)
		dsns = append(dsns, px.DSN(dsn))
	}
	hosts, err := cluster.MySQLHosts(dsns...)
	if err != nil {
		t.Fatal(err)
	}
	lc := &logCapture{}
	c, err := cluster.New(cluster.Config{Hosts: hosts, Strategy: cluster.RoundRobin,
		HostTimeout: time.Second, ProbeInterval: 100 * time.Millisecond, MaxProbeInterval: 250 * time.Millisecond,
		RebalancePeriod: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond, HeartbeatTimeout: 300 * time.Millisecond,
		Logger: slog.New(lc)})
	if err != nil {
		t.Fatal(err)
	}
	const maxConns = 12
	p, err := pool.New(c, pool.Config{Name: "silent", MaxConns: maxConns, AcquireTimeout: 2 * time.Second, Logger: slog.New(lc)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Errorf("pool Close: %v", err)
		}
	}()
	db := p.OpenDB()
	defer db.Close()
	eventually(t, "pool full", func() bool { return p.Stats().Total == maxConns })

	var (
		mu   sync.Mutex
		ops  []silentOp
		seq  atomic.Int64
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	pol := retry.Policy{MaxAttempts: 3, BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond,
		Budget: retry.NewBudget(retry.BudgetConfig{MinRetriesPerSec: 1000})}
	const deadline = time.Second
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				o := silentOp{txid: fmt.Sprintf("s-%d", seq.Add(1)), start: time.Now()}
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				o.err = retry.Tx(ctx, db, nil, pol, func(ctx context.Context, tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, "INSERT INTO "+table+" (txid) VALUES (?)", o.txid)
					o.inserted = time.Now()
					return err
				})
				cancel()
				o.end = time.Now()
				mu.Lock()
				ops = append(ops, o)
				mu.Unlock()
			}
		}()
	}
	stopped := false
	stopLoad := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer stopLoad()
	snapshot := func() []silentOp {
		mu.Lock()
		defer mu.Unlock()
		return append([]silentOp(nil), ops...)
	}
	time.Sleep(500 * time.Millisecond) // warm-up under load

	const victim = 1 // proxies[1], host 2
	for run := 1; run <= 3; run++ {
		tStall := time.Now()
		proxies[victim].Blackhole(true)
		eventually(t, "the stalled host marked down", func() bool { return !c.Hosts()[victim].Up })
		tDown := time.Now()
		time.Sleep(time.Until(tStall.Add(2500 * time.Millisecond))) // the stall lasts this long
		tResume := time.Now()
		proxies[victim].Blackhole(false)
		var tEven time.Time
		eventually(t, "the host back with an even share", func() bool {
			hs := c.Hosts()
			if hs[victim].Up && hs[victim].Conns.Total >= maxConns/3-1 {
				tEven = time.Now()
				return true
			}
			return false
		})
		time.Sleep(300 * time.Millisecond) // load on the recovered cluster before the next run
		all := snapshot()
		var firstOK time.Time
		var errs []string
		commitsHeld := 0
		for _, o := range all {
			if o.start.Before(tStall.Add(-deadline)) || o.start.After(tEven) {
				continue
			}
			if o.err == nil && !o.start.Before(tStall) && (firstOK.IsZero() || o.end.Before(firstOK)) {
				firstOK = o.end
			}
			// 400 ms of slack: under -race on a loaded 2-core CI machine three callers once
			// overran their 1 s deadline together by 107 ms (a process-wide pause); a caller held
			// until the stalled host's resume would overrun by up to 1.5 s.
			if waited := o.end.Sub(o.start); waited > deadline+400*time.Millisecond {
				// database/sql's driver.Tx.Commit has no context and go-sql-driver sends COMMIT
				// without watching one: a COMMIT in flight on the stalled host waits for it.
				inCommit := !o.inserted.IsZero() && o.inserted.Before(tDown) && !o.end.Before(tResume)
				if inCommit {
					commitsHeld++
				} else {
					t.Errorf("run %d: a caller with a %v deadline waited %v (not in a COMMIT on the stalled host)", run, deadline, waited)
				}
			}
			if o.err == nil {
				continue
			}
			errs = append(errs, fmt.Sprintf("+%s: %.80v", ms(o.start.Sub(tStall)), o.err))
			ownDeadline := errors.Is(o.err, context.DeadlineExceeded) || errors.Is(o.err, retry.ErrAmbiguousCommit)
			if !ownDeadline || o.start.After(tDown) {
				t.Errorf("run %d: caller error outside the transactions caught on the stalled host (started %s after the stall, host down at +%s): %v",
					run, ms(o.start.Sub(tStall)), ms(tDown.Sub(tStall)), o.err)
			}
		}
		t.Logf("run %d: host marked down %s after the stall; first commit started after the stall done at +%s; back with %d connections %s after the resume; %d COMMITs in flight on the stalled host held until the resume; %d caller errors (own deadline or ambiguous commit): %v",
			run, ms(tDown.Sub(tStall)), ms(firstOK.Sub(tStall)), c.Hosts()[victim].Conns.Total, ms(tEven.Sub(tResume)), commitsHeld, len(errs), errs)
		if d := tDown.Sub(tStall); d > time.Second {
			t.Errorf("run %d: stalled host marked down %v after the stall, want ≤ 1s (heartbeat 200ms + 300ms)", run, d)
		}
		if firstOK.IsZero() || firstOK.Sub(tStall) > 1500*time.Millisecond {
			t.Errorf("run %d: first commit after the stall at +%v, want ≤ 1.5s", run, firstOK.Sub(tStall))
		}
		if d := tEven.Sub(tResume); d > 5*time.Second {
			t.Errorf("run %d: even share %v after the resume, want ≤ 5s", run, d)
		}
	}
	stopLoad()
	// Every successful commit exactly once (the UNIQUE key forbids more; check presence).
	all := snapshot()
	have := map[string]bool{}
	rows, err := setup.Query("SELECT txid FROM " + table)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		have[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	okN, lost := 0, 0
	for _, o := range all {
		if o.err == nil {
			okN++
			if !have[o.txid] {
				lost++
			}
		}
	}
	t.Logf("%d transactions, %d committed, %d rows in the table, %d lost; pool %v", len(all), okN, len(have), lost, p.Stats())
	if lost != 0 {
		t.Errorf("%d successful commits are missing from the table", lost)
	}
}

// mysqlAddr returns the address of a go-sql-driver/mysql DSN.
func mysqlAddr(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Addr
}
