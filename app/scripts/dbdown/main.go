// Command dbdown runs HikariCP's "Bad Behavior: Handling Database Down" scenario against
// sqlpool: a pool with min = max = 5 connections; every period a task borrows a connection
// (bounded by AcquireTimeout), runs SELECT 1 under a short context deadline (HikariCP's test
// used setQueryTimeout(1)) and gives the connection back. After a normal phase the network to
// the database is blackholed (a fault proxy accepts connections and never answers, which is
// what an unplugged cable looks like), then restored. It prints every task, the distribution of
// acquire and query failure times during the outage, and the recovery time after the restore.
//
//	go run ./app/scripts/dbdown                       # embedded server, 60 s
//	go run ./app/scripts/dbdown -dsn 'user:pass@tcp(127.0.0.1:3306)/test' -duration 60s -timeout 5s
//
// The phases are a quarter of -duration normal, -outage (default half of -duration) blackholed,
// and the rest restored. Each task runs on a goroutine of its own, as requests to a server do,
// so tasks overlap while acquires wait out their timeout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/app/embedded"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
	_ "github.com/sqlpool/sqlpool/mysqldialect" // MySQL's pool.Dialect, registered on import
	"github.com/sqlpool/sqlpool/pool"
)

type options struct {
	dsn          string
	duration     time.Duration
	outage       time.Duration
	timeout      time.Duration
	period       time.Duration
	queryTimeout time.Duration
	size         int
	verbose      bool
}

func main() {
	var o options
	flag.StringVar(&o.dsn, "dsn", "", "go-sql-driver/mysql DSN of the database; empty starts the embedded server")
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "total run time")
	flag.DurationVar(&o.outage, "outage", 0, "how long the network is blackholed (default half of -duration), starting after a quarter of -duration")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Second, "the pool's AcquireTimeout (HikariCP's connectionTimeout)")
	flag.DurationVar(&o.period, "period", 2*time.Second, "a task starts every period")
	flag.DurationVar(&o.queryTimeout, "query-timeout", time.Second, "context deadline of each task's query")
	flag.IntVar(&o.size, "size", 5, "MaxConns = MinIdleConns")
	flag.BoolVar(&o.verbose, "v", false, "also print the pool's warnings")
	flag.Parse()
	if o.outage == 0 {
		o.outage = o.duration / 2
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "dbdown:", err)
		os.Exit(1)
	}
}

type nopLogger struct{}

func (nopLogger) Print(...any) {}

// task is one borrow-query-return cycle.
type task struct {
	n                int
	start            time.Duration // since the run began
	phase            string
	acquire, query   time.Duration
	acquireErr       error
	queryErr         error
	acquireIsTimeout bool
}

func run(o options) error {
	server := ""
	if o.dsn == "" {
		dsn, stop, err := embedded.Start()
		if err != nil {
			return fmt.Errorf("starting the embedded server: %w", err)
		}
		defer stop()
		o.dsn = dsn
		server = "embedded go-mysql-server"
	}
	mcfg, err := mysql.ParseDSN(o.dsn)
	if err != nil {
		return fmt.Errorf("parsing the DSN: %w", err)
	}
	if server == "" {
		server = "server at " + mcfg.Addr
	}
	proxy, err := mysqltest.StartProxy(mcfg.Addr)
	if err != nil {
		return err
	}
	defer proxy.Close()
	pcfg, err := mysql.ParseDSN(proxy.DSN(o.dsn))
	if err != nil {
		return err
	}
	pcfg.Logger = nopLogger{} // dropped sockets are the point
	connector, err := mysql.NewConnector(pcfg)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if o.verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	p, err := pool.New(connector, pool.Config{
		Name:           "dbdown",
		MaxConns:       o.size,
		MinIdleConns:   o.size,
		AcquireTimeout: o.timeout,
		Logger:         logger,
	})
	if err != nil {
		return err
	}
	defer p.Close()
	db := p.OpenDB()
	defer db.Close()

	normalEnd := o.duration / 4
	outageEnd := normalEnd + o.outage
	cfg := p.Config()
	fmt.Printf("dbdown: %s through fault proxy %s\n", server, proxy.Addr())
	fmt.Printf("pool: MaxConns=MinIdleConns=%d, AcquireTimeout %v, ValidationTimeout %v, AliveBypassWindow %v; "+
		"a task every %v (query deadline %v); Go %s, GOMAXPROCS %d\n",
		o.size, cfg.AcquireTimeout, cfg.ValidationTimeout, cfg.AliveBypassWindow, o.period, o.queryTimeout,
		runtime.Version(), runtime.GOMAXPROCS(0))
	fmt.Printf("phases: normal 0–%v, network blackholed %v–%v, restored %v–%v\n\n",
		normalEnd, normalEnd, outageEnd, outageEnd, o.duration)

	begin := time.Now()
	since := func() time.Duration { return time.Since(begin) }
	var (
		mu             sync.Mutex
		tasks          []task
		wg             sync.WaitGroup
		goroutinesPeak int
		goroutinesPre  int
		restoredAt     time.Duration
		recovery       = make(chan time.Duration, 1)
	)
	phaseAt := func(d time.Duration) string {
		switch {
		case d < normalEnd:
			return "normal"
		case d < outageEnd:
			return "outage"
		}
		return "restored"
	}
	runTask := func(n int) {
		defer wg.Done()
		t := task{n: n, start: since()}
		t.phase = phaseAt(t.start)
		st := time.Now()
		c, err := db.Conn(context.Background())
		t.acquire = time.Since(st)
		if err != nil {
			t.acquireErr = err
			t.acquireIsTimeout = errors.Is(err, pool.ErrAcquireTimeout)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), o.queryTimeout)
			st = time.Now()
			var one int
			t.queryErr = c.QueryRowContext(ctx, "SELECT 1").Scan(&one)
			t.query = time.Since(st)
			cancel()
			_ = c.Close()
		}
		fmt.Println(t)
		mu.Lock()
		tasks = append(tasks, t)
		mu.Unlock()
	}

	outageStart := time.NewTimer(normalEnd)
	outageStop := time.NewTimer(outageEnd)
	end := time.NewTimer(o.duration)
	tick := time.NewTicker(o.period)
	defer tick.Stop()
	n := 0
	wg.Add(1)
	go runTask(n)
loop:
	for {
		select {
		case <-tick.C:
			n++
			wg.Add(1)
			go runTask(n)
			if g := runtime.NumGoroutine(); phaseAt(since()) == "outage" && g > goroutinesPeak {
				goroutinesPeak = g
			}
		case <-outageStart.C:
			goroutinesPre = runtime.NumGoroutine()
			proxy.Blackhole(true)
			fmt.Printf("%8.3fs  --- network blackholed ---\n", since().Seconds())
		case <-outageStop.C:
			if g := runtime.NumGoroutine(); g > goroutinesPeak {
				goroutinesPeak = g
			}
			proxy.Blackhole(false)
			restoredAt = since()
			fmt.Printf("%8.3fs  --- network restored ---\n", restoredAt.Seconds())
			// Recovery as a caller sees it: borrow and query until it works.
			wg.Add(1)
			go func() {
				defer wg.Done()
				restored := time.Now()
				for {
					c, err := db.Conn(context.Background())
					if err == nil {
						ctx, cancel := context.WithTimeout(context.Background(), o.queryTimeout)
						var one int
						err = c.QueryRowContext(ctx, "SELECT 1").Scan(&one)
						cancel()
						_ = c.Close()
						if err == nil {
							recovery <- time.Since(restored)
							return
						}
					}
					if time.Since(restored) > o.duration {
						close(recovery)
						return
					}
				}
			}()
		case <-end.C:
			break loop
		}
	}
	wg.Wait()
	goroutinesEnd := runtime.NumGoroutine()
	slices.SortFunc(tasks, func(a, b task) int { return a.n - b.n })

	fmt.Println()
	for _, ph := range []string{"normal", "outage", "restored"} {
		var ok, okAfterRestore int
		var acqFail, qFail []time.Duration
		var acqTimeouts int
		lastErrs := map[string]int{}
		for _, t := range tasks {
			if t.phase != ph {
				continue
			}
			switch {
			case t.acquireErr != nil:
				acqFail = append(acqFail, t.acquire)
				if t.acquireIsTimeout {
					acqTimeouts++
				}
				var ate *pool.AcquireTimeoutError
				if errors.As(t.acquireErr, &ate) && ate.LastErr != nil {
					lastErrs[ate.LastErr.Error()]++
				}
			case t.queryErr != nil:
				qFail = append(qFail, t.query)
			default:
				ok++
				if ph == "outage" && t.start+t.acquire+t.query >= restoredAt {
					okAfterRestore++
				}
			}
		}
		total := ok + len(acqFail) + len(qFail)
		fmt.Printf("%-8s %3d tasks: %3d ok, %3d acquire failures (%d ErrAcquireTimeout), %3d query failures\n",
			ph, total, ok, len(acqFail), acqTimeouts, len(qFail))
		if okAfterRestore > 0 {
			fmt.Printf("         (%d of the ok tasks were still waiting when the network came back)\n", okAfterRestore)
		}
		if len(acqFail) > 0 {
			fmt.Printf("         acquire failed after %s (AcquireTimeout %v)\n", dist(acqFail), o.timeout)
		}
		if len(qFail) > 0 {
			fmt.Printf("         query failed after   %s (query deadline %v)\n", dist(qFail), o.queryTimeout)
		} else if ph == "outage" {
			fmt.Printf("         no query failed: no task got a connection while the network was down\n")
		}
		for msg, k := range lastErrs {
			fmt.Printf("         %3d × last connection error: %s\n", k, msg)
		}
	}
	if d, ok := <-recovery; ok {
		first := time.Duration(-1)
		for _, t := range tasks {
			end := t.start + t.acquire + t.query
			if end >= restoredAt && t.acquireErr == nil && t.queryErr == nil && (first < 0 || end-restoredAt < first) {
				first = end - restoredAt
			}
		}
		fmt.Printf("recovery: first successful borrow+query %v after the network came back", d.Round(time.Microsecond))
		if first >= 0 {
			fmt.Printf("; first task to succeed ended %v after it", first.Round(time.Millisecond))
		}
		fmt.Println()
	} else {
		fmt.Println("recovery: none")
	}
	fmt.Printf("goroutines: %d before the outage, at most %d during it, %d at the end\n",
		goroutinesPre, goroutinesPeak, goroutinesEnd)
	fmt.Printf("pool: %v, probes %d (failed %d)\n", p.Stats(), p.Stats().Validations, p.Stats().ProbeFailures)
	return nil
}

func (t task) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%8.3fs  task %3d  %-8s ", t.start.Seconds(), t.n, t.phase)
	switch {
	case t.acquireErr != nil:
		fmt.Fprintf(&b, "acquire FAILED after %v: %v", t.acquire.Round(time.Millisecond), t.acquireErr)
	case t.queryErr != nil:
		fmt.Fprintf(&b, "acquire %v, query FAILED after %v: %v", t.acquire.Round(time.Microsecond),
			t.query.Round(time.Millisecond), t.queryErr)
	default:
		fmt.Fprintf(&b, "ok: acquire %v, query %v", t.acquire.Round(time.Microsecond), t.query.Round(time.Microsecond))
	}
	return b.String()
}

// dist formats min / median / p99 / max (nearest rank) of ds.
func dist(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(q float64) time.Duration {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("min %v / median %v / p99 %v / max %v (n=%d)", r(s[0]), r(rank(0.5)), r(rank(0.99)), r(s[len(s)-1]), len(s))
}
