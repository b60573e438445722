package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
)

// BulkBenchResults is the output of the query benchmark on a bulk-loaded
// database (-querybench-spans).
type BulkBenchResults struct {
	Machine    string            `json:"machine"`
	Command    string            `json:"command"`
	MariaDB    string            `json:"mariadb"`
	BufferPool string            `json:"innodb_buffer_pool_size"`
	CPUs       map[string]string `json:"cpus"`
	Load       BulkResult        `json:"bulk_load"`
	Analyze    float64           `json:"analyze_seconds"`
	TableBytes map[string]int64  `json:"table_bytes"` // data + index, information_schema
	// Write cost (HTTP ingest into a fresh database, two interleaved
	// rounds, median): all additions, all but zipkin_tags, none.
	WriteCostSpans int                  `json:"write_cost_spans"`
	WriteAll       float64              `json:"write_spans_per_s_all_additions"`
	WriteNoTags    float64              `json:"write_spans_per_s_without_zipkin_tags"`
	WriteNone      float64              `json:"write_spans_per_s_without_additions"`
	WriteSamples   map[string][]float64 `json:"write_samples"`
	// DepsFill is how long filling zipkin_dependencies from the generated
	// traces took (fillDependencies).
	DepsFill float64 `json:"deps_fill_seconds"`
	// Reused is when the load timed here was made (-querybench-dir),
	// zero when this run loaded the data.
	Reused time.Time `json:"reused_load_of,omitzero"`
	// Reps and Warmup are the timed requests per GET endpoint and the
	// untimed ones before them.
	Reps int `json:"reps"`
	// WarmupTimings are the warm-up requests' latencies (the first, cold
	// ones of a server just started on a kept directory among them).
	WarmupTimings     []QueryTiming `json:"warmup_timings"`
	Warmup            int           `json:"warmup"`
	Timings           []QueryTiming `json:"timings"`
	Load1             []float64     `json:"load1_samples"`
	Started, Finished time.Time
}

// queryKind is one GET endpoint of the benchmark: path builds the i-th
// request.
type queryKind struct {
	name string
	path func(i int) string
	deps bool // a dependencies request
}

// bulkQueries are the GET endpoints timed on the bulk-loaded data: every
// read of Zipkin's API v2, with arguments that find data.
func bulkQueries(g bulkGen, now int64) []queryKind {
	svc := func(i int) string { return url.QueryEscape(ServiceName(i % 8)) } // the busier services
	win := func(lookback int64) string {
		return fmt.Sprintf("&endTs=%d&lookback=%d&limit=10", now/1000, lookback)
	}
	hour := int64(3_600_000)
	traceID := func(i int) string {
		tr := g.trace((i*7919)%g.Traces, nil)
		return tr[0].TraceID.String()
	}
	return []queryKind{
		{name: "services", path: func(int) string { return "/api/v2/services" }},
		{name: "span names (service)", path: func(i int) string { return "/api/v2/spans?serviceName=" + svc(i) }},
		{name: "remote services (service)", path: func(i int) string { return "/api/v2/remoteServices?serviceName=" + svc(i) }},
		{name: "traces by service (1 h, limit 10)", path: func(i int) string { return "/api/v2/traces?serviceName=" + svc(i) + win(hour) }},
		{name: "traces by service + span name", path: func(i int) string {
			return "/api/v2/traces?serviceName=" + svc(i) + "&spanName=" + url.QueryEscape(bulkSpanName(i%8, i%10)) + win(hour)
		}},
		{name: "traces by service + remote service (mysql)", path: func(i int) string {
			return "/api/v2/traces?serviceName=" + svc(i) + "&remoteServiceName=mysql" + win(hour)
		}},
		{name: "traces by service + minDuration 100 ms", path: func(i int) string {
			return "/api/v2/traces?serviceName=" + svc(i) + "&minDuration=100000" + win(hour)
		}},
		{name: "traces by tag (service, http.method=POST)", path: func(i int) string {
			return "/api/v2/traces?serviceName=" + svc(i) + "&annotationQuery=" + url.QueryEscape("http.method=POST") + win(hour)
		}},
		{name: "traces by tag (any service, db.statement=…)", path: func(i int) string {
			return "/api/v2/traces?annotationQuery=" + url.QueryEscape(fmt.Sprintf("db.statement=SELECT * FROM t%d WHERE id = ?", i%500)) + win(hour)
		}},
		{name: "traces by error (any service)", path: func(int) string { return "/api/v2/traces?annotationQuery=error" + win(hour) }},
		{name: "traces by error (service)", path: func(i int) string {
			return "/api/v2/traces?serviceName=" + svc(i) + "&annotationQuery=error" + win(hour)
		}},
		{name: "trace by id", path: func(i int) string { return "/api/v2/trace/" + traceID(i) }},
		{name: "traceMany (10 ids)", path: func(i int) string {
			ids := make([]string, 10)
			for k := range ids {
				ids[k] = traceID(10*i + k)
			}
			return "/api/v2/traceMany?traceIds=" + strings.Join(ids, ",")
		}},
		{name: "autocomplete keys", path: func(int) string { return "/api/v2/autocompleteKeys" }},
		{name: "autocomplete values (http.method)", path: func(int) string { return "/api/v2/autocompleteValues?key=http.method" }},
		{name: "dependencies (1 h)", deps: true, path: func(int) string {
			return fmt.Sprintf("/api/v2/dependencies?endTs=%d&lookback=%d", now/1000, hour)
		}},
		{name: "dependencies (24 h)", deps: true, path: func(int) string {
			return fmt.Sprintf("/api/v2/dependencies?endTs=%d&lookback=%d", now/1000, 24*hour)
		}},
	}
}

// timeKindsWarm times each kind reps times, one request at a time, after warm
// untimed requests of it (the first ones of the rotation: the timed ones
// repeat them and go on); note says how the answers are made
// (QueryTiming.Note).
func timeKindsWarm(ctx context.Context, base string, kinds []queryKind, reps, warm int, additions bool, note string) (timed, warmup []QueryTiming) {
	if warm > 0 {
		warmup = timeKinds(ctx, base, kinds, warm, warm, time.Hour, additions, "warm-up")
	}
	return timeKinds(ctx, base, kinds, reps, reps, time.Hour, additions, note), warmup
}

// timeKinds times each kind up to reps times, one request at a time,
// stopping a kind early once its requests took budget in all (after at
// least minReps); note says how the answers are made (QueryTiming.Note).
func timeKinds(ctx context.Context, base string, kinds []queryKind, reps, minReps int, budget time.Duration, additions bool, note string) []QueryTiming {
	client := &http.Client{Timeout: 60 * time.Second}
	var out []QueryTiming
	for _, k := range kinds {
		qt := QueryTiming{Query: k.name, Additions: additions, Example: k.path(0), Note: note}
		var d []time.Duration
		var spent time.Duration
		for i := 0; i < reps && ctx.Err() == nil && (i < minReps || spent < budget); i++ {
			t0 := time.Now()
			resp, err := client.Get(base + k.path(i))
			if err != nil {
				qt.Errors++
				spent += time.Since(t0)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			el := time.Since(t0)
			spent += el
			if resp.StatusCode != 200 {
				qt.Errors++
				if el >= 10*time.Second {
					qt.Timeouts++
					d = append(d, el)
				}
				continue
			}
			d = append(d, el)
			var items []json.RawMessage
			if json.Unmarshal(b, &items) == nil {
				qt.Results = len(items)
			}
		}
		l := summarize(d)
		qt.N, qt.P50, qt.P99, qt.Max = l.N, l.P50, l.P99, l.Max
		how := ""
		if note != "" {
			how = "; " + note
		}
		logf("%s (additions %v%s): n=%d p50 %.1f ms p99 %.1f ms, %d errors (%d timeouts), %d results", k.name, additions, how,
			qt.N, qt.P50, qt.P99, qt.Errors, qt.Timeouts, qt.Results)
		out = append(out, qt)
	}
	return out
}

// setMariaDBCPUs re-pins every thread of mariadbd.
func setMariaDBCPUs(pid int, cpus string) error {
	return exec.Command("taskset", "-a", "-pc", cpus, strconv.Itoa(pid)).Run()
}

func runBulkQueryBench(ctx context.Context, o *options) error {
	started := time.Now()
	_ = os.Setenv("AUTOCOMPLETE_KEYS", "http.method,db.system")
	e, err := setup(ctx, o)
	if err != nil {
		return err
	}
	defer e.close()
	res := &BulkBenchResults{Machine: machine(), Command: strings.Join(os.Args, " "), MariaDB: e.mdb.version(),
		BufferPool: o.bufferPool, Started: started, WriteSamples: map[string][]float64{},
		CPUs: map[string]string{"mariadbd": o.cpusDB, "mariadbd during the bulk load": o.cpusBulk, "zipkin-mysql": o.cpusServer}}
	sample := func() { res.Load1 = append(res.Load1, loadAvg()) }
	save := func() {
		b, _ := json.MarshalIndent(res, "", "  ")
		_ = os.WriteFile(filepath.Join(o.out, "querybench.json"), b, 0o644)
		_ = os.WriteFile(filepath.Join(o.out, "querybench.md"), []byte(bulkBenchMarkdown(res)), 0o644)
	}
	name := dbFor("pool")

	// A kept directory with an earlier run's load of the same size is
	// reused as it is.
	var kept *keptLoad
	if o.benchDir != "" {
		kept = readKeptLoad(o.benchDir, o.bulkSpans)
	}
	var g bulkGen
	var now time.Time
	db, err := sql.Open("mysql", e.mdb.dsn(name))
	if err != nil {
		return err
	}
	defer db.Close()
	if kept != nil {
		g, now = kept.Gen, time.UnixMicro(kept.Gen.End)
		res.Load, res.Analyze, res.TableBytes, res.Reused = kept.Load, kept.Analyze, tableBytes(ctx, db), kept.Saved
		logf("reusing the load of %s in %s: %d spans over 24 h ending %s", kept.Saved.Format(time.RFC3339), o.benchDir,
			kept.Load.Spans, now.UTC().Format(time.RFC3339))
	} else {
		if o.benchDir != "" {
			_ = os.Remove(filepath.Join(o.benchDir, keptLoadFile))
		}
		if g, now, err = bulkBenchLoad(ctx, o, e, db, res, sample, save); err != nil {
			return err
		}
		if o.benchDir != "" {
			if err := writeKeptLoad(o.benchDir, &keptLoad{Spans: o.bulkSpans, Gen: g, Load: res.Load, Analyze: res.Analyze, Saved: time.Now()}); err != nil {
				return err
			}
		}
	}

	// 3. Every GET endpoint with the additions; dependencies first linked
	// on demand (zipkin_dependencies empty), then from zipkin_dependencies
	// filled for the two UTC days, as an aggregator keeps it.
	reps := max(o.benchReps, 1)
	warm := max(reps/10, 1)
	res.Reps, res.Warmup = reps, warm
	kinds := bulkQueries(g, now.UnixMicro())
	var plain, deps []queryKind
	for _, k := range kinds {
		if o.benchOnly != "" && !matchesAny(k.name, o.benchOnly) {
			continue
		}
		if k.deps {
			deps = append(deps, k)
		} else {
			plain = append(plain, k)
		}
	}
	var depRows int64
	_ = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM zipkin_dependencies").Scan(&depRows)
	s, err := e.startServerKeep(ctx, "pool", "-init-schema=false")
	if err != nil {
		return err
	}
	sample()
	timed, warmup := timeKindsWarm(ctx, s.base, plain, reps, warm, true, "")
	res.Timings, res.WarmupTimings = append(res.Timings, timed...), append(res.WarmupTimings, warmup...)
	if depRows == 0 {
		res.Timings = append(res.Timings, timeKinds(ctx, s.base, deps, 5, 3, 60*time.Second, true, "linked on demand")...)
		save()
		if err := fillDependencies(ctx, db, g, res); err != nil {
			s.stop()
			return err
		}
	}
	sample()
	timed, warmup = timeKindsWarm(ctx, s.base, deps, reps, warm, true, "from zipkin_dependencies")
	res.Timings, res.WarmupTimings = append(res.Timings, timed...), append(res.WarmupTimings, warmup...)
	s.stop()
	e.server = nil
	save()

	// 4. The same requests on Zipkin's schema alone: drop the additions and
	// empty zipkin_dependencies. Not on a kept directory, whose data the
	// next run reuses.
	if o.benchDir == "" {
		if _, err := db.ExecContext(ctx, "DROP TABLE zipkin_names, zipkin_service_spans, zipkin_tags"); err != nil {
			return err
		}
		if _, err := db.ExecContext(ctx, "DELETE FROM zipkin_dependencies"); err != nil {
			return err
		}
		s, err = e.startServerKeep(ctx, "pool", "-init-schema=false")
		if err != nil {
			return err
		}
		sample()
		res.Timings = append(res.Timings, timeKinds(ctx, s.base, plain, 20, 3, 40*time.Second, false, "")...)
		res.Timings = append(res.Timings, timeKinds(ctx, s.base, deps, 5, 3, 60*time.Second, false, "linked on demand")...)
		s.stop()
		e.server = nil
	}
	res.Finished = time.Now()
	save()
	fmt.Println(bulkBenchMarkdown(res))
	logf("query benchmark done in %s; results in %s", time.Since(started).Round(time.Second), o.out)
	return nil
}

// createSchema runs mysqlstore.CreateSchema (Zipkin's tables and the
// additions) in database name.
func createSchema(ctx context.Context, m *mariaDB, name string) error {
	db, err := sql.Open("mysql", m.dsn(name))
	if err != nil {
		return err
	}
	defer db.Close()
	return mysqlstore.CreateSchema(ctx, db)
}

// fillDependencies writes zipkin_dependencies (per UTC day) and
// zipkin_dependency_hours (per hour) for the generated traces, as the
// store's aggregator keeps them: each day's and hour's links are those of
// the traces whose earliest span starts in it (mysqlstore.TraceHour),
// linked with Zipkin's DependencyLinker rules (mysqlstore.LinkTraces) from
// the generator's spans (linking them from the database on demand takes
// minutes at this size).
func fillDependencies(ctx context.Context, db *sql.DB, g bulkGen, res *BulkBenchResults) error {
	t0 := time.Now()
	type key struct {
		unit          int64 // hour or day
		parent, child string
	}
	hours := map[key]*[2]int64{}
	var batch [][]model.Span
	batchHour := int64(-1)
	flush := func() {
		for _, l := range mysqlstore.LinkTraces(batch) {
			k := key{batchHour, l.Parent, l.Child}
			if hours[k] == nil {
				hours[k] = new([2]int64)
			}
			hours[k][0] += l.CallCount
			hours[k][1] += l.ErrorCount
		}
		batch = batch[:0]
	}
	for i := 0; i < g.Traces && ctx.Err() == nil; i++ {
		tr := g.trace(i, nil)
		hour, ok := mysqlstore.TraceHour(tr)
		if !ok {
			continue
		}
		if hour != batchHour || len(batch) == 1000 {
			flush()
			batchHour = hour
		}
		batch = append(batch, tr)
	}
	flush()
	days := map[key]*[2]int64{}
	for k, v := range hours {
		d := key{k.unit / 24, k.parent, k.child}
		if days[d] == nil {
			days[d] = new([2]int64)
		}
		days[d][0] += v[0]
		days[d][1] += v[1]
	}
	insert := func(head string, rows map[key]*[2]int64, unit func(int64) any) error {
		var args []any
		n := 0
		put := func() error {
			if n == 0 {
				return nil
			}
			_, err := db.ExecContext(ctx, head+strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?), ", n), ", "), args...)
			args, n = args[:0], 0
			return err
		}
		for k, v := range rows {
			args = append(args, unit(k.unit), k.parent, k.child, v[0], v[1])
			if n++; n == 500 {
				if err := put(); err != nil {
					return err
				}
			}
		}
		return put()
	}
	if err := insert("INSERT INTO zipkin_dependencies (day, parent, child, call_count, error_count) VALUES ", days, func(d int64) any {
		return time.UnixMilli(d * 86_400_000).UTC().Format(time.DateOnly)
	}); err != nil {
		return err
	}
	if err := insert("INSERT INTO zipkin_dependency_hours (hour, parent, child, call_count, error_count) VALUES ", hours, func(h int64) any { return h }); err != nil {
		return err
	}
	res.DepsFill = time.Since(t0).Seconds()
	logf("zipkin_dependencies: %d day rows, zipkin_dependency_hours: %d hour rows, in %.1f s", len(days), len(hours), res.DepsFill)
	return ctx.Err()
}

// tableBytes returns each table's data and index bytes.
func tableBytes(ctx context.Context, db *sql.DB) map[string]int64 {
	out := map[string]int64{}
	rows, err := db.QueryContext(ctx, "SELECT table_name, data_length + index_length FROM information_schema.tables WHERE table_schema = DATABASE()")
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

func bulkBenchMarkdown(r *BulkBenchResults) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run: %s (%s → %s). Machine: %s. MariaDB %s, innodb_buffer_pool_size=%s; CPUs %v. 1-minute load average during the phases: %v.\n\n",
		r.Command, r.Started.Format(time.RFC3339), r.Finished.Format("15:04:05"), r.Machine, r.MariaDB, r.BufferPool, r.CPUs, r.Load1)
	fmt.Fprintf(&b, "Bulk load (%s, %d traces per statement, the tables in parallel, secondary indexes built afterwards in %.0f s): %d spans in %.0f s = %.0f spans/s, %.0f rows/s; rows %v; ANALYZE TABLE %.0f s. Table sizes (data + indexes, bytes): %v.\n\n",
		r.Load.Method, r.Load.ChunkTraces, r.Load.IndexSeconds, r.Load.Spans, r.Load.Seconds, r.Load.SpansPerS, r.Load.RowsPerS, r.Load.Rows, r.Analyze, r.TableBytes)
	if r.WriteCostSpans > 0 {
		fmt.Fprintf(&b, "Write cost (HTTP ingest of %d spans into a fresh database, two interleaved rounds, median): %.0f spans/s with all additions, %.0f without zipkin_tags, %.0f without any (samples %v).\n\n",
			r.WriteCostSpans, r.WriteAll, r.WriteNoTags, r.WriteNone, r.WriteSamples)
	}
	if r.DepsFill > 0 {
		fmt.Fprintf(&b, "zipkin_dependencies (per UTC day) and zipkin_dependency_hours filled from the generated traces (Zipkin's linker rules) in %.1f s.\n\n", r.DepsFill)
	} else {
		b.WriteString("zipkin_dependencies and zipkin_dependency_hours as the kept data holds them (filled by the run that loaded it).\n\n")
	}
	if !r.Reused.IsZero() {
		fmt.Fprintf(&b, "The data of the load made %s, kept with -querybench-dir (the window ends at that load's time).\n\n", r.Reused.Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "Each GET with the additions: %d sequential requests timed after an untimed warm-up pass of %d (p99 is the nearest rank: %d of the timed requests were slower); Zipkin's queries alone: up to 20 within 40 s.\n\n",
		r.Reps, r.Warmup, r.Reps-int(math.Ceil(0.99*float64(r.Reps)-1e-9)))
	b.WriteString("| GET (HTTP API, sequential) | schema additions | n | p50 ms | p99 ms | max ms | errors (11 s timeouts) | items in answer |\n|---|---|---|---|---|---|---|---|\n")
	for _, t := range r.Timings {
		add := map[bool]string{true: "yes", false: "no (Zipkin's queries)"}[t.Additions]
		if t.Note != "" {
			add += ", " + t.Note
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.1f | %.1f | %.1f | %d (%d) | %d |\n", t.Query, add, t.N, t.P50, t.P99, t.Max, t.Errors, t.Timeouts, t.Results)
	}
	if len(r.WarmupTimings) > 0 {
		b.WriteString("\nThe warm-up pass (cold caches first), slowest request of each GET:")
		for i, t := range r.WarmupTimings {
			if i > 0 {
				b.WriteString(";")
			}
			fmt.Fprintf(&b, " %s %.1f ms", t.Query, t.Max)
		}
		b.WriteString(".\n")
	}
	b.WriteString("\nA timed-out request counts with the time it took (a lower bound of the query's). Example requests are in querybench.json.\n")
	return b.String()
}

// bulkBenchLoad measures the additions' write cost (unless -write-cost=false)
// and bulk-loads -querybench-spans spans over the 24 h before now into
// database name, with all the additions; it returns the generator and now.
func bulkBenchLoad(ctx context.Context, o *options, e *env, db *sql.DB, res *BulkBenchResults, sample, save func()) (g bulkGen, now time.Time, err error) {
	name := dbFor("pool")
	// 1. The write cost of the additions: HTTP ingest into a fresh database
	// with all of them, with all but zipkin_tags, with none; interleaved.
	if o.writeCost {
		res.WriteCostSpans = 50_000
		if o.quick {
			res.WriteCostSpans = 10_000
		}
		for round := 0; round < 2; round++ {
			for _, cfg := range []string{"all", "no-tags", "none"} {
				sample()
				if err := e.mdb.resetDatabase(ctx, name); err != nil {
					return g, now, err
				}
				var extra []string
				switch cfg {
				case "none":
					if err := zipkinOnlySchema(ctx, e.mdb); err != nil {
						return g, now, err
					}
					extra = []string{"-init-schema=false"}
				case "no-tags":
					if err := createSchema(ctx, e.mdb, name); err != nil {
						return g, now, err
					}
					if _, err := e.mdb.db.ExecContext(ctx, "DROP TABLE "+name+".zipkin_tags"); err != nil {
						return g, now, err
					}
					extra = []string{"-init-schema=false"}
				}
				s, err := e.startServerKeep(ctx, "pool", extra...)
				if err != nil {
					return g, now, err
				}
				rate, _, err := e.runClosedLoad(ctx, closedLoad{BaseURL: s.base, Conns: 16, Total: res.WriteCostSpans / SpansPerTrace,
					SpreadMicros: (24 * time.Hour).Microseconds(), Seed: uint64(round)}, int64(res.WriteCostSpans))
				s.stop()
				e.server = nil
				if err != nil {
					return g, now, err
				}
				logf("write cost: %d spans, additions %s: %.0f spans/s", res.WriteCostSpans, cfg, rate)
				res.WriteSamples[cfg] = append(res.WriteSamples[cfg], rate)
			}
		}
		res.WriteAll, res.WriteNoTags, res.WriteNone = median(res.WriteSamples["all"]), median(res.WriteSamples["no-tags"]), median(res.WriteSamples["none"])
		save()
	}

	// 2. The bulk load, with all the additions, over the last 24 h.
	sample()
	if err := e.mdb.resetDatabase(ctx, name); err != nil {
		return g, now, err
	}
	if err := createSchema(ctx, e.mdb, name); err != nil {
		return g, now, err
	}
	now = time.Now()
	g = bulkGen{Begin: now.Add(-24 * time.Hour).UnixMicro(), End: now.UnixMicro(), Seed: 28}
	g.Traces = 1000
	probe := 0
	for i := 0; i < g.Traces; i++ {
		probe += len(g.trace(i, nil))
	}
	g.Traces = int(float64(o.bulkSpans) / (float64(probe) / float64(g.Traces)))
	if o.cpusBulk != o.cpusDB {
		if err := setMariaDBCPUs(e.mdb.pid(), o.cpusBulk); err != nil {
			return g, now, fmt.Errorf("taskset mariadbd to %s: %w", o.cpusBulk, err)
		}
	}
	logf("bulk load: %d traces (about %d spans) over 24 h into %s", g.Traces, o.bulkSpans, name)
	next := int64(o.bulkSpans / 10)
	t0 := time.Now()
	res.Load, err = bulkLoad(ctx, db, g, 20_000, o.bulkInsert, true, func(n int64) {
		if n >= next {
			logf("bulk load: %d spans in %.0f s (%.0f spans/s)", n, time.Since(t0).Seconds(), float64(n)/time.Since(t0).Seconds())
			next += int64(o.bulkSpans / 10)
		}
	})
	if err != nil {
		return g, now, err
	}
	logf("bulk load: %d spans in %.0f s: %.0f spans/s, %.0f rows/s (%s); rows %v", res.Load.Spans, res.Load.Seconds,
		res.Load.SpansPerS, res.Load.RowsPerS, res.Load.Method, res.Load.Rows)
	t1 := time.Now()
	if _, err := db.ExecContext(ctx, "ANALYZE TABLE zipkin_spans, zipkin_annotations, zipkin_names, zipkin_service_spans, zipkin_tags"); err != nil {
		return g, now, err
	}
	res.Analyze = time.Since(t1).Seconds()
	if o.cpusBulk != o.cpusDB {
		if err := setMariaDBCPUs(e.mdb.pid(), o.cpusDB); err != nil {
			return g, now, err
		}
	}
	res.TableBytes = tableBytes(ctx, db)
	save()
	return g, now, nil
}

// keptLoad describes the load a -querybench-dir directory holds.
type keptLoad struct {
	Spans   int        `json:"querybench_spans"` // -querybench-spans of the run that loaded it
	Gen     bulkGen    `json:"generator"`
	Load    BulkResult `json:"bulk_load"`
	Analyze float64    `json:"analyze_seconds"`
	Saved   time.Time  `json:"saved"`
}

const keptLoadFile = "querybench-load.json"

// readKeptLoad returns the load dir holds, or nil when it holds none of
// spans spans.
func readKeptLoad(dir string, spans int) *keptLoad {
	b, err := os.ReadFile(filepath.Join(dir, keptLoadFile))
	if err != nil {
		return nil
	}
	var k keptLoad
	if json.Unmarshal(b, &k) != nil || k.Spans != spans || k.Gen.Traces == 0 {
		return nil
	}
	return &k
}

func writeKeptLoad(dir string, k *keptLoad) error {
	b, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, keptLoadFile), b, 0o644)
}

// matchesAny reports whether name contains one of the comma-separated
// substrings of list.
func matchesAny(name, list string) bool {
	for part := range strings.SplitSeq(list, ",") {
		if part = strings.TrimSpace(part); part != "" && strings.Contains(name, part) {
			return true
		}
	}
	return false
}
