package pool_test

// Dead-connection detection and recovery: fault-injection tests through p.OpenDB().
//
// Destructive tests (KILL, restart, read_only) each start a private mariadbd with
// mysqltest.StartMariaDB (about a second); the wait_timeout test uses the shared MariaDB of
// MYSQL_TEST_DSN and changes only its own sessions; the database-down test puts the fault proxy
// in front of whatever mysqltest.DSN names, the embedded server included. Measured figures are
// logged (go test -v -run TestDead ./pool/) and collected in docs/operations.md.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/internal/testutil"
	"github.com/sqlpool/sqlpool/pool"
)

// deadReadTimeout bounds every single read, so that a read that hangs fails the test instead of
// blocking it.
const deadReadTimeout = 15 * time.Second

// deadAdmin opens a plain database/sql handle (no pool of ours) for the test's own statements.
func deadAdmin(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db := sql.OpenDB(mysqlConnector(t, dsn))
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func deadCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), deadReadTimeout)
}

// deadConnID is one idempotent read: the server thread id of the connection that ran it.
func deadConnID(db *sql.DB) (int64, error) {
	ctx, cancel := deadCtx()
	defer cancel()
	var id int64
	err := db.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id)
	return id, err
}

// deadReads runs n reads spread over g goroutines and returns the errors, in no order.
func deadReads(g, n int, read func() error) []error {
	var next atomic.Int64
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := read(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return errs
}

// deadErrSummary counts errors by message, for logs.
func deadErrSummary(errs []error) string {
	if len(errs) == 0 {
		return "none"
	}
	count := map[string]int{}
	for _, err := range errs {
		count[err.Error()]++
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n\t%4d × %s", count[k], k)
	}
	return b.String()
}

// deadPooledIDs borrows all n connections of a full pool at once, so that each is a different
// physical connection, asks each for its CONNECTION_ID(), and returns them all. It returns the
// ids and the moment the last connection went back.
func deadPooledIDs(t *testing.T, db *sql.DB, n int) ([]int64, time.Time) {
	t.Helper()
	ctx, cancel := deadCtx()
	defer cancel()
	conns := make([]*sql.Conn, 0, n)
	ids := make([]int64, 0, n)
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatalf("db.Conn: %v", err)
		}
		conns = append(conns, c)
		var id int64
		if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatalf("SELECT CONNECTION_ID(): %v", err)
		}
		ids = append(ids, id)
	}
	for _, c := range conns {
		if err := c.Close(); err != nil {
			t.Fatalf("Conn.Close: %v", err)
		}
	}
	return ids, time.Now()
}

// deadKill kills the server threads ids as the privileged user and waits until
// information_schema.PROCESSLIST no longer shows any of them.
func deadKill(t *testing.T, admin *sql.DB, ids []int64) {
	t.Helper()
	ctx, cancel := deadCtx()
	defer cancel()
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = fmt.Sprint(id)
		if _, err := admin.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
			t.Fatalf("KILL CONNECTION %d: %v", id, err)
		}
	}
	q := "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN (" + strings.Join(list, ",") + ")"
	waitFor(t, "the process list no longer shows the killed threads", func() bool {
		var n int
		if err := admin.QueryRowContext(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n == 0
	})
}

// KILL of every pooled connection's thread. Read inside the bypass window, the dead connections
// are handed out unchecked (as in HikariCP) and the first reads fail; that count is reported,
// not asserted. Past the window every acquire probes, so 1,000 reads from 8 goroutines see no
// error at all, and none of them runs on a killed thread.
func TestDeadKillAllConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: fault test: kills every connection of a private mariadbd")
	}
	m := mysqltest.StartMariaDB(t)
	const size = 8
	const window = pool.DefaultAliveBypassWindow
	p := newMySQLPool(t, m.DSN(), pool.Config{Name: "dead-kill", MaxConns: size, AliveBypassWindow: window})
	db := p.OpenDB()
	defer db.Close()
	admin := deadAdmin(t, m.DSN())
	full := func() bool { return p.Stats().Idle == size }
	waitFor(t, "the pool is full", full)

	// Inside the window: report only.
	ids, returned := deadPooledIDs(t, db, size)
	deadKill(t, admin, ids)
	startedAfter := time.Since(returned)
	before := p.Stats()
	errs := deadReads(8, 1000, func() error { _, err := deadConnID(db); return err })
	after := p.Stats()
	t.Logf("inside the window: reads started %v after the connections came back (window %v); "+
		"%d of 1000 reads failed; probes %d (failed %d); errors: %s",
		startedAfter.Round(time.Millisecond), window, len(errs),
		after.Validations-before.Validations, after.ProbeFailures-before.ProbeFailures, deadErrSummary(errs))
	if startedAfter >= window {
		t.Logf("note: the kill took longer than the window on this machine; the reads above started outside it")
	}

	// Past the window: zero errors.
	waitFor(t, "the pool is full again", full)
	ids, returned = deadPooledIDs(t, db, size)
	deadKill(t, admin, ids)
	time.Sleep(time.Until(returned.Add(window + 50*time.Millisecond))) // real time must pass
	killed := map[int64]bool{}
	for _, id := range ids {
		killed[id] = true
	}
	before = p.Stats()
	var onKilled atomic.Int64
	start := time.Now()
	errs = deadReads(8, 1000, func() error {
		id, err := deadConnID(db)
		if err == nil && killed[id] {
			onKilled.Add(1)
		}
		return err
	})
	elapsed := time.Since(start)
	after = p.Stats()
	t.Logf("past the window: 1000 reads in %v, %d errors; probes %d (failed %d), created %d, closed %d",
		elapsed.Round(time.Millisecond), len(errs), after.Validations-before.Validations,
		after.ProbeFailures-before.ProbeFailures, after.Created-before.Created, after.Closed-before.Closed)
	if len(errs) != 0 {
		t.Fatalf("%d of 1000 reads past the bypass window failed after KILL of every pooled connection; want 0: %s",
			len(errs), deadErrSummary(errs))
	}
	if n := onKilled.Load(); n != 0 {
		t.Fatalf("%d reads reported the thread id of a killed connection", n)
	}
	if after.ProbeFailures == before.ProbeFailures {
		t.Fatal("no probe failed: the killed connections were not detected by validation")
	}
}

// A server restart under load from 16 goroutines. Every physical connection is numbered by
// Hooks.AfterConnect (SET @sqlpool_dead_conn = n) and every read returns that number, so a read
// served by a connection from before the restart is recognised. Asserted: no such read after
// the old server is gone; every read that starts after the new server accepts connections
// succeeds; recovery within 10 s (logged).
func TestDeadServerRestartUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: fault test: restarts a private mariadbd under load")
	}
	m := mysqltest.StartMariaDB(t)
	const readers = 16
	var connSeq atomic.Int64
	p := newMySQLPool(t, m.DSN(), pool.Config{
		Name:           "dead-restart",
		MaxConns:       8,
		AcquireTimeout: 10 * time.Second,
		Hooks: pool.Hooks{AfterConnect: func(ctx context.Context, c pool.HookConn) error {
			return c.Exec(ctx, fmt.Sprintf("SET @sqlpool_dead_conn = %d", connSeq.Add(1)))
		}},
	})
	db := p.OpenDB()
	defer db.Close()

	type read struct {
		start, end time.Time
		conn       int64 // AfterConnect's number; 0 on error
		err        error
	}
	var (
		mu      sync.Mutex
		reads   []read
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		backAt  atomic.Pointer[time.Time]
		okAfter [readers]atomic.Bool // reader i succeeded on a read started after backAt
	)
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := read{start: time.Now()}
				ctx, cancel := deadCtx()
				var n sql.NullInt64
				r.err = db.QueryRowContext(ctx, "SELECT @sqlpool_dead_conn").Scan(&n)
				cancel()
				r.end = time.Now()
				if r.err == nil {
					if !n.Valid {
						r.err = errors.New("@sqlpool_dead_conn is NULL: the session set up by AfterConnect was lost")
					}
					r.conn = n.Int64
				}
				if b := backAt.Load(); b != nil && r.err == nil && r.start.After(*b) {
					okAfter[i].Store(true)
				}
				mu.Lock()
				reads = append(reads, r)
				mu.Unlock()
			}
		}()
	}
	var stopOnce sync.Once
	stopReaders := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	defer stopReaders() // also when the test fails early
	// Normal operation first.
	waitFor(t, "reads under normal operation", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reads) >= 500
	})

	stopAt := time.Now()
	m.Stop(t)
	stoppedAt := time.Now()
	oldConns := connSeq.Load() // every connection numbered so far was opened to the old server
	m.Start(t)
	back := time.Now()
	backAt.Store(&back)
	recovered := func() bool {
		for i := range okAfter {
			if !okAfter[i].Load() {
				return false
			}
		}
		return true
	}
	deadline := back.Add(10 * time.Second)
	for !recovered() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if recovered() { // keep the load on for 1,000 more reads
		mu.Lock()
		more := len(reads) + 1000
		mu.Unlock()
		waitFor(t, "1,000 more reads after recovery", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(reads) >= more
		})
	}
	stopReaders()
	if !recovered() {
		t.Fatalf("not every reader had a successful read within 10 s of the restart")
	}

	var (
		normal, outageOK, afterOK int
		inFlightErrs, outageErrs  []error
		afterErrs                 []error
		oldAfter                  int
		firstOK                   time.Time
	)
	for _, r := range reads {
		switch {
		case r.start.Before(stopAt):
			switch {
			case r.err == nil:
				normal++
			case r.end.Before(stopAt):
				t.Errorf("read under normal operation failed: %v", r.err)
			default:
				inFlightErrs = append(inFlightErrs, r.err)
			}
		case r.start.Before(back):
			if r.err != nil {
				outageErrs = append(outageErrs, r.err)
			} else {
				outageOK++
			}
		default:
			if r.err != nil {
				afterErrs = append(afterErrs, r.err)
			} else {
				afterOK++
			}
		}
		if r.err == nil && r.start.After(stoppedAt) && r.conn <= oldConns {
			oldAfter++
		}
		if r.err == nil && r.end.After(back) && (firstOK.IsZero() || r.end.Before(firstOK)) {
			firstOK = r.end
		}
	}
	st := p.Stats()
	t.Logf("restart: stop took %v, start %v (server down %v); connections opened before: %d, total opened: %d",
		stoppedAt.Sub(stopAt).Round(time.Millisecond), back.Sub(stoppedAt).Round(time.Millisecond),
		back.Sub(stopAt).Round(time.Millisecond), oldConns, connSeq.Load())
	t.Logf("reads: %d succeeded before the stop, %d in flight at the stop failed; %d started during the outage (%d succeeded after the restart, %d failed); %d after, %d failed",
		normal, len(inFlightErrs), outageOK+len(outageErrs), outageOK, len(outageErrs), afterOK+len(afterErrs), len(afterErrs))
	t.Logf("recovery: first successful read %v after the server was back (%v after the stop); every one of %d readers succeeded within 10 s",
		firstOK.Sub(back).Round(time.Millisecond), firstOK.Sub(stopAt).Round(time.Millisecond), readers)
	t.Logf("errors of reads in flight at the stop: %s", deadErrSummary(inFlightErrs))
	t.Logf("errors of reads started during the outage: %s", deadErrSummary(outageErrs))
	t.Logf("pool: %v; probes %d (failed %d)", st, st.Validations, st.ProbeFailures)
	if oldAfter != 0 {
		t.Errorf("%d successful reads after the old server exited ran on a connection opened before the restart", oldAfter)
	}
	if len(afterErrs) != 0 {
		t.Errorf("%d reads started after the server was back failed; want 0: %s", len(afterErrs), deadErrSummary(afterErrs))
	}
	if afterOK == 0 {
		t.Error("no read after the restart")
	}
}

// A connection that was in use when the server went away, and whose borrower saw no error, must
// not come back trusted: it is probed on its next borrow even inside the bypass window. Without
// that, a restart shorter than the window hands it out unchecked and its next user gets an
// error although the server is up again.
func TestDeadConnReturnedAcrossOutageIsProbed(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: fault test: restarts a private mariadbd")
	}
	m := mysqltest.StartMariaDB(t)
	// A long window makes the race deterministic: the restart is well inside it.
	p := newMySQLPool(t, m.DSN(), pool.Config{Name: "dead-returned", MaxConns: 2, AliveBypassWindow: time.Minute})
	db := p.OpenDB()
	defer db.Close()
	waitFor(t, "the pool is full", func() bool { return p.Stats().Idle == 2 })
	ctx, cancel := deadCtx()
	defer cancel()
	held, err := db.Conn(ctx) // in use across the outage, no error seen
	if err != nil {
		t.Fatal(err)
	}
	other, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := held.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	m.Stop(t)
	// The other borrower sees the server go away: the pool records it.
	if err := other.PingContext(ctx); err == nil {
		t.Fatal("ping on a stopped server succeeded")
	}
	_ = other.Close()
	// Give back the held connection after the report, later than one tick of the pool's
	// coarse clock (at most 100 ms), so that its return time is after the report.
	time.Sleep(150 * time.Millisecond)
	_ = held.Close()
	m.Start(t)
	waitFor(t, "the pool is full again", func() bool { return p.Stats().Total == 2 })
	// Borrow both connections at once, so that the one held across the outage is used.
	before := p.Stats()
	var errs []error
	var conns []*sql.Conn
	for range 2 {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if err := c.PingContext(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range conns {
		_ = c.Close()
	}
	after := p.Stats()
	t.Logf("after the restart: %d of 2 borrows failed, probes %d (failed %d): %s", len(errs),
		after.Validations-before.Validations, after.ProbeFailures-before.ProbeFailures, deadErrSummary(errs))
	if len(errs) != 0 {
		t.Fatalf("a connection returned after the server-gone report was handed out unchecked: %s", deadErrSummary(errs))
	}
}

// wait_timeout=2 as a session parameter of the DSN and 3 s idle: the server has closed every
// pooled connection; the next 1,000 reads see no error. Only session variables change, so the
// shared MariaDB can be used.
func TestDeadWaitTimeout(t *testing.T) {
	mysqltest.RequireMariaDB(t, "wait_timeout is enforced by MariaDB, not by the embedded server")
	cfg, err := mysql.ParseDSN(mysqltest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["wait_timeout"] = "2"
	const size = 4
	p := newMySQLPool(t, cfg.FormatDSN(), pool.Config{Name: "dead-wait-timeout", MaxConns: size})
	db := p.OpenDB()
	defer db.Close()
	waitFor(t, "the pool is full", func() bool { return p.Stats().Idle == size })

	// Use every connection once and check the session setting.
	ctx, cancel := deadCtx()
	defer cancel()
	conns := make([]*sql.Conn, size)
	for i := range conns {
		if conns[i], err = db.Conn(ctx); err != nil {
			t.Fatal(err)
		}
		var wt int
		if err := conns[i].QueryRowContext(ctx, "SELECT @@SESSION.wait_timeout").Scan(&wt); err != nil || wt != 2 {
			t.Fatalf("@@SESSION.wait_timeout = %d, %v; want 2", wt, err)
		}
	}
	for _, c := range conns {
		_ = c.Close()
	}
	time.Sleep(3 * time.Second) // the server's wait_timeout must pass
	before := p.Stats()
	start := time.Now()
	errs := deadReads(4, 1000, func() error { _, err := deadConnID(db); return err })
	after := p.Stats()
	t.Logf("after 3 s idle with wait_timeout=2: 1000 reads in %v, %d errors; probes %d (failed %d), created %d",
		time.Since(start).Round(time.Millisecond), len(errs), after.Validations-before.Validations,
		after.ProbeFailures-before.ProbeFailures, after.Created-before.Created)
	if len(errs) != 0 {
		t.Fatalf("%d of 1000 reads failed after wait_timeout closed the idle connections: %s", len(errs), deadErrSummary(errs))
	}
	// Detected either by a probe (outside the bypass window) or, before it, by the driver's
	// no-traffic liveness check at checkout (conn.ResetSession: the DB from OpenDB parks
	// connections, so checkouts run it first): either way they were closed.
	if after.ProbeFailures-before.ProbeFailures == 0 && after.Closed-before.Closed == 0 {
		t.Fatal("no probe failed and nothing was closed: the connections closed by wait_timeout were not detected")
	}
}

// Database down: the fault proxy blackholes the network (accepts, never answers). Every acquire
// fails with ErrAcquireTimeout no earlier than AcquireTimeout and soon after it, naming the last
// connection error; goroutines stay bounded; the pool recovers once the network is back. Runs
// on whatever mysqltest.DSN names, the embedded server included.
func TestDeadDatabaseDown(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: fault test: a network outage of several seconds")
	}
	dsn := mysqltest.DSN(t)
	mcfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := mysqltest.NewProxy(t, mcfg.Addr)
	const size = 5
	const acquireTimeout = time.Second
	const slack = 1500 * time.Millisecond // the loose upper bound: 2 shared cores, -race
	p := newMySQLPool(t, proxy.DSN(dsn), pool.Config{Name: "dead-down", MaxConns: size, AcquireTimeout: acquireTimeout})
	db := p.OpenDB()
	defer db.Close()
	waitFor(t, "the pool is full", func() bool { return p.Stats().Idle == size })
	selectOne := func() error {
		ctx, cancel := deadCtx()
		defer cancel()
		var one int
		return db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
	}
	if errs := deadReads(size, 100, selectOne); len(errs) != 0 {
		t.Fatalf("reads before the outage: %s", deadErrSummary(errs))
	}
	goroutinesBefore := runtime.NumGoroutine()

	proxy.Blackhole(true)
	// Connections returned within the bypass window would be handed out unchecked (and then
	// hang in the query: callers need query timeouts, as with HikariCP). Wait past it, as
	// HikariCP's test does with its 2 s period.
	time.Sleep(pool.DefaultAliveBypassWindow + 50*time.Millisecond)

	// Round 0 is one acquire alone: it probes the dead idle connections one after the other,
	// each within what is left of its AcquireTimeout, and must stop at the deadline. Rounds 1
	// and 2 are 10 acquires at once.
	const rounds = 3
	var waits []time.Duration
	var lastErrs = map[string]int{}
	for round := range rounds {
		acquirers := 10
		if round == 0 {
			acquirers = 1
		}
		type result struct {
			d   time.Duration
			err error
		}
		res := make([]result, acquirers)
		var wg sync.WaitGroup
		for i := range res {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang fails, not blocks
				defer cancel()
				start := time.Now()
				c, err := db.Conn(ctx)
				res[i] = result{time.Since(start), err}
				if err == nil {
					_ = c.Close()
				}
			}()
		}
		wg.Wait()
		for i, r := range res {
			waits = append(waits, r.d)
			if r.err == nil {
				t.Fatalf("round %d, acquire %d: got a connection while the database is unreachable", round, i)
			}
			if !errors.Is(r.err, pool.ErrAcquireTimeout) {
				t.Fatalf("round %d, acquire %d: %v; want ErrAcquireTimeout", round, i, r.err)
			}
			if r.d < acquireTimeout || r.d > acquireTimeout+slack {
				t.Errorf("round %d, acquire %d failed after %v; want between AcquireTimeout (%v) and %v",
					round, i, r.d, acquireTimeout, acquireTimeout+slack)
			}
			var ate *pool.AcquireTimeoutError
			if !errors.As(r.err, &ate) || ate.LastErr == nil {
				t.Fatalf("round %d, acquire %d: %v does not carry the last connection error", round, i, r.err)
			}
			if !strings.Contains(r.err.Error(), "; last connection error: "+ate.LastErr.Error()) {
				t.Fatalf("round %d, acquire %d: message %q does not name the last connection error", round, i, r.err)
			}
			lastErrs[ate.LastErr.Error()]++
		}
	}
	goroutinesDuring := runtime.NumGoroutine()
	slices.Sort(waits)
	t.Logf("outage: %d acquires failed after min %v / median %v / max %v (AcquireTimeout %v)", len(waits),
		waits[0].Round(time.Millisecond), waits[len(waits)/2].Round(time.Millisecond),
		waits[len(waits)-1].Round(time.Millisecond), acquireTimeout)
	for msg, n := range lastErrs {
		t.Logf("outage: %d × last connection error %q", n, msg)
	}
	t.Logf("goroutines: %d before the outage, %d after %d acquires in it", goroutinesBefore, goroutinesDuring, len(waits))
	// The proxy parks one goroutine per connection the creator dialled into the blackhole (about
	// one per ConnectTimeout); the pool itself must add nothing per acquire.
	if goroutinesDuring > goroutinesBefore+2*size+10 {
		t.Errorf("goroutines grew from %d to %d during the outage", goroutinesBefore, goroutinesDuring)
	}

	proxy.Blackhole(false)
	restored := time.Now()
	var recovery time.Duration
	for {
		if err := selectOne(); err == nil {
			recovery = time.Since(restored)
			break
		}
		if time.Since(restored) > 10*time.Second {
			t.Fatalf("the pool did not recover within 10 s of the network coming back: %v", p.Stats())
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
	errs := deadReads(8, 1000, selectOne)
	t.Logf("recovery: first successful read %v after the network came back; then 1000 reads, %d errors",
		recovery.Round(time.Millisecond), len(errs))
	if len(errs) != 0 {
		t.Fatalf("reads after recovery failed: %s", deadErrSummary(errs))
	}
	waitFor(t, "the goroutine count to settle", func() bool {
		return runtime.NumGoroutine() <= goroutinesBefore+5
	})
}

// The caller's ctx ending during a probe is not a database failure: it costs at most the one
// connection whose ping it cut (the driver closes that socket), not every idle connection the
// acquire would try next. The server is healthy but slow (200 ms each way through the proxy).
func TestDeadCallerDeadlineDuringProbe(t *testing.T) {
	dsn := mysqltest.DSN(t)
	mcfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := mysqltest.NewProxy(t, mcfg.Addr)
	const size = 5
	p := newMySQLPool(t, proxy.DSN(dsn), pool.Config{Name: "dead-caller-deadline", MaxConns: size})
	db := p.OpenDB()
	defer db.Close()
	waitFor(t, "the pool is full", func() bool { return p.Stats().Idle == size })
	time.Sleep(pool.DefaultAliveBypassWindow + 50*time.Millisecond) // every idle connection needs a probe
	proxy.SetLatency(200 * time.Millisecond)
	before := p.Stats()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	c, err := db.Conn(ctx)
	cancel()
	if err == nil {
		_ = c.Close()
		t.Fatal("got a connection although every probe takes 400 ms and the ctx 100 ms")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("db.Conn = %v; want the ctx's deadline", err)
	}
	proxy.SetLatency(0)
	after := p.Stats()
	t.Logf("ctx deadline during a probe: %v; closed %d, probes %d (failed %d), last error %v", err,
		after.Closed-before.Closed, after.Validations-before.Validations, after.ProbeFailures-before.ProbeFailures, after.LastError)
	if n := after.Closed - before.Closed; n > 1 {
		t.Fatalf("the caller's deadline closed %d connections; want at most the one whose probe it cut", n)
	}
	if after.LastError != before.LastError {
		t.Fatalf("the caller's deadline was recorded as the pool's last connection error: %v", after.LastError)
	}
	if errs := deadReads(size, 100, func() error { _, err := deadConnID(db); return err }); len(errs) != 0 {
		t.Fatalf("reads afterwards: %s", deadErrSummary(errs))
	}
}

// Read-only after a failover: a write by the unprivileged user on a server switched to
// read_only fails with 1290; that connection is evicted, and the pool's log says why. A
// borrower's own read-only transaction (1792 on a write) evicts nothing.
func TestDeadReadOnlyFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: fault test: turns a private mariadbd read-only and back")
	}
	m := mysqltest.StartMariaDB(t)
	m.Exec(t, "CREATE TABLE test.dead_ro (id INT PRIMARY KEY AUTO_INCREMENT, v INT)")
	var logs deadLog
	p := newMySQLPool(t, m.UnprivilegedDSN(), pool.Config{Name: "dead-ro", MaxConns: 1, Logger: logs.logger()})
	db := p.OpenDB()
	defer db.Close()
	ctx, cancel := deadCtx()
	defer cancel()
	insert := "INSERT INTO dead_ro (v) VALUES (1)"
	mustExec(t, db, insert)
	id1, err := deadConnID(db)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("server turned read-only", func(t *testing.T) {
		m.Exec(t, "SET GLOBAL read_only = 1")
		defer m.Exec(t, "SET GLOBAL read_only = 0")
		closed := p.Stats().Closed
		_, writeErr := db.ExecContext(ctx, insert)
		var me *mysql.MySQLError
		if !errors.As(writeErr, &me) || me.Number != 1290 || !strings.Contains(me.Message, "--read-only") {
			t.Fatalf("write on a read-only server: %v; want error 1290 naming --read-only", writeErr)
		}
		if got := p.Stats().Closed; got != closed+1 {
			t.Fatalf("Stats().Closed went from %d to %d; want the connection closed on release", closed, got)
		}
		const reason = "read-only server (1290 --read-only)"
		closedLine := logs.line("connection closed")
		if !strings.Contains(closedLine, reason) {
			t.Fatalf("the pool's log line for the close does not give the reason %q:\n%s", reason, logs.String())
		}
		id2, err := deadConnID(db)
		if err != nil {
			t.Fatal(err)
		}
		if id2 == id1 {
			t.Fatalf("CONNECTION_ID() is still %d after the eviction", id1)
		}
		t.Logf("write on the read-only server: %v; connection %d evicted, now %d; log: %s", writeErr, id1, id2, closedLine)
	})

	t.Run("borrower's own read-only transaction", func(t *testing.T) {
		id, err := deadConnID(db)
		if err != nil {
			t.Fatal(err)
		}
		closed := p.Stats().Closed
		want1792 := func(what string, err error) {
			t.Helper()
			var me *mysql.MySQLError
			if !errors.As(err, &me) || me.Number != 1792 {
				t.Fatalf("%s: %v; want error 1792", what, err)
			}
		}
		// START TRANSACTION READ ONLY sent as a statement, ended with ROLLBACK.
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ExecContext(ctx, "START TRANSACTION READ ONLY"); err != nil {
			t.Fatal(err)
		}
		_, err = c.ExecContext(ctx, insert)
		want1792("write in START TRANSACTION READ ONLY", err)
		if _, err := c.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
		// The same, left open for the release plan to roll back.
		c, err = db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ExecContext(ctx, "START TRANSACTION READ ONLY"); err != nil {
			t.Fatal(err)
		}
		_, err = c.ExecContext(ctx, insert)
		want1792("write in an open START TRANSACTION READ ONLY", err)
		_ = c.Close()
		// BeginTx with ReadOnly.
		tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		_, err = tx.ExecContext(ctx, insert)
		want1792("write in BeginTx(ReadOnly)", err)
		_ = tx.Rollback()

		if got := p.Stats().Closed; got != closed {
			t.Fatalf("Stats().Closed went from %d to %d: the borrower's own read-only transaction evicted a connection", closed, got)
		}
		if id2, err := deadConnID(db); err != nil || id2 != id {
			t.Fatalf("CONNECTION_ID() = %d, %v; want the same connection %d", id2, err, id)
		}
		mustExec(t, db, insert) // and it still writes
	})
}

// deadLog collects a pool's log lines (debug level included).
type deadLog struct{ testutil.Buffer }

// line returns the first logged line containing s.
func (l *deadLog) line(s string) string {
	for _, ln := range strings.Split(l.String(), "\n") {
		if strings.Contains(ln, s) {
			return ln
		}
	}
	return ""
}

func (l *deadLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
