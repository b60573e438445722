package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
)

// closedLoad is the loader of the query benchmark (run in the generator
// process): Conns goroutines POST traces back to back until Total traces
// are accepted, sending a trace again after a 503 (after a short pause).
type closedLoad struct {
	BaseURL      string
	Conns        int
	Total        int           // traces to send (0: until Duration)
	Duration     time.Duration // stop sending after this (0: until Total)
	SpreadMicros int64         // start times uniform over [now-SpreadMicros, now)
	Seed         uint64
}

// LoadResult is what a closedLoad did.
type LoadResult struct {
	Traces    int     `json:"traces"`
	Rejected  int64   `json:"rejected_503"`
	Seconds   float64 `json:"seconds"`
	PostsPerS float64 `json:"accepted_per_s"`
}

func (c *closedLoad) run(ctx context.Context) (LoadResult, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: c.Conns}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	ids := newTraceIDs()
	var next, rejected atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	t0 := time.Now()
	now := t0.UnixMicro()
	for w := 0; w < c.Conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if c.Total > 0 && i >= int64(c.Total) || c.Duration > 0 && time.Since(t0) > c.Duration || ctx.Err() != nil {
					return
				}
				seed := c.Seed + uint64(i)
				rng := rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15+1))
				high, low := ids.next()
				ts := now
				if c.SpreadMicros > 0 {
					ts -= 1 + rng.Int64N(c.SpreadMicros)
				}
				body := appendTrace(make([]byte, 0, 8<<10), rng, &realIDs{high: high, low: low, baseMicro: ts})
				for attempt := 0; ; attempt++ {
					resp, err := client.Post(c.BaseURL+"/api/v2/spans", "application/json", bytes.NewReader(body))
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode == http.StatusAccepted {
							break
						}
						if resp.StatusCode == http.StatusServiceUnavailable {
							rejected.Add(1)
							time.Sleep(20 * time.Millisecond)
							continue
						}
						err = fmt.Errorf("POST: %s", resp.Status)
					}
					if attempt >= 20 || ctx.Err() != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0).Seconds()
	sent := c.Total
	if c.Total == 0 {
		sent = int(next.Load()) - c.Conns // each worker drew one index it did not send
	}
	return LoadResult{Traces: sent, Rejected: rejected.Load(), Seconds: el, PostsPerS: float64(sent) / el}, firstErr
}

// runClosedLoad runs a closedLoad in a generator process on the load CPUs
// and waits until MariaDB holds want spans; it returns the stored spans/s
// from the first POST to the last span stored.
func (e *env) runClosedLoad(ctx context.Context, c closedLoad, want int64) (float64, LoadResult, error) {
	arg, _ := json.Marshal(c)
	t0 := time.Now()
	var lr LoadResult
	if err := e.worker(ctx, "-closedload-worker", string(arg), &lr); err != nil {
		return 0, lr, err
	}
	deadline := time.Now().Add(30 * time.Minute)
	for {
		n, err := e.mdb.countSpans(ctx, dbFor("pool"))
		if err != nil {
			return 0, lr, err
		}
		if n >= want {
			return float64(n) / time.Since(t0).Seconds(), lr, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, lr, fmt.Errorf("only %d of %d spans stored", n, want)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// QueryTiming is one lookup's latency over the HTTP API.
type QueryTiming struct {
	Query     string  `json:"query"`
	N         int     `json:"n"`
	P50       float64 `json:"p50_ms"`
	P99       float64 `json:"p99_ms"`
	Max       float64 `json:"max_ms"`
	Errors    int     `json:"errors"`
	Timeouts  int     `json:"timeouts"` // answered 500 by the server's 11 s query timeout (counted in Errors too)
	Example   string  `json:"example"`
	Results   int     `json:"results_last"` // items in the last answer
	Additions bool    `json:"additions"`
	Note      string  `json:"note,omitempty"` // how the answer was made, where it differs (dependencies)
}

// QueryBenchResults is the query benchmark's output.
type QueryBenchResults struct {
	Machine           string            `json:"machine"`
	Command           string            `json:"command"`
	MariaDB           string            `json:"mariadb"`
	BufferPool        string            `json:"innodb_buffer_pool_size"`
	CPUs              map[string]string `json:"cpus"`
	Spans             int64             `json:"spans"`
	LoadSpansPerS     float64           `json:"load_spans_per_s"`
	LoadRejected      int64             `json:"load_rejected_503"`
	WriteCostSpans    int               `json:"write_cost_spans"`
	WriteWith         float64           `json:"write_spans_per_s_with_additions"`
	WriteWithout      float64           `json:"write_spans_per_s_without_additions"`
	Timings           []QueryTiming     `json:"timings"`
	Load1             []float64         `json:"load1_samples"`
	Started, Finished time.Time
}

func runQueryBench(ctx context.Context, o *options) error {
	started := time.Now()
	if o.bulkSpans > 0 {
		return runBulkQueryBench(ctx, o)
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "buffer-pool" })
	if !set {
		o.bufferPool = "1G" // the default here: a million spans and their indexes
	}
	e, err := setup(ctx, o)
	if err != nil {
		return err
	}
	defer e.close()
	res := &QueryBenchResults{Machine: machine(), Command: strings.Join(os.Args, " "), MariaDB: e.mdb.version(),
		BufferPool: o.bufferPool, Spans: int64(o.spans), Started: started,
		CPUs: map[string]string{"mariadbd": o.cpusDB, "zipkin-mysql": o.cpusServer, "loader": o.cpusLoad}}
	sample := func() { res.Load1 = append(res.Load1, loadAvg()) }
	save := func() {
		b, _ := json.MarshalIndent(res, "", "  ")
		_ = os.WriteFile(filepath.Join(o.out, "querybench.json"), b, 0o644)
		_ = os.WriteFile(filepath.Join(o.out, "querybench.md"), []byte(queryBenchMarkdown(res)), 0o644)
	}

	// 1. What the additions cost per write: the same traces into a fresh
	// database with and without them, interleaved.
	res.WriteCostSpans = min(50_000, o.spans/20)
	if o.quick {
		res.WriteCostSpans = min(20_000, res.WriteCostSpans)
	}
	var with, without []float64
	for round := 0; round < 2; round++ {
		for _, add := range []bool{true, false} {
			sample()
			if err := e.mdb.resetDatabase(ctx, dbFor("pool")); err != nil {
				return err
			}
			var extra []string
			if !add {
				if err := zipkinOnlySchema(ctx, e.mdb); err != nil {
					return err
				}
				extra = []string{"-init-schema=false"}
			}
			s, err := e.startServerKeep(ctx, "pool", extra...)
			if err != nil {
				return err
			}
			rate, _, err := e.runClosedLoad(ctx, closedLoad{BaseURL: s.base, Conns: 16, Total: res.WriteCostSpans / SpansPerTrace,
				SpreadMicros: (24 * time.Hour).Microseconds(), Seed: uint64(round)}, int64(res.WriteCostSpans))
			s.stop()
			e.server = nil
			if err != nil {
				return err
			}
			logf("write cost: %d spans %s additions: %.0f spans/s", res.WriteCostSpans, map[bool]string{true: "with", false: "without"}[add], rate)
			if add {
				with = append(with, rate)
			} else {
				without = append(without, rate)
			}
		}
	}
	res.WriteWith, res.WriteWithout = median(with), median(without)
	save()

	// 2. The million spans, through the HTTP API, with the additions.
	sample()
	if err := e.mdb.resetDatabase(ctx, dbFor("pool")); err != nil {
		return err
	}
	s, err := e.startServerKeep(ctx, "pool")
	if err != nil {
		return err
	}
	rate, lr, err := e.runClosedLoad(ctx, closedLoad{BaseURL: s.base, Conns: 16, Total: o.spans / SpansPerTrace,
		SpreadMicros: (24 * time.Hour).Microseconds(), Seed: 1000}, int64(o.spans))
	if err != nil {
		s.stop()
		return err
	}
	res.LoadSpansPerS, res.LoadRejected = rate, lr.Rejected
	logf("loaded %d spans at %.0f spans/s (%d×503 retried)", o.spans, rate, lr.Rejected)
	_, _ = e.mdb.db.ExecContext(ctx, "ANALYZE TABLE "+dbFor("pool")+".zipkin_spans, "+dbFor("pool")+".zipkin_annotations, "+dbFor("pool")+".zipkin_names, "+dbFor("pool")+".zipkin_service_spans, "+dbFor("pool")+".zipkin_tags")
	save()

	reps := 200
	if o.quick {
		reps = 50
	}
	sample()
	res.Timings = append(res.Timings, timeQueries(ctx, s.base, reps, true)...)
	save()
	explain(ctx, e, filepath.Join(o.out, "explain.txt"))
	s.stop()
	e.server = nil

	// 3. The same lookups on Zipkin's schema: drop the additions.
	if _, err := e.mdb.db.ExecContext(ctx, "DROP TABLE "+dbFor("pool")+".zipkin_names, "+dbFor("pool")+".zipkin_service_spans, "+dbFor("pool")+".zipkin_tags"); err != nil {
		return err
	}
	s, err = e.startServerKeep(ctx, "pool", "-init-schema=false")
	if err != nil {
		return err
	}
	sample()
	res.Timings = append(res.Timings, timeQueries(ctx, s.base, max(5, reps/20), false)...)
	s.stop()
	e.server = nil
	res.Finished = time.Now()
	save()
	fmt.Println(queryBenchMarkdown(res))
	logf("query benchmark done in %s; results in %s", time.Since(started).Round(time.Second), o.out)
	return nil
}

// zipkinOnlySchema creates Zipkin's three tables without the additions.
func zipkinOnlySchema(ctx context.Context, m *mariaDB) error {
	db, err := sql.Open("mysql", m.dsn(dbFor("pool")))
	if err != nil {
		return err
	}
	defer db.Close()
	for _, q := range mysqlstore.SchemaDDL() {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// timeQueries times each lookup reps times, one at a time, rotating over
// the services.
func timeQueries(ctx context.Context, base string, reps int, additions bool) []QueryTiming {
	client := &http.Client{Timeout: 60 * time.Second}
	now := time.Now().UnixMilli()
	kinds := []struct {
		name string
		path func(svc string) string
	}{
		{"getServiceNames", func(string) string { return "/api/v2/services" }},
		{"getSpanNames", func(svc string) string { return "/api/v2/spans?serviceName=" + url.QueryEscape(svc) }},
		{"getRemoteServiceNames", func(svc string) string { return "/api/v2/remoteServices?serviceName=" + url.QueryEscape(svc) }},
		{"getTraces(service, 1 h, limit 10)", func(svc string) string {
			return fmt.Sprintf("/api/v2/traces?serviceName=%s&endTs=%d&lookback=3600000&limit=10", url.QueryEscape(svc), now)
		}},
	}
	var out []QueryTiming
	for _, k := range kinds {
		qt := QueryTiming{Query: k.name, Additions: additions, Example: k.path(ServiceName(0))}
		var d []time.Duration
		for i := 0; i < reps && ctx.Err() == nil; i++ {
			t0 := time.Now()
			resp, err := client.Get(base + k.path(ServiceName(i)))
			if err != nil {
				qt.Errors++
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			el := time.Since(t0)
			if resp.StatusCode != 200 {
				qt.Errors++
				if el >= 10*time.Second {
					// The server's query timeout (11 s): the time so far is a
					// lower bound of the query's, kept in the distribution.
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
		logf("%s (additions %v): n=%d p50 %.1f ms p99 %.1f ms, %d errors, %d results", k.name, additions, qt.N, qt.P50, qt.P99, qt.Errors, qt.Results)
		out = append(out, qt)
	}
	return out
}

// explain saves MariaDB's plans of the lookups, with and without the
// additions (the statements the store sends, with example arguments).
func explain(ctx context.Context, e *env, file string) {
	now := time.Now().UnixMicro()
	begin := now - 3_600_000_000
	svc := ServiceName(0)
	queries := []struct{ title, q string }{
		{"getServiceNames, additions", "SELECT service_name FROM zipkin_names WHERE kind = 0"},
		{"getSpanNames, additions", fmt.Sprintf("SELECT name FROM zipkin_names WHERE kind = 1 AND service_name = '%s'", svc)},
		{"getRemoteServiceNames, additions", fmt.Sprintf("SELECT name FROM zipkin_names WHERE kind = 2 AND service_name = '%s'", svc)},
		{"getTraces(service, 1 h, limit 10), additions (first read: 80 rows)", fmt.Sprintf(
			"SELECT x.trace_id_high, x.trace_id FROM zipkin_service_spans x WHERE x.service_name = '%s' AND x.start_ts BETWEEN %d AND %d ORDER BY x.start_ts DESC LIMIT 80", svc, begin, now)},
		{"getServiceNames, Zipkin's query", "SELECT DISTINCT endpoint_service_name FROM zipkin_annotations WHERE endpoint_service_name IS NOT NULL AND endpoint_service_name <> '' AND a_type <> 0"},
		{"getSpanNames, Zipkin's query", fmt.Sprintf("SELECT DISTINCT s.name FROM zipkin_spans s JOIN zipkin_annotations a ON s.trace_id_high = a.trace_id_high AND s.trace_id = a.trace_id AND s.id = a.span_id WHERE a.endpoint_service_name = '%s' AND a.a_type <> 0 AND s.name <> ''", svc)},
		{"getRemoteServiceNames, Zipkin's query", fmt.Sprintf("SELECT DISTINCT s.remote_service_name FROM zipkin_spans s JOIN zipkin_annotations a ON s.trace_id_high = a.trace_id_high AND s.trace_id = a.trace_id AND s.id = a.span_id WHERE a.endpoint_service_name = '%s' AND a.a_type <> 0 AND s.remote_service_name IS NOT NULL AND s.remote_service_name <> ''", svc)},
		{"getTraces(service, 1 h, limit 10), Zipkin's query", fmt.Sprintf("SELECT DISTINCT s.trace_id_high, s.trace_id, MAX(s.start_ts) FROM zipkin_spans s JOIN zipkin_annotations a ON s.trace_id_high = a.trace_id_high AND s.trace_id = a.trace_id AND s.id = a.span_id WHERE s.start_ts BETWEEN %d AND %d AND a.endpoint_service_name IS NOT NULL AND a.endpoint_service_name <> '' AND a.a_type <> 0 AND a.endpoint_service_name = '%s' GROUP BY s.trace_id_high, s.trace_id ORDER BY MAX(s.start_ts) DESC LIMIT 10", begin, now, svc)},
	}
	db, err := sql.Open("mysql", e.mdb.dsn(dbFor("pool")))
	if err != nil {
		return
	}
	defer db.Close()
	var b strings.Builder
	for _, q := range queries {
		fmt.Fprintf(&b, "-- %s\n%s\n", q.title, q.q)
		rows, err := db.QueryContext(ctx, "EXPLAIN "+q.q)
		if err != nil {
			fmt.Fprintf(&b, "error: %v\n\n", err)
			continue
		}
		cols, _ := rows.Columns()
		b.WriteString(strings.Join(cols, " | ") + "\n")
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if rows.Scan(ptrs...) == nil {
				parts := make([]string, len(vals))
				for i, v := range vals {
					parts[i] = v.String
					if !v.Valid {
						parts[i] = "NULL"
					}
				}
				b.WriteString(strings.Join(parts, " | ") + "\n")
			}
		}
		rows.Close()
		b.WriteString("\n")
	}
	_ = os.WriteFile(file, []byte(b.String()), 0o644)
}

func queryBenchMarkdown(r *QueryBenchResults) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run: %s (%s → %s). Machine: %s. MariaDB %s, innodb_buffer_pool_size=%s; CPUs: mariadbd %s, zipkin-mysql %s, loader %s. 1-minute load average during the phases: %v.\n\n",
		r.Command, r.Started.Format(time.RFC3339), r.Finished.Format("15:04:05"), r.Machine, r.MariaDB, r.BufferPool,
		r.CPUs["mariadbd"], r.CPUs["zipkin-mysql"], r.CPUs["loader"], r.Load1)
	fmt.Fprintf(&b, "Loaded %d spans (20 services, 200 span names, start times over 24 h) through POST /api/v2/spans at %.0f spans/s stored (%d×503 sent again).\n\n",
		r.Spans, r.LoadSpansPerS, r.LoadRejected)
	fmt.Fprintf(&b, "Write cost of the additions (%d spans into a fresh database, two interleaved rounds, median): %.0f spans/s with, %.0f without (×%.2f).\n\n",
		r.WriteCostSpans, r.WriteWith, r.WriteWithout, div(r.WriteWith, r.WriteWithout))
	b.WriteString("| lookup (HTTP API, sequential) | schema additions | n | median ms | p99 ms | max ms | errors (of which 11 s timeouts) | items in answer |\n|---|---|---|---|---|---|---|---|\n")
	for _, t := range r.Timings {
		fmt.Fprintf(&b, "| %s | %s | %d | %.1f | %.1f | %.1f | %d (%d) | %d |\n", t.Query, map[bool]string{true: "yes", false: "no (Zipkin's queries)"}[t.Additions],
			t.N, t.P50, t.P99, t.Max, t.Errors, t.Timeouts, t.Results)
	}
	b.WriteString("\nA timed-out request counts with the time it took (a lower bound of the query's).\n")
	return b.String()
}
