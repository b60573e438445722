package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/pgstore"
	"github.com/sqlpool/sqlpool/internal/pgtest"
	_ "github.com/sqlpool/sqlpool/pgdialect" // the pool's PostgreSQL rules
	"github.com/sqlpool/sqlpool/pool"
)

// The query benchmark on PostgreSQL (-pg-querybench-spans N): bulkGen's
// traces (the MySQL benchmark's shape, over the last 24 h) written into a
// fresh database by pgstore.Accept itself — COPY of the store's own rows,
// names and whatever else Accept maintains, from several writers — then
// VACUUM ANALYZE, then the server (-storage=postgres) started on that
// database and every GET endpoint of the API timed over HTTP, one request
// at a time (bulkQueries, timeKinds: the MySQL benchmark's requests).

var pgBench struct {
	spans         int
	dsn           string
	sharedBuffers string
	serverArgs    string
	writers       int
	batchSpans    int
	reps          int
}

func init() {
	flag.IntVar(&pgBench.spans, "pg-querybench-spans", 0, "instead of the load test: load `N` spans into PostgreSQL with pgstore.Accept (COPY) and time every GET endpoint of the server with -storage=postgres (pgquerybench.go)")
	flag.StringVar(&pgBench.dsn, "pg-dsn", "", "-pg-querybench-spans: a superuser URL of an existing PostgreSQL (database zipkin_bench is dropped and created there) (default: a private server started here, as the tests start one, fsync off)")
	flag.StringVar(&pgBench.sharedBuffers, "pg-shared-buffers", "1GB", "-pg-querybench-spans: shared_buffers of the private PostgreSQL")
	flag.StringVar(&pgBench.serverArgs, "pg-server-args", "", "-pg-querybench-spans: extra zipkin-mysql flags, space-separated (e.g. a backfill flag)")
	flag.IntVar(&pgBench.writers, "pg-writers", 4, "-pg-querybench-spans: concurrent Accept calls of the load")
	flag.IntVar(&pgBench.batchSpans, "pg-batch", 2000, "-pg-querybench-spans: spans per Accept call (whole traces)")
	flag.IntVar(&pgBench.reps, "pg-reps", 200, "-pg-querybench-spans: requests per GET endpoint (dependencies: at most this, within 60 s)")
}

// PgBenchResults is the output of the PostgreSQL query benchmark.
type PgBenchResults struct {
	Machine    string            `json:"machine"`
	Command    string            `json:"command"`
	PostgreSQL string            `json:"postgresql"`
	Settings   map[string]string `json:"settings"`
	Load       PgLoadResult      `json:"load"`
	Analyze    float64           `json:"vacuum_analyze_seconds"`
	TableBytes map[string]int64  `json:"table_bytes"` // pg_total_relation_size
	Timings    []PgTiming        `json:"timings"`
	Load1      []float64         `json:"load1_samples"`
	Started    time.Time
	Finished   time.Time
}

// PgTiming is one GET endpoint's latency and the CPU time its requests
// cost the server and PostgreSQL.
type PgTiming struct {
	QueryTiming
	// CPUms is the CPU time (user + system) the server process and
	// PostgreSQL's processes spent per request, in ms: what the request
	// costs whatever else the machine runs (0 when PostgreSQL is not
	// private: -pg-dsn).
	CPUms float64 `json:"cpu_ms_per_request"`
}

// PgLoadResult is what one pgBulkLoad did.
type PgLoadResult struct {
	Spans     int64   `json:"spans"`
	Traces    int     `json:"traces"`
	Batches   int64   `json:"batches"`
	Seconds   float64 `json:"seconds"`
	SpansPerS float64 `json:"spans_per_s"`
	Writers   int     `json:"writers"`
	Stats     string  `json:"store_stats"`
}

// pgBulkLoad writes g's traces into the store st with Accept: a generator
// cuts them into batches of about batchSpans spans (whole traces), writers
// goroutines write them. progress, if not nil, is called with the spans
// written so far after each batch.
func pgBulkLoad(ctx context.Context, st *pgstore.Store, g bulkGen, writers, batchSpans int, progress func(int64)) (PgLoadResult, error) {
	res := PgLoadResult{Traces: g.Traces, Writers: writers}
	t0 := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []model.Span, writers)
	var spans, nb atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				if err := st.Accept(ctx, b); err != nil {
					once.Do(func() { firstErr = fmt.Errorf("Accept of %d spans: %w", len(b), err); cancel() })
					continue
				}
				nb.Add(1)
				n := spans.Add(int64(len(b)))
				if progress != nil {
					progress(n)
				}
			}
		}()
	}
	var buf []model.Span
	for i := 0; i < g.Traces && ctx.Err() == nil; i++ {
		buf = g.trace(i, buf)
		if len(buf) >= batchSpans || i == g.Traces-1 {
			select {
			case batches <- buf:
			case <-ctx.Done():
			}
			buf = nil
		}
	}
	close(batches)
	wg.Wait()
	res.Spans, res.Batches = spans.Load(), nb.Load()
	res.Seconds = time.Since(t0).Seconds()
	res.SpansPerS = float64(res.Spans) / res.Seconds
	res.Stats = fmt.Sprintf("%+v", st.Stats())
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return res, firstErr
}

// pgBenchGen is bulkGen over the 24 h before now with about spans spans.
func pgBenchGen(now time.Time, spans int) bulkGen {
	g := bulkGen{Begin: now.Add(-24 * time.Hour).UnixMicro(), End: now.UnixMicro(), Seed: 28, Traces: 1000}
	probe := 0
	for i := 0; i < g.Traces; i++ {
		probe += len(g.trace(i, nil))
	}
	g.Traces = max(1, int(float64(spans)/(float64(probe)/float64(g.Traces))))
	return g
}

// openPgStore opens pgstore on sqlpool with pgx on dsn, creating the schema.
func openPgStore(ctx context.Context, dsn string, maxConns int) (*pgstore.Store, func(), error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, nil, err
	}
	p, err := pool.New(stdlib.GetConnector(*cfg), pool.Config{Name: "pgbench", MaxConns: maxConns,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, nil, err
	}
	db := p.OpenDB()
	closeAll := func() { _ = db.Close(); _ = p.Close() }
	if err := pgstore.CreateSchema(ctx, db); err != nil {
		closeAll()
		return nil, nil, err
	}
	st, err := pgstore.Open(ctx, db, pgstore.Options{AutocompleteKeys: pgBenchAutocomplete})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return st, closeAll, nil
}

// pgBenchAutocomplete are the server's and the loader's AUTOCOMPLETE_KEYS.
var pgBenchAutocomplete = []string{"http.method", "db.system"}

// withDatabase returns dsn with its database replaced by name.
func withDatabase(dsn, name string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("-pg-dsn %q is not a URL: %w", dsn, err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

func runPgQueryBench(ctx context.Context, o *options) error {
	started := time.Now()
	const dbName = "zipkin_bench"
	tmp, err := os.MkdirTemp("", "sqlpool-pgbench.")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(tmp, "zipkin-mysql")
	logf("building cmd/zipkin-mysql")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/sqlpool/sqlpool/app/cmd/zipkin-mysql")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./app/cmd/zipkin-mysql: %v\n%s", err, out)
	}
	super := pgBench.dsn
	settings := map[string]string{}
	pgPID := 0
	if super == "" {
		srv, err := pgtest.StartServer(pgtest.Options{Settings: []string{"shared_buffers=" + pgBench.sharedBuffers,
			"max_wal_size=4GB", "maintenance_work_mem=256MB"}})
		if err != nil {
			return err
		}
		defer srv.Close()
		super, pgPID = srv.DSN(), srv.PID()
	}
	admin, err := sql.Open("pgx", super)
	if err != nil {
		return err
	}
	defer admin.Close()
	res := &PgBenchResults{Machine: machine(), Command: strings.Join(os.Args, " "), Started: started, Settings: settings}
	_ = admin.QueryRowContext(ctx, "SELECT version()").Scan(&res.PostgreSQL)
	for _, s := range []string{"shared_buffers", "work_mem", "fsync", "synchronous_commit", "effective_cache_size", "random_page_cost", "jit"} {
		var v string
		if admin.QueryRowContext(ctx, "SELECT current_setting($1)", s).Scan(&v) == nil {
			settings[s] = v
		}
	}
	sample := func() { res.Load1 = append(res.Load1, loadAvg()) }
	save := func() {
		b, _ := json.MarshalIndent(res, "", "  ")
		_ = os.WriteFile(filepath.Join(o.out, "pgquerybench.json"), b, 0o644)
		_ = os.WriteFile(filepath.Join(o.out, "pgquerybench.md"), []byte(pgBenchMarkdown(res)), 0o644)
	}
	for _, q := range []string{"DROP DATABASE IF EXISTS " + dbName + " WITH (FORCE)", "CREATE DATABASE " + dbName} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	dsn, err := withDatabase(super, dbName)
	if err != nil {
		return err
	}

	// 1. The load, through the store.
	sample()
	st, closeStore, err := openPgStore(ctx, dsn, pgBench.writers)
	if err != nil {
		return err
	}
	now := time.Now()
	g := pgBenchGen(now, pgBench.spans)
	logf("load: %d traces (about %d spans) over 24 h into %s with pgstore.Accept, %d writers, batches of %d spans", g.Traces, pgBench.spans, dbName, pgBench.writers, pgBench.batchSpans)
	t0 := time.Now()
	var next atomic.Int64
	next.Store(int64(pgBench.spans / 10))
	res.Load, err = pgBulkLoad(ctx, st, g, pgBench.writers, pgBench.batchSpans, func(n int64) {
		if m := next.Load(); n >= m && next.CompareAndSwap(m, m+int64(pgBench.spans/10)) {
			logf("load: %d spans in %.0f s (%.0f spans/s)", n, time.Since(t0).Seconds(), float64(n)/time.Since(t0).Seconds())
		}
	})
	closeStore()
	if err != nil {
		return err
	}
	logf("load: %d spans in %.0f s: %.0f spans/s (%s)", res.Load.Spans, res.Load.Seconds, res.Load.SpansPerS, res.Load.Stats)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	t1 := time.Now()
	if _, err := db.ExecContext(ctx, "VACUUM ANALYZE"); err != nil {
		return err
	}
	res.Analyze = time.Since(t1).Seconds()
	res.TableBytes = pgTableBytes(ctx, db)
	save()

	// 2. Every GET endpoint through the server.
	s, err := startPgServer(ctx, bin, dsn, o.out)
	if err != nil {
		return err
	}
	defer s.stop()
	kinds := bulkQueries(g, now.UnixMicro())
	var plain, deps []queryKind
	for _, k := range kinds {
		if k.deps {
			deps = append(deps, k)
		} else {
			plain = append(plain, k)
		}
	}
	reps := pgBench.reps
	if o.quick {
		reps = min(reps, 50)
	}
	cpu := func() time.Duration {
		d, _ := procCPU(s.pid())
		if pgPID != 0 {
			d += treeCPU(pgPID)
		}
		return d
	}
	timeOne := func(k queryKind, minReps int, budget time.Duration) {
		c0 := cpu()
		qt := timeKinds(ctx, s.base, []queryKind{k}, reps, minReps, budget, true, "")[0]
		pt := PgTiming{QueryTiming: qt}
		if n := qt.N + qt.Errors; n > 0 && pgPID != 0 {
			pt.CPUms = float64(cpu()-c0) / float64(time.Millisecond) / float64(n)
		}
		res.Timings = append(res.Timings, pt)
	}
	sample()
	for _, k := range plain {
		timeOne(k, reps, time.Hour)
	}
	save()
	sample()
	for _, k := range deps {
		timeOne(k, 3, 60*time.Second)
	}
	res.Finished = time.Now()
	save()
	fmt.Println(pgBenchMarkdown(res))
	logf("PostgreSQL query benchmark done in %s; results in %s", time.Since(started).Round(time.Second), o.out)
	return ctx.Err()
}

// startPgServer starts zipkin-mysql with -storage=postgres on dsn and
// waits until /health answers 200.
func startPgServer(ctx context.Context, bin, dsn, out string) (*serverProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"-listen", "127.0.0.1:" + strconv.Itoa(port), "-storage", "postgres", "-log-format", "json"}
	args = append(args, strings.Fields(pgBench.serverArgs)...)
	s := &serverProc{base: "http://127.0.0.1:" + strconv.Itoa(port), exited: make(chan struct{})}
	s.log, err = os.OpenFile(filepath.Join(out, "server-postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = append(os.Environ(), "POSTGRES_DSN="+dsn, "POSTGRES_MAX_CONNECTIONS=10",
		"AUTOCOMPLETE_KEYS="+strings.Join(pgBenchAutocomplete, ","))
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(5 * time.Minute) // a backfill flag may read every trace first
	for {
		resp, err := http.Get(s.base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.exited:
			b, _ := os.ReadFile(s.log.Name())
			return nil, fmt.Errorf("zipkin-mysql -storage=postgres exited during start-up:\n%s", b)
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("zipkin-mysql -storage=postgres not healthy within 5 min (log: " + s.log.Name() + ")")
		}
	}
}

// pgTableBytes returns each table's size with its indexes and TOAST.
func pgTableBytes(ctx context.Context, db *sql.DB) map[string]int64 {
	out := map[string]int64{}
	rows, err := db.QueryContext(ctx, "SELECT relname::text, pg_total_relation_size(oid) FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace")
	if err != nil {
		return out
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		var b int64
		if rows.Scan(&n, &b) == nil {
			out[n] = b
		}
	}
	return out
}

func pgBenchMarkdown(r *PgBenchResults) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run: %s (%s → %s). Machine: %s. %s; settings %v. 1-minute load average during the phases: %v.\n\n",
		r.Command, r.Started.Format(time.RFC3339), r.Finished.Format("15:04:05"), r.Machine, r.PostgreSQL, r.Settings, r.Load1)
	fmt.Fprintf(&b, "Load (pgstore.Accept, COPY, %d writers, %d batches): %d spans of %d traces over 24 h in %.0f s = %.0f spans/s; store stats %s. VACUUM ANALYZE %.0f s. Table sizes with indexes (bytes): %v.\n\n",
		r.Load.Writers, r.Load.Batches, r.Load.Spans, r.Load.Traces, r.Load.Seconds, r.Load.SpansPerS, r.Load.Stats, r.Analyze, r.TableBytes)
	b.WriteString("| GET (HTTP API, sequential) | n | p50 ms | p99 ms | max ms | CPU ms per request (server + PostgreSQL) | errors (11 s timeouts) | items in answer | p99 < 50 ms |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, t := range r.Timings {
		ok := "yes"
		if t.P99 >= 50 || t.Errors > 0 {
			ok = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f | %.1f | %.1f | %.1f | %d (%d) | %d | %s |\n", t.Query, t.N, t.P50, t.P99, t.Max, t.CPUms, t.Errors, t.Timeouts, t.Results, ok)
	}
	b.WriteString("\nA timed-out request counts with the time it took (a lower bound of the query's). Example requests are in pgquerybench.json.\n")
	return b.String()
}

// treeCPU returns the CPU time of pid, of its live children and of the
// children it has reaped (a postmaster, its backends and those that
// exited), from /proc: it only grows while pid runs.
func treeCPU(pid int) time.Duration {
	var total time.Duration
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		total, _ = parseStatCPU(string(b))
		total += statReapedCPU(string(b))
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if ppid, ok := statPPID(string(b)); ok && ppid == pid {
			if d, err := parseStatCPU(string(b)); err == nil {
				total += d
			}
		}
	}
	return total
}

// statPPID reads field 4 (ppid) of a /proc/PID/stat line.
func statPPID(stat string) (int, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	n, err := strconv.Atoi(f[1])
	return n, err == nil
}

// statReapedCPU reads fields 16 and 17 (cutime, cstime: the CPU time of
// the children the process waited for) of a /proc/PID/stat line.
func statReapedCPU(stat string) time.Duration {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 15 {
		return 0
	}
	u, err1 := strconv.ParseInt(f[13], 10, 64)
	s, err2 := strconv.ParseInt(f[14], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(u+s) * time.Second / clockTicks
}
