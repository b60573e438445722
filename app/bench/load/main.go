// Command load is the integrated load test of the Zipkin server: in one run
// on one machine it starts a private MariaDB as .ci/run does, then
// cmd/zipkin-mysql in three configurations in turn — sqlpool (the
// default), -pool=database-sql (same connection limit) and -storage=none —
// and drives each with the same workload (JSON v2 traces of 10 spans with
// unique 128-bit IDs, tags and annotations): first closed-loop with wrk,
// then open-loop at fixed rates from 10 % to 200 % of the saturation rate
// measured on the pool, with a query mix alongside. MariaDB, the server and
// the load generators are pinned to CPUs with taskset.
//
//	go run ./app/bench/load                 # the full run (< 30 min)
//	go run ./app/bench/load -quick          # < 5 min
//	go run ./app/bench/load -querybench     # 1,000,000 spans, name and trace lookups
//	go run ./app/bench/load -querybench-spans 10000000  # bulk-loaded, every GET endpoint
//	go run ./app/bench/load -querybench-spans 10000000 -querybench-dir /tmp/q10m  # keep the load; the next run reuses it
//
// Output: tables on stdout and in -out (results.md, results.json).
// docs/design/load.md explains the figures.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	quick         bool
	out           string
	cpusDB        string
	cpusServer    string
	cpusLoad      string
	bufferPool    string
	runs          int
	step          time.Duration
	rates         []float64 // percent of saturation
	maxConns      int
	wrkConns      int
	queryRate     float64 // GETs per second alongside ingest
	queueSpans    int
	retention     bool
	profile       bool
	profileConfig string
	queryBench    bool
	spans         int
	configs       []string
	saturation    float64 // requests/s; 0: measure
	keepServers   bool
	bulkSpans     int    // -querybench-spans: bulk-load this many spans instead of ingesting -spans over HTTP
	bulkInsert    bool   // the bulk load uses INSERTs instead of LOAD DATA LOCAL INFILE
	cpusBulk      string // CPUs of mariadbd during the bulk load
	writeCost     bool   // the bulk query benchmark measures the additions' write cost first
	ingestLimit   bool   // -ingest-limit: the ingest-limit benchmark (ingestlimit.go)
	benchDir      string // -querybench-dir: MariaDB's directory, kept and reused across runs
	benchReps     int    // -querybench-reps: timed requests per GET endpoint
	benchOnly     string // -querybench-only: time only the GET endpoints whose names contain one of these
}

func main() {
	if len(os.Args) > 2 && os.Args[1] == "-openloop-worker" {
		openLoopWorker(os.Args[2])
		return
	}
	if len(os.Args) > 2 && os.Args[1] == "-closedload-worker" {
		var c closedLoad
		if err := json.Unmarshal([]byte(os.Args[2]), &c); err != nil {
			fatalf("closed-load worker: %v", err)
		}
		r, err := c.run(context.Background())
		if err != nil {
			fatalf("closed-load worker: %v", err)
		}
		_ = json.NewEncoder(os.Stdout).Encode(r)
		return
	}
	var o options
	var rates, configs string
	flag.BoolVar(&o.quick, "quick", false, "short run (< 5 min): one run per configuration, 5 rates, 6 s steps")
	flag.StringVar(&o.out, "out", "", "directory for results.md, results.json and profiles (default: a new temp dir)")
	flag.StringVar(&o.cpusDB, "cpus-db", "", "CPUs for mariadbd (taskset -c) (default 0)")
	flag.StringVar(&o.cpusServer, "cpus-server", "", "CPUs for zipkin-mysql (default 0: with MariaDB; -querybench: 1)")
	flag.StringVar(&o.cpusLoad, "cpus-load", "", "CPUs for wrk and the open-loop generator (default 1: a core of their own; -querybench: 0)")
	flag.StringVar(&o.bufferPool, "buffer-pool", "2G", "innodb_buffer_pool_size of the private MariaDB: one run's data of both databases fits (default 2G)")
	flag.IntVar(&o.runs, "runs", 0, "interleaved runs of pool and database-sql (default 3; 1 with -quick)")
	flag.DurationVar(&o.step, "step", 0, "duration of each closed-loop run and open-loop rate step (default 15s; 6s with -quick)")
	flag.StringVar(&rates, "rates", "", "offered rates in percent of saturation (default 10,25,50,75,100,125,150,200; -quick 10,50,100,150,200)")
	flag.IntVar(&o.maxConns, "max-conns", 10, "MYSQL_MAX_CONNECTIONS of every configuration")
	flag.IntVar(&o.wrkConns, "wrk-conns", 32, "wrk connections (closed loop)")
	flag.Float64Var(&o.queryRate, "query-rate", 2, "GETs per second of the query mix during open-loop steps (0: none)")
	flag.IntVar(&o.queueSpans, "queue-spans", 5000, "-queue-spans of every server configuration (its ingest queue bound)")
	flag.BoolVar(&o.retention, "retention", true, "also measure ingest at 50 % saturation with -retention deleting old data alongside (pool only)")
	flag.BoolVar(&o.profile, "profile", true, "collect the server's mutex and block profiles and an execution trace at 50 % and 150 % of saturation")
	flag.StringVar(&o.profileConfig, "profile-config", "pool", "the configuration -profile runs: pool or spool")
	flag.BoolVar(&o.queryBench, "querybench", false, "instead of the load test: load -spans spans over 24 h through the HTTP API and time the name and trace lookups")
	flag.IntVar(&o.spans, "spans", 1_000_000, "spans the query benchmark loads")
	flag.IntVar(&o.bulkSpans, "querybench-spans", 0, "run the query benchmark on `N` spans bulk-loaded straight into the schema (LOAD DATA LOCAL INFILE), timing every GET endpoint with and without the schema additions (0: -querybench's HTTP load of -spans)")
	flag.BoolVar(&o.bulkInsert, "bulk-insert", false, "-querybench-spans: load with multi-row INSERTs instead of LOAD DATA LOCAL INFILE")
	flag.StringVar(&o.cpusBulk, "cpus-bulk", "0,1", "-querybench-spans: CPUs of mariadbd during the bulk load (then -cpus-db again)")
	flag.StringVar(&o.benchDir, "querybench-dir", "", "-querybench-spans: keep the private MariaDB's files in `DIR` (short path; created if missing) and reuse them: when DIR holds an earlier run's load of the same -querybench-spans, the load (and the write cost and Zipkin's-schema phases, which would change the data) is skipped and the requests are timed on it, the window ending at that load's time")
	flag.IntVar(&o.benchReps, "querybench-reps", 200, "-querybench-spans: timed requests per GET endpoint, after a warm-up pass of a tenth as many")
	flag.StringVar(&o.benchOnly, "querybench-only", "", "-querybench-spans: time only the GET endpoints whose names contain one of these comma-separated `substrings` (e.g. \"minDuration,error\")")
	flag.BoolVar(&o.writeCost, "write-cost", true, "-querybench-spans: first measure the additions' write cost (HTTP ingest with all, without zipkin_tags, without any)")
	flag.StringVar(&configs, "configs", "pool,database-sql,none", "configurations to run: pool, database-sql, spool (the pool with -spool-dir in the output directory), none; pool-otlp, database-sql-otlp and none-otlp are the same servers sent the traces as OTLP/HTTP protobuf (POST /v1/traces), each on its own database, compared with their JSON v2 twin step by step")
	flag.Float64Var(&o.saturation, "saturation", 0, "saturation rate in requests/s (default: measured with wrk on the pool)")
	var il ingestLimitOptions
	var ilPaths string
	flag.BoolVar(&o.ingestLimit, "ingest-limit", false, "instead of the load test: the ingest-limit benchmark: raw multi-row INSERT and LOAD DATA of Zipkin's rows against the store with each schema addition, in interleaved rounds, with the database's work per span (use with -buffer-pool 128M)")
	flag.IntVar(&il.spans, "il-spans", 50_000, "-ingest-limit: spans each path writes per round")
	flag.IntVar(&il.batch, "il-batch", 500, "-ingest-limit: spans per batch (one transaction, one Accept)")
	flag.IntVar(&il.writers, "il-writers", 4, "-ingest-limit: concurrent writers")
	flag.IntVar(&il.rounds, "il-rounds", 3, "-ingest-limit: interleaved rounds")
	flag.StringVar(&ilPaths, "il-paths", strings.Join(allIngestPaths, ","), "-ingest-limit: paths to run ("+strings.Join(allIngestPaths, ", ")+"); ratios are to raw-insert")
	flag.Parse()
	if o.bulkSpans > 0 {
		o.queryBench = true
	}
	// CPUs. The load test gives the instrument a core of its own: wrk and the
	// generator on CPU 1, MariaDB and the server on CPU 0. With the generator
	// on MariaDB's core instead (the layout before), the generator's own
	// scheduling delays — counted in every latency, which is measured from
	// the due time — depended on how MariaDB's work came in bursts, which
	// differs between the configurations compared; docs/design/load.md shows both.
	// The query benchmark keeps its layout (MariaDB 0, server 1, loader 0).
	def := func(v *string, load, query string) {
		if *v == "" {
			*v = load
			if o.queryBench {
				*v = query
			}
		}
	}
	// The ingest-limit benchmark's HTTP paths run the span server on the
	// generator's core (MariaDB keeps one core to itself, as the raw and
	// store paths' in-process writers leave it) with the server's default
	// ingest queue.
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.ingestLimit && !set["cpus-server"] {
		o.cpusServer = "1"
	}
	if o.ingestLimit && !set["queue-spans"] {
		o.queueSpans = 20000
	}
	def(&o.cpusDB, "0", "0")
	def(&o.cpusServer, "0", "1")
	def(&o.cpusLoad, "1", "0")
	if o.runs == 0 {
		o.runs = 3
		if o.quick {
			o.runs = 1
		}
	}
	if o.step == 0 {
		o.step = 15 * time.Second
		if o.quick {
			o.step = 6 * time.Second
		}
	}
	if rates == "" {
		rates = "10,25,50,75,100,125,150,200"
		if o.quick {
			rates = "10,50,100,150,200"
		}
	}
	for _, r := range strings.Split(rates, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
		if err != nil || v <= 0 {
			fatalf("-rates: %q is not a positive percentage", r)
		}
		o.rates = append(o.rates, v)
	}
	o.configs = strings.Split(configs, ",")
	if o.profileConfig != "pool" && o.profileConfig != "spool" {
		fatalf("-profile-config: %q is not pool or spool", o.profileConfig)
	}
	if o.out == "" {
		d, err := os.MkdirTemp("", "sqlpool-load.")
		if err != nil {
			fatalf("%v", err)
		}
		o.out = d
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		fatalf("%v", err)
	}
	// mariadbd lives in /usr/sbin on Debian; .ci/run adds the sbin
	// directories to PATH the same way.
	_ = os.Setenv("PATH", os.Getenv("PATH")+":/usr/local/sbin:/usr/sbin:/sbin")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case o.ingestLimit:
		il.paths = strings.Split(ilPaths, ",")
		for _, p := range il.paths {
			if !validIngestPath(p) {
				fatalf("-il-paths: unknown path %q (known: %s, or http-PCT for another share of raw-insert's rate)", p, strings.Join(allIngestPaths, ", "))
			}
		}
		err = runIngestLimit(ctx, o, il, logf)
	case pgBench.spans > 0:
		err = runPgQueryBench(ctx, &o)
	case o.queryBench:
		err = runQueryBench(ctx, &o)
	default:
		err = runLoad(ctx, &o)
	}
	if err != nil {
		fatalf("%v", err)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "load: "+format+"\n", args...)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s [load %.2f] %s\n", time.Now().Format("15:04:05"), loadAvg(), fmt.Sprintf(format, args...))
}

// env is what every scenario shares: MariaDB, the server binary, the
// generator binary.
type env struct {
	o      *options
	mdb    *mariaDB
	bin    string // zipkin-mysql
	self   string // this binary, for the open-loop worker
	tmp    string
	server *serverProc
}

func setup(ctx context.Context, o *options) (*env, error) {
	e := &env{o: o}
	for _, b := range []struct{ bin, pkg string }{{"taskset", "util-linux"}, {"wrk", "wrk"}, {"go", "golang"}} {
		if _, err := exec.LookPath(b.bin); err != nil {
			if b.bin == "wrk" && o.queryBench {
				continue
			}
			return nil, fmt.Errorf("%s not found on PATH: install it (Debian: apt-get install %s)", b.bin, b.pkg)
		}
	}
	if err := e.buildServer(ctx); err != nil {
		return nil, err
	}
	dir := ""
	if o.bulkSpans > 0 {
		dir = o.benchDir
	}
	var err error
	if e.mdb, err = startMariaDB(ctx, o.cpusDB, o.bufferPool, dir, logf); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *env) close() {
	if e.server != nil {
		e.server.stop()
	}
	if e.mdb != nil {
		e.mdb.stop()
	}
	os.RemoveAll(e.tmp)
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("run this from the sqlpool checkout (go run ./app/bench/load)")
	}
	return filepath.Dir(mod), nil
}

// serverProc is one zipkin-mysql process.
type serverProc struct {
	db     string // its database
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:port
	pprof  string // host:port of the pprof listener, if any
	log    *os.File
	exited chan struct{}
}

// dbFor is the database of a configuration: each has its own, so that
// servers of several configurations can run side by side.
func dbFor(config string) string { return "zipkin_" + strings.ReplaceAll(config, "-", "_") }

// configArgs maps a configuration name to zipkin-mysql flags.
func configArgs(name string) []string {
	switch baseConfig(name) {
	case "database-sql":
		return []string{"-pool=database-sql"}
	case "none":
		return []string{"-storage=none"}
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startServer starts zipkin-mysql with a fresh database (dropped and
// created) and waits until /health answers 200.
func (e *env) startServer(ctx context.Context, config string, extra ...string) (*serverProc, error) {
	if err := e.mdb.resetDatabase(ctx, dbFor(config)); err != nil {
		return nil, fmt.Errorf("resetting database %s: %w", dbFor(config), err)
	}
	if config == "spool" {
		if err := os.RemoveAll(filepath.Join(e.o.out, "spool")); err != nil {
			return nil, err
		}
	}
	return e.startServerKeep(ctx, config, extra...)
}

// startServerKeep starts zipkin-mysql on the existing database.
func (e *env) startServerKeep(ctx context.Context, config string, extra ...string) (*serverProc, error) {
	return e.startServerOn(ctx, config, dbFor(config), extra...)
}

// startServerOn starts configuration config's server on database db.
func (e *env) startServerOn(ctx context.Context, config, db string, extra ...string) (*serverProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"-c", e.o.cpusServer, e.bin, "-listen", "127.0.0.1:" + strconv.Itoa(port),
		"-dsn", e.mdb.dsn(db), "-init-schema", "-log-format", "json", "-queue-spans", strconv.Itoa(e.o.queueSpans)}
	args = append(args, configArgs(config)...)
	if config == "spool" {
		// The pool with a durable spool, on the output directory's disk.
		args = append(args, "-spool-dir", filepath.Join(e.o.out, "spool"))
	}
	args = append(args, extra...)
	s := &serverProc{base: "http://127.0.0.1:" + strconv.Itoa(port), exited: make(chan struct{}), db: db}
	for i, a := range extra {
		if a == "-pprof" && i+1 < len(extra) {
			s.pprof = extra[i+1]
		}
	}
	s.log, err = os.OpenFile(filepath.Join(e.o.out, "server-"+config+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command("taskset", args...)
	s.cmd.Env = append(os.Environ(), "MYSQL_MAX_CONNECTIONS="+strconv.Itoa(e.o.maxConns))
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case <-s.exited:
			b, _ := os.ReadFile(s.log.Name())
			return nil, fmt.Errorf("zipkin-mysql %s exited during start-up:\n%s", config, b)
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("zipkin-mysql %s not healthy within 60 s (log: %s)", config, s.log.Name())
		}
	}
	e.server = s
	return s, nil
}

func (s *serverProc) pid() int { return s.cmd.Process.Pid }

func (s *serverProc) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(45 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.log.Close()
}

// metrics returns the server's /metrics text.
func (s *serverProc) metrics() (string, error) {
	resp, err := http.Get(s.base + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// metric reads one unlabelled sample from /metrics.
func (s *serverProc) metric(name string) (float64, error) {
	text, err := s.metrics()
	if err != nil {
		return 0, err
	}
	return parseMetric(text, name)
}

// parseMetric returns the value of the first sample of name in a
// Prometheus text exposition (labels ignored).
func parseMetric(text, name string) (float64, error) {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		return strconv.ParseFloat(f[len(f)-1], 64)
	}
	return 0, fmt.Errorf("metric %s not found", name)
}

// drain waits until the server's ingest queue is empty (at most limit).
func (s *serverProc) drain(ctx context.Context, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		v, err := s.metric("zipkin_collector_queue_spans")
		if err == nil && v == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// openLoopWorker is the generator process: it runs one step described by
// its JSON argument and prints the StepResult as JSON.
func openLoopWorker(arg string) {
	var o openLoop
	if err := json.Unmarshal([]byte(arg), &o); err != nil {
		fatalf("open-loop worker: %v", err)
	}
	r := o.run(context.Background())
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

// runOpenLoop runs one open-loop step in a generator process pinned to
// the load CPUs.
func (e *env) runOpenLoop(ctx context.Context, o openLoop) (StepResult, error) {
	arg, _ := json.Marshal(o)
	var r StepResult
	err := e.worker(ctx, "-openloop-worker", string(arg), &r)
	return r, err
}

// worker runs this binary in worker mode, pinned to the load CPUs, and
// decodes its JSON answer into out.
func (e *env) worker(ctx context.Context, mode, arg string, out any) error {
	cmd := exec.CommandContext(ctx, "taskset", "-c", e.o.cpusLoad, e.self, mode, arg)
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(max(1, strings.Count(e.o.cpusLoad, ",")+1)))
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("load generator %s: %w", mode, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("load generator %s output %q: %w", mode, b, err)
	}
	return nil
}

func machine() string {
	host, _ := os.Hostname()
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		mem = strings.Fields(strings.SplitN(string(b), "\n", 2)[0])[1] + " kB"
	}
	return fmt.Sprintf("%s: %d CPUs (%s), MemTotal %s, %s", host, runtime.NumCPU(), model, mem, runtime.Version())
}
