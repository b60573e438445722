package bench

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sqlpool/sqlpool/app/embedded"
)

// ChildFlag is the hidden flag with which jmh re-executes itself for a fork: its value is the
// Spec, as JSON. The child prints one JSON line per iteration ({"iter":…}) and one with its
// Raw ({"raw":…}) on stdout.
const ChildFlag = "fork-child"

// Exit codes of Run.
const (
	ExitOK    = 0
	ExitError = 1 // the run failed (unreachable server, benchmark error)
	ExitUsage = 2 // bad flags
)

// Options are jmh's parsed flags.
type Options struct {
	DSN              string
	PG               string // PostgreSQL URL (-pg)
	PGDriver         string // DriverPgx or DriverPq (-pg-driver)
	Stub             bool
	Benchmarks       []string
	Threads          []int
	ContendedThreads []int
	SaturatedThreads []int
	Hold             time.Duration
	Pools            []string
	Size             int
	Warmup           int
	Iterations       int
	IterationTime    time.Duration
	Forks            int
	Format           string
	Rate             float64
	RateFraction     float64
	Proxy            bool
	child            string
}

const usageHead = `usage: jmh [-dsn DSN | -pg URL [-pg-driver pgx|pq] | -stub] [flags]

JMH-style benchmarks of sqlpool against plain database/sql and a naive safe pool (with -pg
and pgx also pgx's pgxpool behind stdlib.OpenDBFromPool). Without -dsn, -pg or -stub the
benchmarks run on an embedded server (go-mysql-server) started in-process. On a server every
pool's connections go through the same byte- and packet-counting proxy (on PostgreSQL: bytes
only). Scores are ops/ms; Error is the half-width of the 99.9 % confidence
interval (Student t over all measured iterations of all forks), as JMH prints it.

flags:
`

func newFlagSet(o *Options, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("jmh", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.DSN, "dsn", "", "go-sql-driver/mysql `DSN` of the server to benchmark (pinged first, 5s timeout)")
	fs.StringVar(&o.PG, "pg", "", "PostgreSQL `URL` of the server to benchmark (postgres://user@host:port/db?sslmode=disable; pinged first)")
	fs.StringVar(&o.PGDriver, "pg-driver", DriverPgx, "with -pg, the `driver`: pgx (pgx v5 stdlib.GetConnector) or pq (lib/pq)")
	fs.BoolVar(&o.Stub, "stub", false, "benchmark on the stub driver (pool overhead only, no traffic figures)")
	fs.Func("bench", "comma-separated `benchmarks`: "+strings.Join(AllBenchmarks, ",")+" (default all)", func(v string) error {
		var err error
		o.Benchmarks, err = parseNames(v, AllBenchmarks)
		return err
	})
	fs.Func("threads", "comma-separated goroutine `counts` for the cycle benchmarks (default 1,4,8,64)", func(v string) error {
		var err error
		o.Threads, err = parseInts(v)
		return err
	})
	fs.Func("contended-threads", "comma-separated goroutine `counts` for contended (default 64,256)", func(v string) error {
		var err error
		o.ContendedThreads, err = parseInts(v)
		return err
	})
	fs.Func("saturated-threads", "comma-separated goroutine `counts` for saturated (default 256)", func(v string) error {
		var err error
		o.SaturatedThreads, err = parseInts(v)
		return err
	})
	fs.DurationVar(&o.Hold, "hold", time.Millisecond, "saturated: how long each borrower holds its connection (time.Sleep)")
	fs.Func("pools", "comma-separated `pools`: "+strings.Join(AllPools, ",")+", and with -pg -pg-driver pgx "+PoolPgxpool+" (default "+strings.Join(AllPools, ",")+"; with -pg "+strings.Join(PostgresPools(DriverPgx), ",")+")", func(v string) error {
		var err error
		o.Pools, err = parseNames(v, append(slices.Clone(AllPools), PoolPgxpool))
		return err
	})
	fs.IntVar(&o.Size, "size", 8, "pool size for every pool (MaxConns; MaxOpen = MaxIdle for database/sql)")
	fs.IntVar(&o.Warmup, "warmup", 3, "warmup iterations per fork")
	fs.IntVar(&o.Iterations, "iterations", 5, "measured iterations per fork")
	fs.DurationVar(&o.IterationTime, "iteration-time", time.Second, "length of one iteration")
	fs.IntVar(&o.Forks, "forks", 1, "child processes per (benchmark, pool, threads); 0 runs in this process")
	fs.StringVar(&o.Format, "format", "table", "output `format`: table or json (one object per result and line)")
	fs.Float64Var(&o.Rate, "rate", 0, "contended: offered load in requests per ms, all goroutines together (0: calibrate)")
	fs.Float64Var(&o.RateFraction, "rate-fraction", 0.5, "contended with -rate 0: this fraction of database-sql's closed-loop cycleStatement throughput at the same goroutine count")
	fs.BoolVar(&o.Proxy, "proxy", true, "on a server, count traffic through a proxy (same for every pool)")
	fs.StringVar(&o.child, ChildFlag, "", "")
	fs.Usage = func() {
		fmt.Fprint(stderr, usageHead)
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name == ChildFlag {
				return
			}
			name, usage := flag.UnquoteUsage(f)
			line := "  -" + f.Name
			if name != "" {
				line += " " + name
			}
			fmt.Fprintf(stderr, "%s\n    \t%s", line, usage)
			if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
				fmt.Fprintf(stderr, " (default %s)", f.DefValue)
			}
			fmt.Fprintln(stderr)
		})
	}
	return fs
}

func parseNames(v string, known []string) ([]string, error) {
	var out []string
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		i := slices.IndexFunc(known, func(k string) bool { return strings.EqualFold(k, n) })
		if i < 0 {
			return nil, fmt.Errorf("unknown name %q (want %s)", n, strings.Join(known, ","))
		}
		if !slices.Contains(out, known[i]) {
			out = append(out, known[i])
		}
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

func parseInts(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

// ParseOptions parses jmh's flags and checks them.
func ParseOptions(args []string, stderr io.Writer) (*Options, error) {
	o := &Options{}
	fs := newFlagSet(o, stderr)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) (*Options, error) {
		err := fmt.Errorf(format, a...)
		fmt.Fprintf(stderr, "jmh: %v\n", err)
		fs.Usage()
		return nil, err
	}
	if fs.NArg() > 0 {
		return bad("unexpected arguments: %q", fs.Args())
	}
	if o.Benchmarks == nil {
		o.Benchmarks = AllBenchmarks
	}
	if o.Pools == nil {
		o.Pools = AllPools
		if o.PG != "" {
			o.Pools = PostgresPools(o.PGDriver)
		}
	}
	if o.Threads == nil {
		o.Threads = []int{1, 4, 8, 64}
	}
	if o.ContendedThreads == nil {
		o.ContendedThreads = []int{64, 256}
	}
	if o.SaturatedThreads == nil {
		o.SaturatedThreads = []int{256}
	}
	switch {
	case o.DSN != "" && o.Stub:
		return bad("-dsn and -stub exclude each other")
	case o.PG != "" && (o.DSN != "" || o.Stub):
		return bad("-pg excludes -dsn and -stub")
	case o.PGDriver != DriverPgx && o.PGDriver != DriverPq:
		return bad("-pg-driver must be %s or %s, not %q", DriverPgx, DriverPq, o.PGDriver)
	case slices.Contains(o.Pools, PoolPgxpool) && (o.PG == "" || o.PGDriver != DriverPgx):
		return bad("pool %s needs -pg and -pg-driver %s", PoolPgxpool, DriverPgx)
	case o.Size < 1:
		return bad("-size must be at least 1")
	case o.Warmup < 0:
		return bad("-warmup must not be negative")
	case o.Iterations < 1:
		return bad("-iterations must be at least 1")
	case o.IterationTime <= 0:
		return bad("-iteration-time must be positive")
	case o.Hold < 0:
		return bad("-hold must not be negative")
	case o.Forks < 0:
		return bad("-forks must not be negative")
	case o.Format != "table" && o.Format != "json":
		return bad("-format must be table or json, not %q", o.Format)
	case o.Rate < 0 || math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0):
		return bad("-rate must be a non-negative number")
	case !(o.RateFraction > 0) || math.IsInf(o.RateFraction, 0):
		return bad("-rate-fraction must be positive")
	}
	return o, nil
}

// Run is jmh: it parses args, runs the benchmarks and writes the report to stdout and progress
// to stderr. It returns ExitUsage for bad flags and ExitError when the run fails.
func Run(args []string, stdout, stderr io.Writer) int {
	o, err := ParseOptions(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if o.child != "" {
		return runChild(o, stdout, stderr)
	}
	r := &runner{o: o, stdout: stdout, stderr: stderr}
	if err := r.run(); err != nil {
		fmt.Fprintf(stderr, "jmh: %v\n", err)
		return ExitError
	}
	return ExitOK
}

type runner struct {
	o              *Options
	stdout, stderr io.Writer
	target         *Target
	targetName     string // stub, embedded, dsn
	dsn            string // resolved server DSN (embedded's when started here)
	results        []*Result
	planned, done  time.Duration
	started        time.Time
	runs, nspecs   int
}

func (r *runner) info(format string, a ...any) {
	w := r.stdout
	if r.o.Format == "json" {
		w = r.stderr
	}
	fmt.Fprintf(w, format+"\n", a...)
}

func (r *runner) run() error {
	o := r.o
	switch {
	case o.Stub:
		r.targetName = "stub"
		r.target = OpenStub()
	case o.PG != "":
		r.targetName, r.dsn = "postgres-"+o.PGDriver, o.PG
		direct, err := OpenPostgres(o.PG, o.PGDriver, false)
		if err != nil {
			return err
		}
		if err := direct.Ping(PingTimeout); err != nil {
			return fmt.Errorf("cannot reach PostgreSQL at %s: %w", redact(o.PG), err)
		}
		t, err := OpenPostgres(o.PG, o.PGDriver, o.Proxy)
		if err != nil {
			return err
		}
		defer t.Close()
		r.target = t
	default:
		r.targetName, r.dsn = "dsn", o.DSN
		if o.DSN == "" {
			dsn, stop, err := embedded.Start()
			if err != nil {
				return fmt.Errorf("starting the embedded server: %w", err)
			}
			defer func() { _ = stop() }()
			r.targetName, r.dsn = "embedded", dsn
		}
		// Ping directly, not through the proxy, so that the error names the real cause.
		direct, err := OpenServer(r.dsn, false)
		if err != nil {
			return err
		}
		if err := direct.Ping(PingTimeout); err != nil {
			return fmt.Errorf("cannot reach %s server at %s: %w", r.targetName, redact(r.dsn), err)
		}
		t, err := OpenServer(r.dsn, o.Proxy)
		if err != nil {
			return err
		}
		defer t.Close()
		r.target = t
	}
	r.info("# sqlpool jmh: target %s%s", r.targetName, r.serverInfo())
	r.info("# machine: %s", Machine())
	r.info("# pools of %d; warmup %d × %v, measurement %d × %v, forks %d", o.Size, o.Warmup, o.IterationTime,
		o.Iterations, o.IterationTime, o.Forks)

	groups := r.plan()
	rates := map[int]float64{}
	r.started = time.Now()
	for _, g := range groups {
		if g[0].Benchmark == BenchContended {
			rate, ok := rates[g[0].Threads]
			if !ok {
				var err error
				if rate, err = r.calibrate(g[0].Threads); err != nil {
					return err
				}
				rates[g[0].Threads] = rate
			}
			for i := range g {
				g[i].Rate = rate
			}
		}
		if err := r.runGroup(g); err != nil {
			return err
		}
	}
	fmt.Fprintf(r.stderr, "# Run complete. Total time: %v\n", time.Since(r.started).Round(time.Second))
	if o.Format == "table" {
		fmt.Fprintln(r.stdout)
		PrintTable(r.stdout, r.results)
		fmt.Fprintln(r.stdout)
		PrintRatios(r.stdout, r.results)
	}
	return nil
}

func (r *runner) serverInfo() string {
	if r.target.Stub {
		return " (bench.StubConnector)"
	}
	db := sql.OpenDB(r.target.Connector())
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), PingTimeout)
	defer cancel()
	var v string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return ""
	}
	proxy := ", traffic counted by a proxy"
	if !r.target.Counting() {
		proxy = ", no traffic counting"
	}
	return fmt.Sprintf(" %s, server version %s%s", redact(r.dsn), v, proxy)
}

// redact hides the password of a DSN.
func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		return u.Redacted()
	}
	at := strings.LastIndex(dsn, "@")
	if at < 0 {
		return dsn
	}
	if u, _, ok := strings.Cut(dsn[:at], ":"); ok {
		return u + ":***" + dsn[at:]
	}
	return dsn
}

// plan lists the specs in run order, grouped by benchmark and concurrency: one spec per pool
// in each group, so that the pools compared with each other run close together in time.
func (r *runner) plan() [][]Spec {
	o := r.o
	var groups [][]Spec
	for _, b := range o.Benchmarks {
		threads := o.Threads
		switch b {
		case BenchContended:
			threads = o.ContendedThreads
		case BenchSaturated:
			threads = o.SaturatedThreads
		}
		for _, t := range threads {
			var g []Spec
			for _, p := range o.Pools {
				s := Spec{Benchmark: b, Pool: p, Threads: t, Size: o.Size, Warmup: o.Warmup,
					Iterations: o.Iterations, IterationTime: o.IterationTime}
				if b == BenchSaturated {
					s.Hold = o.Hold
				}
				g = append(g, s)
				r.planned += specTime(s, o.Forks)
				r.nspecs++
			}
			groups = append(groups, g)
		}
	}
	return groups
}

func specTime(s Spec, forks int) time.Duration {
	return time.Duration(max(forks, 1)*(s.Warmup+s.Iterations)) * s.IterationTime
}

func (r *runner) progress() {
	r.runs++
	pct := 100 * float64(r.done) / float64(max(r.planned, 1))
	eta := r.planned - r.done
	if r.done > 0 {
		eta = time.Duration(float64(eta) * float64(time.Since(r.started)) / float64(r.done))
	}
	fmt.Fprintf(r.stderr, "# Run progress: %.2f%% complete, ETA %s (run %d of %d, load %.2f)\n", pct,
		fmtHMS(eta), r.runs, r.nspecs*max(r.o.Forks, 1), Load1())
}

func fmtHMS(d time.Duration) string {
	s := int(d.Round(time.Second) / time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}

// calibrate measures database-sql's closed-loop cycleStatement throughput at g goroutines (one
// warmup and one measured iteration) and returns RateFraction of it, or -rate when given.
func (r *runner) calibrate(g int) (float64, error) {
	if r.o.Rate > 0 {
		return r.o.Rate, nil
	}
	s := Spec{Benchmark: BenchCycleStatement, Pool: PoolDatabaseSQL, Threads: g, Size: r.o.Size, Warmup: 1,
		Iterations: 1, IterationTime: r.o.IterationTime}
	var raw *Raw
	var err error
	if r.o.Forks == 0 {
		raw, err = RunSpec(s, r.target, r.stderr, nil)
	} else {
		raw, err = r.fork(s, nil)
	}
	if err != nil {
		return 0, fmt.Errorf("calibrating the contended rate: %w", err)
	}
	rate := r.o.RateFraction * raw.Scores[0]
	r.info("# contended at %d goroutines: offered load %.3f ops/ms = %.2f × database-sql closed-loop cycleStatement (%.3f ops/ms)",
		g, rate, r.o.RateFraction, raw.Scores[0])
	return rate, nil
}

// runGroup runs one group of specs (the pools at one benchmark and concurrency). With forks,
// the forks are interleaved — fork 1 of every pool, then fork 2 of every pool, … — so that a
// change in the machine's load during the group falls on every pool alike; a result is printed
// as soon as its last fork is done (with one fork, right after it ran).
func (r *runner) runGroup(g []Spec) error {
	o := r.o
	raws := make([][]*Raw, len(g))
	for f := 1; f <= max(o.Forks, 1); f++ {
		for i, s := range g {
			r.progress()
			r.info("\n# Benchmark: %s (pool size %d)", s, s.Size)
			if s.Benchmark == BenchContended {
				r.info("# Offered load: %.3f ops/ms (open loop)", s.Rate)
			}
			var raw *Raw
			var err error
			if o.Forks == 0 {
				raw, err = RunSpec(s, r.target, r.stderr, r.printIter)
			} else {
				r.info("# Fork: %d of %d", f, o.Forks)
				raw, err = r.fork(s, r.printIter)
			}
			if err != nil {
				return err
			}
			raws[i] = append(raws[i], raw)
			r.done += specTime(s, 1)
			if f == max(o.Forks, 1) {
				if err := r.emit(Merge(r.targetName, o.Forks, raws[i])); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (r *runner) emit(res *Result) error {
	r.results = append(r.results, res)
	if r.o.Format == "json" {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		fmt.Fprintf(r.stdout, "%s\n", b)
		return nil
	}
	printResult(r.stdout, res)
	return nil
}

func (r *runner) printIter(ev IterEvent) {
	label := "Iteration"
	if ev.Warmup {
		label = "# Warmup Iteration"
	}
	extra := ""
	if ev.BytesPerOp != nil && ev.RoundTripsPerOp != nil {
		extra += fmt.Sprintf("  [%.1f B/op, %.2f RT/op]", *ev.BytesPerOp, *ev.RoundTripsPerOp)
	} else if ev.BytesPerOp != nil {
		extra += fmt.Sprintf("  [%.1f B/op]", *ev.BytesPerOp)
	}
	if ev.P999us != nil {
		extra += fmt.Sprintf("  [p99.9 %.1f µs]", *ev.P999us)
	}
	r.info("%s %3d: %.3f ops/ms%s", label, ev.Index, ev.Score, extra)
}

// childLine is one line a fork child prints on stdout.
type childLine struct {
	Iter *IterEvent `json:"iter,omitempty"`
	Raw  *Raw       `json:"raw,omitempty"`
}

// fork runs s in a child process (this executable with -fork-child) and returns its Raw.
func (r *runner) fork(s Spec, onIter func(IterEvent)) (*Raw, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("forking: %w", err)
	}
	spec, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	args := []string{"-" + ChildFlag + "=" + string(spec), "-proxy=" + strconv.FormatBool(r.o.Proxy)}
	if r.target.Stub {
		args = append(args, "-stub")
	} else if r.target.Postgres() {
		args = append(args, "-pg", r.dsn, "-pg-driver", r.target.PgDriver())
	} else {
		args = append(args, "-dsn", r.dsn)
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = r.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("forking %s: %w", exe, err)
	}
	var raw *Raw
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for sc.Scan() {
		var l childLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			continue // not ours (a stray log line)
		}
		if l.Iter != nil && onIter != nil {
			onIter(*l.Iter)
		}
		if l.Raw != nil {
			raw = l.Raw
		}
	}
	werr := cmd.Wait()
	if werr != nil || raw == nil {
		return nil, fmt.Errorf("fork for %v failed: %v", s, werr)
	}
	return raw, nil
}

// runChild is the fork child: one Spec, JSON lines on stdout.
func runChild(o *Options, stdout, stderr io.Writer) int {
	var s Spec
	if err := json.Unmarshal([]byte(o.child), &s); err != nil {
		fmt.Fprintf(stderr, "jmh child: bad spec: %v\n", err)
		return ExitUsage
	}
	var t *Target
	if o.Stub {
		t = OpenStub()
	} else {
		var err error
		open := func() (*Target, error) { return OpenServer(o.DSN, o.Proxy) }
		if o.PG != "" {
			open = func() (*Target, error) { return OpenPostgres(o.PG, o.PGDriver, o.Proxy) }
		}
		if t, err = open(); err != nil {
			fmt.Fprintf(stderr, "jmh child: %v\n", err)
			return ExitError
		}
		defer t.Close()
	}
	enc := json.NewEncoder(stdout)
	raw, err := RunSpec(s, t, stderr, func(ev IterEvent) { _ = enc.Encode(childLine{Iter: &ev}) })
	if err != nil {
		fmt.Fprintf(stderr, "jmh child: %v\n", err)
		return ExitError
	}
	if err := enc.Encode(childLine{Raw: raw}); err != nil {
		return ExitError
	}
	return ExitOK
}
