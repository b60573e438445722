package bench

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/pool"
)

// The overload benchmark (docs/design/overload.md): open-loop Poisson arrivals at a multiple
// of the capacity measured in the same run, every request bounded by one deadline that covers
// the borrow, the statement and reading its rows, against a MariaDB pinned to one core
// (app/bench/overload.sh). Two classes of statement burn the server's CPU for a calibrated
// time: short (~1 ms) and scan (~50 ms), both a scan of MariaDB's sequence engine
// (SELECT SUM(CRC32(seq)) FROM seq_1_to_N), which fails with an error when the server stops it
// (KILL QUERY, max_statement_time). SELECT BENCHMARK would not: it returns 0 early.
//
// Per configuration it reports finished requests/s by class, useful work (the server's time
// spent on statements that finished, in % of one core, from each class's calibrated
// service time), latency p50/p99/p99.9 of finished requests from their arrival, shed (the
// pool refused at once: ErrOverloaded, ErrPoolExhausted), timed out waiting for a connection
// or in the statement, and the server connections opened per second (status Connections).

// OverloadClass is one kind of request.
type OverloadClass struct {
	Name  string
	Share float64       // of arrivals by count
	Want  time.Duration // the server CPU time aimed at
	loops int           // BENCHMARK iterations giving Want
	svc   time.Duration // measured service time alone (useful work)
}

func (c *OverloadClass) query() string {
	return "SELECT SUM(CRC32(seq)) FROM seq_1_to_" + strconv.Itoa(c.loops)
}

// overloadScenario is a mix of classes.
type overloadScenario struct {
	Name    string
	Classes []*OverloadClass
}

// overloadTarget is one configuration under test.
type overloadTarget struct {
	Name string
	open func(c driver.Connector) (*sql.DB, *pool.Pool, error)
}

// closeReasons counts the pool's connection closes by reason during one configuration.
var closeReasons reasonCount

type reasonCount struct {
	mu sync.Mutex
	m  map[string]int
}

func (r *reasonCount) note(reason string) {
	r.mu.Lock()
	if r.m == nil {
		r.m = map[string]int{}
	}
	r.m[reason]++
	r.mu.Unlock()
}

func (r *reasonCount) take() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k, v := range r.m {
		out = append(out, fmt.Sprintf("%s:%d", k, v))
	}
	r.m = nil
	slices.Sort(out)
	return strings.Join(out, ",")
}

type overloadResult struct {
	Round    int
	Scenario string
	Config   string
	Offered  float64 // req/s
	Capacity float64 // req/s measured (closed loop)
	Finished map[string]float64
	Useful   float64 // % of one core
	P50      time.Duration
	P99      time.Duration
	P999     time.Duration
	Shed     int
	WaitTO   int
	StmtTO   int
	Other    int
	Conns    float64 // server connections opened/s
	Stats    string
	FirstErr string
}

// RunOverload is the overload command (app/bench/cmd/overload).
func RunOverload(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("overload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("dsn", "", "MariaDB DSN (go-sql-driver/mysql syntax); required")
	dur := fs.Duration("duration", 5*time.Second, "measured time per configuration")
	warm := fs.Duration("warmup", time.Second, "arrivals before the measured time, not recorded")
	deadline := fs.Duration("deadline", time.Second, "each request's deadline: borrow, statement and rows")
	factor := fs.Float64("load", 2, "offered load, in multiples of the measured capacity")
	rounds := fs.Int("rounds", 3, "interleaved rounds")
	scenarios := fs.String("scenarios", "flood,mixed", "flood (short statements only), mixed (90 % short, 10 % scans by count), tenants (overload_tenants.go)")
	configs := fs.String("configs", "dbsql-1,dbsql-2,dbsql-4,dbsql-8,pool-64,pool-64-control,pool-64-adaptive,pool-64-deadline,pool-2,pool-4,pool-8",
		"configurations: dbsql-N (database/sql, N connections), pool-N (sqlpool, MaxConns N, defaults otherwise), "+
			"pool-N-adaptive (AdaptiveLimitFloor 1), "+
			"pool-N-deadline (ServerStatementDeadline on), pool-N-old (overload control off), "+
			"pool-N-nolimit (overload control without the adaptive limit)")
	shortMs := fs.Duration("short", time.Millisecond, "short statement's server time")
	scanMs := fs.Duration("scan", 50*time.Millisecond, "scan's server time")
	traceEvery := fs.Duration("trace", 0, "print each pool's Stats (limit, congestion, waiters, shed) to stderr at this interval; 0: off")
	count := fs.String("count", "completion", "which requests a configuration's figures count: completion (those that finished or failed in the measured time) or arrival (those that arrived in it, wherever they ended)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *count != "completion" && *count != "arrival" {
		fmt.Fprintf(stderr, "overload: -count %q: want completion or arrival\n", *count)
		return 2
	}
	if *dsn == "" {
		fmt.Fprintln(stderr, "overload: -dsn is required (app/bench/overload.sh starts a pinned MariaDB and passes it)")
		return 2
	}
	cfg, err := mysql.ParseDSN(*dsn)
	if err != nil {
		fmt.Fprintln(stderr, "overload: parsing -dsn:", err)
		return 2
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "overload:", err)
		return 2
	}
	mon := sql.OpenDB(conn)
	defer mon.Close()
	mon.SetMaxOpenConns(1)

	short := &OverloadClass{Name: "short", Share: 1, Want: *shortMs}
	scan := &OverloadClass{Name: "scan", Want: *scanMs}
	if err := calibrate(mon, short, scan); err != nil {
		fmt.Fprintln(stderr, "overload: calibrating:", err)
		return 1
	}
	fmt.Fprintf(stderr, "calibrated: short %d rows %.2f ms, scan %d rows %.2f ms (alone)\n",
		short.loops, ms(short.svc), scan.loops, ms(scan.svc))
	all := map[string]overloadScenario{
		"flood": {Name: "flood", Classes: []*OverloadClass{{Name: "short", Share: 1, loops: short.loops}}},
		"mixed": {Name: "mixed", Classes: []*OverloadClass{
			{Name: "short", Share: 0.9, loops: short.loops},
			{Name: "scan", Share: 0.1, loops: scan.loops}}},
	}
	var targets []overloadTarget
	for _, name := range strings.Split(*configs, ",") {
		t, err := overloadConfig(strings.TrimSpace(name))
		if err != nil {
			fmt.Fprintln(stderr, "overload:", err)
			return 2
		}
		targets = append(targets, t)
	}
	fmt.Fprintln(stdout, "round\tscenario\tconfig\toffered/s\tcapacity/s\tfinished/s by class\tuseful %\tp50 ms\tp99 ms\tp99.9 ms\tshed\ttimeout wait\ttimeout stmt\tother\tserver conns/s\tpool stats\tfirst error")
	for r := 1; r <= *rounds; r++ {
		for _, sn := range strings.Split(*scenarios, ",") {
			if ok, code := tenantsScenario(strings.TrimSpace(sn), r, conn, mon, short, *configs, *factor, *warm, *dur, *deadline, stdout, stderr); ok {
				if code != 0 { // the tenants scenario: overload_tenants.go
					return code
				}
				continue
			}
			sc, ok := all[strings.TrimSpace(sn)]
			if !ok {
				fmt.Fprintf(stderr, "overload: unknown scenario %q (want flood or mixed)\n", sn)
				return 2
			}
			// Each class's service time at saturation, measured in this round: useful work and
			// the scenario's capacity come from it.
			var perReq float64
			for _, cl := range sc.Classes {
				x, err := measureCapacity(conn, mon, overloadScenario{Name: cl.Name, Classes: []*OverloadClass{{Name: cl.Name, Share: 1, loops: cl.loops}}}, max(*dur/4, time.Second))
				if err != nil {
					fmt.Fprintln(stderr, "overload: measuring capacity:", err)
					return 1
				}
				cl.svc = time.Duration(float64(time.Second) / x)
				perReq += cl.Share * cl.svc.Seconds()
			}
			capacity := 1 / perReq
			// Interleave: rotate the order each round so no configuration always runs first.
			order := slices.Clone(targets)
			k := (r - 1) % len(order)
			order = append(order[k:], order[:k]...)
			for _, t := range order {
				res, err := runOverload(conn, mon, sc, t, capacity**factor, capacity, *warm, *dur, *deadline, *count == "arrival", *traceEvery, stderr)
				if err != nil {
					fmt.Fprintf(stderr, "overload: %s %s: %v\n", sc.Name, t.Name, err)
					return 1
				}
				res.Round = r
				printOverload(stdout, res, sc)
			}
		}
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func overloadConfig(name string) (overloadTarget, error) {
	parts := strings.Split(name, "-")
	if len(parts) < 2 {
		return overloadTarget{}, fmt.Errorf("configuration %q: want dbsql-N or pool-N[-variant]", name)
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n < 1 {
		return overloadTarget{}, fmt.Errorf("configuration %q: bad size", name)
	}
	variant := ""
	if len(parts) > 2 {
		variant = parts[2]
	}
	switch parts[0] {
	case "dbsql":
		return overloadTarget{Name: name, open: func(c driver.Connector) (*sql.DB, *pool.Pool, error) {
			db := sql.OpenDB(c)
			db.SetMaxOpenConns(n)
			db.SetMaxIdleConns(n)
			return db, nil, nil
		}}, nil
	case "pool":
		cfg := pool.Config{Name: "overload-" + name, MaxConns: n,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Trace:  &pool.Trace{Closed: func(_ string, r pool.CloseReason) { closeReasons.note(string(r)) }}}
		if err := overloadVariant(&cfg, variant); err != nil {
			return overloadTarget{}, fmt.Errorf("configuration %q: %w", name, err)
		}
		return overloadTarget{Name: name, open: func(c driver.Connector) (*sql.DB, *pool.Pool, error) {
			p, err := pool.New(c, cfg)
			if err != nil {
				return nil, nil, err
			}
			return p.OpenDB(), p, nil
		}}, nil
	}
	return overloadTarget{}, fmt.Errorf("configuration %q: want dbsql-N or pool-N[-variant]", name)
}

// calibrate finds each class's BENCHMARK loop count and its service time alone.
func calibrate(db *sql.DB, classes ...*OverloadClass) error {
	const probe = 100000
	var best time.Duration = math.MaxInt64
	for range 5 {
		t0 := time.Now()
		if _, err := db.Exec("SELECT SUM(CRC32(seq)) FROM seq_1_to_" + strconv.Itoa(probe)); err != nil {
			return err
		}
		best = min(best, time.Since(t0))
	}
	perLoop := float64(best) / probe
	for _, c := range classes {
		c.loops = max(int(float64(c.Want)/perLoop), 1)
		var sum time.Duration
		n := 0
		for t0 := time.Now(); n < 5 || time.Since(t0) < 300*time.Millisecond; n++ {
			t1 := time.Now()
			if _, err := db.Exec(c.query()); err != nil {
				return err
			}
			sum += time.Since(t1)
		}
		c.svc = sum / time.Duration(n)
	}
	return nil
}

// measureCapacity runs sc closed loop on database/sql with 2 connections (one keeps the server
// busy while the other's result travels) for d and returns requests/s.
func measureCapacity(c driver.Connector, mon *sql.DB, sc overloadScenario, d time.Duration) (float64, error) {
	if err := awaitQuiet(mon); err != nil {
		return 0, err
	}
	db := sql.OpenDB(c)
	defer db.Close()
	db.SetMaxOpenConns(2)
	db.SetMaxIdleConns(2)
	var n atomic.Int64
	var firstErr atomic.Value
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for time.Now().Before(end) {
				cl := pick(sc, rng)
				if _, err := db.Exec(cl.query()); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return 0, err
	}
	return float64(n.Load()) / d.Seconds(), nil
}

func pick(sc overloadScenario, rng *rand.Rand) *OverloadClass {
	x := rng.Float64()
	for _, c := range sc.Classes {
		if x < c.Share {
			return c
		}
		x -= c.Share
	}
	return sc.Classes[len(sc.Classes)-1]
}

// awaitQuiet waits (up to 10 s) until the server runs no statement but the monitor's own, so
// that one configuration's killed statements do not count against the next.
func awaitQuiet(mon *sql.DB) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var name string
		var running int
		if err := mon.QueryRow("SHOW GLOBAL STATUS LIKE 'Threads_running'").Scan(&name, &running); err != nil {
			return err
		}
		if running <= 1 || time.Now().After(deadline) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func serverConnections(mon *sql.DB) (int64, error) {
	var name string
	var n int64
	err := mon.QueryRow("SHOW GLOBAL STATUS LIKE 'Connections'").Scan(&name, &n)
	return n, err
}

type overloadOutcome struct {
	class   int
	lat     time.Duration
	kind    int // 0 finished, 1 shed, 2 timed out waiting, 3 timed out in statement, 4 other
	err     error
	arrival time.Time
	done    time.Time // when it finished or failed
}

// runOverload runs one configuration for warm+dur at rate arrivals/s.
//
// byArrival counts the requests that arrived in the measured time, wherever they ended (the
// first benchmark's way); otherwise, the default, the requests that finished or failed in it.
// Counting by arrival favours a configuration that queues for long: after the last arrival its
// queue keeps the server busy with measured requests for up to a deadline, while at the start
// the server still serves the warm-up's; with database/sql's random-order queue and 1 s
// deadlines that added ~0.5 s of service to a 4 s measurement (database/sql "finished" 110 %
// of the closed-loop capacity).
func runOverload(c driver.Connector, mon *sql.DB, sc overloadScenario, t overloadTarget, rate, capacity float64,
	warm, dur, deadline time.Duration, byArrival bool, traceEvery time.Duration, traceOut io.Writer) (overloadResult, error) {
	if err := awaitQuiet(mon); err != nil {
		return overloadResult{}, err
	}
	db, p, err := t.open(c)
	if err != nil {
		return overloadResult{}, err
	}
	// Fill: open the connections before the clock starts (a fixed-size pool fills itself).
	if err := fillConnections(db, p); err != nil {
		return overloadResult{}, err
	}
	outcomes := make(chan overloadOutcome, 4096)
	var collected []overloadOutcome
	doneCollect := make(chan struct{})
	go func() {
		for o := range outcomes {
			collected = append(collected, o)
		}
		close(doneCollect)
	}()
	closeReasons.take()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	start := time.Now()
	if p != nil && traceEvery > 0 {
		stop := make(chan struct{})
		defer close(stop)
		go traceStats(p, t.Name, start, traceEvery, traceOut, stop)
	}
	measureFrom := start.Add(warm)
	end := measureFrom.Add(dur)
	var conns0 int64
	var wg sync.WaitGroup
	next := start
	measuring := false
	for next.Before(end) {
		if !measuring && !next.Before(measureFrom) {
			measuring = true
			if conns0, err = serverConnections(mon); err != nil {
				return overloadResult{}, err
			}
		}
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		arrival := next
		ci := 0
		x := rng.Float64()
		for i, cl := range sc.Classes {
			if x < cl.Share || i == len(sc.Classes)-1 {
				ci = i
				break
			}
			x -= cl.Share
		}
		record := measuring || !byArrival
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := overloadRequest(db, sc.Classes[ci].query(), arrival, deadline)
			o.class = ci
			o.done = time.Now()
			if record && (byArrival || !o.done.Before(measureFrom) && o.done.Before(end)) {
				outcomes <- o
			}
		}()
		next = next.Add(time.Duration(rng.ExpFloat64() / rate * 1e9))
	}
	conns1, err := serverConnections(mon)
	if err != nil {
		return overloadResult{}, err
	}
	wg.Wait()
	close(outcomes)
	<-doneCollect
	res := overloadResult{Scenario: sc.Name, Config: t.Name, Offered: rate, Capacity: capacity,
		Finished: map[string]float64{}, Conns: float64(conns1-conns0) / dur.Seconds()}
	if p != nil {
		st := p.Stats()
		res.Stats = fmt.Sprintf("closed[%s] created=%d timeouts=%d limit=%d base=%.1fms shed=%d",
			closeReasons.take(), st.Created, st.Timeouts, st.Limit, ms(st.LimitBaseline), st.Shed)
	}
	var lats []time.Duration
	var useful time.Duration
	for _, o := range collected {
		switch o.kind {
		case 0:
			res.Finished[sc.Classes[o.class].Name]++
			useful += sc.Classes[o.class].svc
			lats = append(lats, o.lat)
		case 1:
			res.Shed++
		case 2:
			res.WaitTO++
		case 3:
			res.StmtTO++
		default:
			res.Other++
			if res.FirstErr == "" {
				res.FirstErr = o.err.Error()
			}
		}
	}
	for k, v := range res.Finished {
		res.Finished[k] = v / dur.Seconds()
	}
	res.Useful = 100 * useful.Seconds() / dur.Seconds()
	slices.Sort(lats)
	q := func(f float64) time.Duration {
		if len(lats) == 0 {
			return 0
		}
		return lats[min(int(f*float64(len(lats))), len(lats)-1)]
	}
	res.P50, res.P99, res.P999 = q(0.5), q(0.99), q(0.999)
	_ = db.Close()
	if p != nil {
		_ = p.Close()
	}
	return res, nil
}

// fillConnections opens a configuration's connections before its clock starts: database/sql's
// MaxOpen of them, or, for a pool (which fills itself), waits up to 10 s until all are idle.
func fillConnections(db *sql.DB, p *pool.Pool) error {
	if p != nil {
		for end := time.Now().Add(10 * time.Second); p.Stats().Idle < p.Stats().MaxConns && time.Now().Before(end); {
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	}
	n := db.Stats().MaxOpenConnections
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, cn := range conns {
			_ = cn.Close()
		}
	}()
	for range n {
		cn, err := db.Conn(context.Background())
		if err != nil {
			return err
		}
		conns = append(conns, cn)
	}
	return nil
}

// traceStats prints p's overload figures every interval until stop is closed (-trace).
func traceStats(p *pool.Pool, name string, start time.Time, every time.Duration, w io.Writer, stop <-chan struct{}) {
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
			st := p.Stats()
			fmt.Fprintf(w, "trace\t%s\t%.1fs\tlimit=%d congested=%v waiting=%d active=%d shed=%d changes=%d base=%.1fms\n",
				name, time.Since(start).Seconds(), st.Limit, st.Congested, st.Waiting, st.Active, st.Shed, st.LimitChanges, ms(st.LimitBaseline))
		}
	}
}

// overloadRequest is one request: borrow, run, read the rows, all within deadline from arrival.
func overloadRequest(db *sql.DB, query string, arrival time.Time, deadline time.Duration) overloadOutcome {
	ctx, cancel := context.WithDeadline(context.Background(), arrival.Add(deadline))
	defer cancel()
	o := overloadOutcome{arrival: arrival}
	cn, err := db.Conn(ctx)
	if err != nil {
		o.err = err
		switch {
		case errors.Is(err, pool.ErrOverloaded), errors.Is(err, pool.ErrPoolExhausted):
			o.kind = 1
		case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
			o.kind = 2
		default:
			o.kind = 4
		}
		return o
	}
	defer cn.Close()
	rows, err := cn.QueryContext(ctx, query)
	if err == nil {
		for rows.Next() {
			var v int64
			if err = rows.Scan(&v); err != nil {
				break
			}
		}
		if err == nil {
			err = rows.Err()
		}
		_ = rows.Close()
	}
	if err != nil {
		o.err = err
		var me *mysql.MySQLError
		switch {
		case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil,
			errors.As(err, &me) && (me.Number == 1969 || me.Number == 3024):
			o.kind = 3
		default:
			o.kind = 4
		}
		return o
	}
	o.lat = time.Since(arrival)
	return o
}

func printOverload(w io.Writer, r overloadResult, sc overloadScenario) {
	var by []string
	for _, c := range sc.Classes {
		by = append(by, fmt.Sprintf("%s %.0f", c.Name, r.Finished[c.Name]))
	}
	fmt.Fprintf(w, "%d\t%s\t%s\t%.0f\t%.0f\t%s\t%.0f\t%.1f\t%.1f\t%.1f\t%d\t%d\t%d\t%d\t%.1f\t%s\t%s\n",
		r.Round, r.Scenario, r.Config, r.Offered, r.Capacity, strings.Join(by, ", "), r.Useful,
		ms(r.P50), ms(r.P99), ms(r.P999), r.Shed, r.WaitTO, r.StmtTO, r.Other, r.Conns, r.Stats, r.FirstErr)
}

// overloadVariant applies a configuration's variant to cfg.
func overloadVariant(cfg *pool.Config, variant string) error {
	switch variant {
	case "":
		return nil
	case "adaptive": // with the adaptive limit
		cfg.AdaptiveLimitFloor = 1
		return nil
	case "deadline": // with the server-side statement time limit
		cfg.ServerStatementDeadline = true
		return nil
	case "old": // overload control off
		cfg.OverloadTarget = -1
		return nil
	case "nolimit": // overload control on, without the adaptive limit
		cfg.AdaptiveLimitFloor = -1
		return nil
	case "control": // overload control on, at its suggested target
		cfg.OverloadTarget = 5 * time.Millisecond
		return nil
	case "tenants": // fair waiting between the tenants scenario's two tenants (overload_tenants.go)
		cfg.Tenants = overloadTenants
		return nil
	}
	return fmt.Errorf("unknown variant %q", variant)
}
