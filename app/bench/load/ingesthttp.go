package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
)

// The ingest-limit benchmark's HTTP paths (-il-paths http-90,http-100):
// the span server (cmd/zipkin-mysql on sqlpool, -cpus-server, default the
// generator's core) on the same MariaDB, sent an open-loop offered load of
// 90 % (100 %) of the spans/s raw-insert reached earlier in the same round,
// as 10-span JSON v2 traces (random trace IDs, as the raw rows have) from
// the generator process pinned to -cpus-load. The step lasts as long as
// -il-spans spans take at that rate. Per round it reports the share of
// POSTs answered 202, the spans/s stored (the accepted spans over the
// step plus the time the server's ingest queue took to empty after it),
// the ingest backlog and the dependency lag when the step ends, and the
// database's work per accepted span from the step's start until the
// backlog is written.

// ilHTTPFraction returns the offered load of HTTP path p as a fraction of
// raw-insert's rate, and whether p is an HTTP path.
func ilHTTPFraction(p string) (float64, bool) {
	pct, ok := strings.CutPrefix(p, "http-")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(pct, 64)
	if err != nil || v <= 0 {
		return 0, false
	}
	return v / 100, true
}

// ilHTTPEnv builds cmd/zipkin-mysql and returns the load test's env on
// MariaDB m, for starting servers and the generator.
func ilHTTPEnv(ctx context.Context, o *options, m *mariaDB) (*env, error) {
	e := &env{o: o, mdb: m}
	if _, err := exec.LookPath("taskset"); err != nil {
		return nil, fmt.Errorf("taskset not found on PATH: install it (Debian: apt-get install util-linux)")
	}
	if err := e.buildServer(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// buildServer builds cmd/zipkin-mysql into a temporary directory (e.tmp, e.bin) and notes
// this executable (e.self), which runs the generators as child processes.
func (e *env) buildServer(ctx context.Context) error {
	var err error
	if e.tmp, err = os.MkdirTemp("", "sqlpool-load-bin."); err != nil {
		return err
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	e.bin = filepath.Join(e.tmp, "zipkin-mysql")
	logf("building cmd/zipkin-mysql")
	build := exec.CommandContext(ctx, "go", "build", "-o", e.bin, "github.com/sqlpool/sqlpool/app/cmd/zipkin-mysql")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./app/cmd/zipkin-mysql: %v\n%s", err, out)
	}
	e.self, err = os.Executable()
	return err
}

// ilRunHTTP runs HTTP path p's turn: offered spans/s at rawRate × its
// fraction for il.spans spans, against server s on database db (st is a
// store on the same database, for the dependency lag).
func ilRunHTTP(ctx context.Context, e *env, p string, s *serverProc, st *mysqlstore.Store, rawRate float64, seed uint64, il ingestLimitOptions) (ilResult, error) {
	frac, _ := ilHTTPFraction(p)
	if rawRate <= 0 {
		return ilResult{}, fmt.Errorf("no raw-insert rate measured in this round before %s", p)
	}
	offered := rawRate * frac // spans/s
	dur := time.Duration(float64(il.spans) / offered * float64(time.Second))
	m := e.mdb
	before, err := readStatus(ctx, m.db)
	if err != nil {
		return ilResult{}, err
	}
	cpu0, err := procCPU(m.pid())
	if err != nil {
		return ilResult{}, err
	}
	sr, err := e.runOpenLoop(ctx, openLoop{
		BaseURL: s.base, Rate: offered / SpansPerTrace, Duration: dur, Seed: seed,
		CountDSN: m.dsn(s.db), RandomIDs: true, Timeout: 30 * time.Second,
	})
	if err != nil {
		return ilResult{}, err
	}
	// The step's end: what the server still holds and how far the
	// dependency aggregation is behind.
	backlog, err := s.metric("zipkin_collector_queue_spans")
	if err != nil {
		return ilResult{}, fmt.Errorf("reading the server's ingest backlog: %w", err)
	}
	lag, err := st.DependencyLag(ctx)
	if err != nil {
		return ilResult{}, err
	}
	t0 := time.Now()
	s.drain(ctx, 5*time.Minute)
	drained := time.Since(t0)
	cpu1, err := procCPU(m.pid())
	if err != nil {
		return ilResult{}, err
	}
	after, err := readStatus(ctx, m.db)
	if err != nil {
		return ilResult{}, err
	}
	accepted := float64(sr.AcceptedAll * SpansPerTrace)
	n := max(accepted, 1)
	elapsed := sr.Seconds + drained.Seconds()
	per := map[string]float64{
		"db_cpu_us":       float64((cpu1 - cpu0).Microseconds()) / n,
		"db_busy":         float64(cpu1-cpu0) / (elapsed * float64(time.Second)),
		"redo_bytes":      (after["Innodb_lsn_current"] - before["Innodb_lsn_current"]) / n,
		"rows_inserted":   (after["Handler_write"] - before["Handler_write"]) / n,
		"rows_read":       (after["Handler_read_key"] + after["Handler_read_next"] + after["Handler_read_rnd_next"] - before["Handler_read_key"] - before["Handler_read_next"] - before["Handler_read_rnd_next"]) / n,
		"rows_updated":    (after["Handler_update"] - before["Handler_update"]) / n,
		"statements":      (after["Questions"] - before["Questions"] - 2) / n,
		"page_reads_req":  (after["Innodb_buffer_pool_read_requests"] - before["Innodb_buffer_pool_read_requests"]) / n,
		"page_writes_req": (after["Innodb_buffer_pool_write_requests"] - before["Innodb_buffer_pool_write_requests"]) / n,
	}
	r := ilResult{Path: p, Spans: int(accepted), Seconds: elapsed, Rate: accepted / elapsed, PerSpan: per, Lag: lag.Seconds(),
		HTTP: &ilHTTP{
			OfferedSpans: offered, Sent: sr.Sent, Accepted: sr.Accepted, Rejected: sr.Rejected, Other: sr.OtherHTTP, Errors: sr.Errors,
			Pct202: 100 * float64(sr.Accepted) / float64(max(sr.Sent, 1)), StoredDuringStep: sr.StoredPerSec,
			BacklogAtEnd: backlog, DrainSeconds: drained.Seconds(), P99Ms: sr.Latency.P99, GeneratorLagMs: sr.MaxLagMs,
		}}
	return r, nil
}

// ilHTTP is what an HTTP path's turn measured from the client side and
// of the server.
type ilHTTP struct {
	// OfferedSpans is the offered load in spans/s (POSTs/s × 10).
	OfferedSpans float64 `json:"offered_spans_per_s"`
	Sent         int     `json:"sent"`
	Accepted     int     `json:"accepted_202"`
	Rejected     int     `json:"rejected_503"`
	Other        int     `json:"other_status"`
	Errors       int     `json:"errors"`
	Pct202       float64 `json:"pct_202"`
	// StoredDuringStep is the spans/s in zipkin_spans when the last POST
	// was answered.
	StoredDuringStep float64 `json:"stored_spans_per_s_at_step_end"`
	// BacklogAtEnd is the spans accepted and not yet written when the last
	// POST was answered; DrainSeconds how long they took to be written.
	BacklogAtEnd   float64 `json:"ingest_backlog_spans_at_end"`
	DrainSeconds   float64 `json:"ingest_backlog_drain_s"`
	P99Ms          float64 `json:"post_p99_ms"`
	GeneratorLagMs float64 `json:"generator_max_lag_ms"`
}

// ilReportHTTP adds the HTTP paths' table to b: per path, the offered
// load's share of raw-insert's rate, the fewest 202s of a round, the
// stored rate's ratio to raw-insert (min / median / max) and the worst
// round's backlog, drain time, dependency lag and POST p99.
func ilReportHTTP(b *strings.Builder, il ingestLimitOptions, rs []ilResult, raw map[int]float64) {
	var rows []string
	for _, p := range il.paths {
		frac, ok := ilHTTPFraction(p)
		if !ok {
			continue
		}
		var ratios []float64
		min202, maxBacklog, maxDrain, maxLag, maxP99 := 100.0, 0.0, 0.0, 0.0, 0.0
		for _, r := range rs {
			if r.Path != p || r.HTTP == nil {
				continue
			}
			h := r.HTTP
			if raw[r.Round] > 0 {
				ratios = append(ratios, r.Rate/raw[r.Round])
			}
			min202 = min(min202, h.Pct202)
			maxBacklog, maxDrain = max(maxBacklog, h.BacklogAtEnd), max(maxDrain, h.DrainSeconds)
			maxLag, maxP99 = max(maxLag, r.Lag), max(maxP99, h.P99Ms)
		}
		if len(ratios) == 0 {
			continue
		}
		slices.Sort(ratios)
		rows = append(rows, fmt.Sprintf("| %s | %.2f | %.2f %% | %.2f / %.2f / %.2f | %.0f | %.1f | %.1f | %.0f |",
			p, frac, min202, ratios[0], ratios[len(ratios)/2], ratios[len(ratios)-1], maxBacklog, maxDrain, maxLag, maxP99))
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\nHTTP paths (the span server, JSON v2, open loop at a share of the round's raw-insert rate):\n\n")
	b.WriteString("| path | offered ÷ raw-insert | 202s (fewest in a round) | stored spans/s ÷ raw-insert min / median / max | ingest backlog at end, spans (max) | backlog written in, s (max) | dependency lag at end, s (max) | POST p99 ms (max) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	b.WriteString(strings.Join(rows, "\n") + "\n")
}
