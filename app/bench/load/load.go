package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Row is one measured step: a closed-loop wrk run or one open-loop rate.
type Row struct {
	Config   string  `json:"config"`
	Run      int     `json:"run"`
	Kind     string  `json:"kind"` // "wrk", "open", "open+retention"
	RatePct  float64 `json:"rate_pct,omitempty"`
	Offered  float64 `json:"offered_rps,omitempty"`
	RPS      float64 `json:"completed_rps"`
	Accepted int64   `json:"accepted_202"`
	// AcceptedAll counts the 202s of the open loop's warm-up too.
	AcceptedAll int64 `json:"accepted_202_incl_warmup,omitempty"`
	Rejected    int64 `json:"rejected_503"`
	Errors      int64 `json:"errors"`
	// StoredSpans is the growth of zipkin_spans (COUNT(*) in MariaDB)
	// over the step, per second.
	StoredSpans float64 `json:"stored_spans_per_s"`
	Latency     Latency `json:"latency"`
	// Latency202 is the latency of the POSTs answered 202 only (open
	// loop): past saturation a 503 is answered before the body is decoded,
	// so the mix of 202s and 503s moves the latency of all POSTs.
	Latency202  Latency            `json:"latency_202"`
	Queries     map[string]Latency `json:"queries,omitempty"`
	QueryErrors int                `json:"query_errors,omitempty"`
	LagMs       float64            `json:"generator_max_lag_ms,omitempty"`
	Server      ProcStats          `json:"server"`
	DB          ProcStats          `json:"mariadb"`
	// Deadlocks and lock wait timeouts the store retried during the step
	// (from /metrics).
	Deadlocks int64   `json:"deadlocks"`
	LockWaits int64   `json:"lock_wait_timeouts"`
	Load1     float64 `json:"load1_at_start"`
	// Fsync is the spool's group-commit fdatasyncs during the step (spool only).
	Fsync *FsyncStats `json:"spool_fsync,omitempty"`
	// Samples202 are the step's 202 latencies in ms (open loop, configs
	// pool and spool only), for the spool comparison's floor.
	Samples202 []float64 `json:"samples_202_ms,omitempty"`
}

// Results is everything one run measured.
type Results struct {
	Machine       string            `json:"machine"`
	Started       time.Time         `json:"started"`
	Finished      time.Time         `json:"finished"`
	Command       string            `json:"command"`
	MariaDB       string            `json:"mariadb"`
	CPUs          map[string]string `json:"cpus"`
	BufferPool    string            `json:"innodb_buffer_pool_size"`
	MaxConns      int               `json:"max_conns"`
	QueueSpans    int               `json:"queue_spans"`
	QueryRate     float64           `json:"query_rate"`
	StepSeconds   float64           `json:"step_seconds"`
	SaturationRPS float64           `json:"saturation_rps"`
	Rows          []Row             `json:"rows"`
	Ratios        []Ratio           `json:"ratios"`
	// OTLP compares the OTLP configurations with their JSON twins.
	OTLP []OTLPRatio `json:"otlp_over_json,omitempty"`
	// Spool compares the spool with the pool.
	Spool     []SpoolRatio      `json:"spool_over_pool,omitempty"`
	Retention []*RetentionCheck `json:"retention,omitempty"`
	Profiles  map[string]string `json:"profiles,omitempty"`
}

func runLoad(ctx context.Context, o *options) error {
	started := time.Now()
	configs, err := orderConfigs(o.configs)
	if err != nil {
		return err
	}
	e, err := setup(ctx, o)
	if err != nil {
		return err
	}
	defer e.close()
	res := &Results{
		Machine: machine(), Started: started, Command: strings.Join(os.Args, " "),
		MariaDB: e.mdb.version(), BufferPool: o.bufferPool, MaxConns: o.maxConns, QueueSpans: o.queueSpans, QueryRate: o.queryRate,
		CPUs:        map[string]string{"mariadbd": o.cpusDB, "zipkin-mysql": o.cpusServer, "wrk+generator": o.cpusLoad},
		StepSeconds: o.step.Seconds(), SaturationRPS: o.saturation,
	}
	has := func(c string) bool { return slices.Contains(o.configs, c) }
	if res.SaturationRPS == 0 && (len(configs) == 0 || baseConfig(configs[0]) == "none") {
		return fmt.Errorf("the saturation rate is measured on the first configuration with storage; include pool or database-sql, or pass -saturation")
	}
	rows, err := e.interleaved(ctx, res, configs)
	res.Rows = append(res.Rows, rows...)
	writeResults(o.out, res)
	if err != nil {
		return err
	}
	if o.retention && has("pool") {
		// Pairs of steps without and with retention, each on a fresh
		// database with old data: as many as the open-loop runs.
		for pair := 1; pair <= o.runs; pair++ {
			rc, rows, err := e.retentionCheck(ctx, res, pair)
			res.Rows = append(res.Rows, rows...)
			if rc != nil {
				res.Retention = append(res.Retention, rc)
			}
			if err != nil {
				return err
			}
			writeResults(o.out, res)
		}
	}
	if o.profile && has(o.profileConfig) {
		p, err := e.profiles(ctx, res)
		if err != nil {
			return err
		}
		res.Profiles = p
	}
	res.Finished = time.Now()
	writeResults(o.out, res)
	fmt.Println(markdown(res))
	logf("done in %s; results in %s", time.Since(started).Round(time.Second), o.out)
	return nil
}

// orderConfigs checks the -configs list and puts it in the order the
// configurations run: pool first (the saturation rate is measured on the
// first), database-sql, spool, none, each configuration's twins with other
// payloads (-otel-json, -otlp; not for spool) right after it, so that they
// alternate step by step.
func orderConfigs(list []string) ([]string, error) {
	list = slices.Clone(list)
	for i := range list {
		list[i] = strings.TrimSpace(list[i])
	}
	var configs []string
	for _, base := range []string{"pool", "database-sql", "spool", "none"} {
		for _, c := range []string{base, base + otelJSONSuffix, base + otlpSuffix} {
			if slices.Contains(list, c) && (base != "spool" || c == base) {
				configs = append(configs, c)
			}
		}
	}
	for _, c := range list {
		if !slices.Contains(configs, c) {
			return nil, fmt.Errorf("-configs: unknown configuration %q: use pool, database-sql, spool or none, or pool, database-sql or none with the suffix %s (OTLP/HTTP protobuf load) or %s (JSON v2 with the tags of OpenTelemetry's Zipkin exporter)", c, otlpSuffix, otelJSONSuffix)
		}
	}
	return configs, nil
}

// measure runs step (a wrk run or an open-loop step) while watching the
// server's and MariaDB's processes and counting zipkin_spans.
//
// With countAll the stored spans/s is the growth of COUNT(*) of the whole
// table (the closed loops, whose trace IDs wrk makes, and which never run
// with retention); otherwise the step counts its own spans
// (openLoop.CountDSN) and measure leaves the table alone.
func (e *env) measure(ctx context.Context, row *Row, s *serverProc, countAll bool, step func() error) error {
	row.Load1 = loadAvg()
	var c0 int64
	if countAll {
		var err error
		if c0, err = e.mdb.countSpans(ctx, s.db); err != nil {
			return err
		}
	}
	m0, _ := s.metrics()
	d0, _ := parseMetric(m0, "zipkin_mysql_deadlocks_total")
	l0, _ := parseMetric(m0, "zipkin_mysql_lock_wait_timeouts_total")
	f0, ferr := parseFsyncBuckets(m0) // the spool's only
	ws, wd := watchProc(s.pid()), watchProc(e.mdb.pid())
	t0 := time.Now()
	serr := step()
	el := time.Since(t0)
	row.Server, row.DB = ws.end(), wd.end()
	m1, _ := s.metrics()
	d1, _ := parseMetric(m1, "zipkin_mysql_deadlocks_total")
	l1, _ := parseMetric(m1, "zipkin_mysql_lock_wait_timeouts_total")
	row.Deadlocks, row.LockWaits = int64(d1-d0), int64(l1-l0)
	if f1, err := parseFsyncBuckets(m1); ferr == nil && err == nil {
		row.Fsync = fsyncDelta(f0, f1)
	}
	if countAll {
		c1, err := e.mdb.countSpans(ctx, s.db)
		if err != nil {
			return err
		}
		row.StoredSpans = float64(c1-c0) / el.Seconds()
	}
	return serr
}

// interleaved runs the configurations side by side: one server each (own
// database, all started before the first step), a closed-loop wrk run
// each, then for every run and every offered rate one open-loop step per
// configuration, back to back, pool and database-sql alternating which
// goes first (none only in the first run). Neighbouring steps of the
// configurations compared are therefore seconds apart, so that the load
// other processes put on the machine, which drifts over minutes, falls on
// both alike.
func (e *env) interleaved(ctx context.Context, res *Results, configs []string) ([]Row, error) {
	o := e.o
	servers := map[string]*serverProc{}
	defer func() {
		for _, s := range servers {
			s.stop()
		}
		e.server = nil
	}()
	for _, c := range configs {
		s, err := e.startServer(ctx, c)
		if err != nil {
			return nil, err
		}
		servers[c] = s
		logf("%s: server pid %d at %s, database %s", c, s.pid(), s.base, s.db)
	}
	e.server = nil
	var rows []Row
	for _, c := range configs {
		r, err := e.closedLoop(ctx, res, c, servers[c])
		rows = append(rows, r...)
		if err != nil {
			return rows, err
		}
	}
	// With a configuration of another payload than JSON v2, every run
	// also compares the storage's throughput of the payloads in a closed
	// loop (16 senders, 20 ms backoff after a 503), the saturation of
	// reporters that back off.
	withOTLP := slices.ContainsFunc(configs, func(c string) bool { return payloadOf(c) != payloadJSON })
	// swap alternates which of the first two configurations goes first.
	swap := func(order []string, odd bool) {
		if odd && len(order) >= 2 && baseConfig(order[0]) != "none" && baseConfig(order[1]) != "none" {
			order[0], order[1] = order[1], order[0]
		}
	}
	for run := 1; run <= o.runs; run++ {
		// Each run starts from empty tables (see mariaDB.truncateData).
		for _, c := range configs {
			if baseConfig(c) == "none" {
				continue
			}
			if err := e.mdb.truncateData(ctx, servers[c].db); err != nil {
				return rows, fmt.Errorf("emptying %s before run %d: %w", servers[c].db, run, err)
			}
		}
		if withOTLP {
			order := slices.Clone(configs)
			swap(order, run%2 == 0)
			for _, c := range order {
				if baseConfig(c) == "none" {
					continue
				}
				if ctx.Err() != nil {
					return rows, ctx.Err()
				}
				r, err := e.closedStep(ctx, c, run, servers[c])
				if err != nil {
					return rows, err
				}
				rows = append(rows, r)
			}
		}
		for i, pct := range o.rates {
			order := slices.Clone(configs)
			swap(order, (run+i)%2 == 0)
			for _, c := range order {
				if baseConfig(c) == "none" && run > 1 {
					continue
				}
				if ctx.Err() != nil {
					return rows, ctx.Err()
				}
				r, err := e.openStep(ctx, res, c, run, pct, servers[c])
				if err != nil {
					return rows, err
				}
				rows = append(rows, r)
			}
		}
		res.Rows = rows
		writeResults(o.out, res)
		res.Rows = nil
	}
	return rows, nil
}

// closedLoop runs wrk against config's server and, when the saturation
// rate is not known yet, measures it.
func (e *env) closedLoop(ctx context.Context, res *Results, config string, s *serverProc) ([]Row, error) {
	o := e.o
	var rows []Row
	w := Row{Config: config, Run: 1, Kind: "wrk"}
	var wr WrkResult
	err := e.measure(ctx, &w, s, true, func() error {
		var err error
		wr, err = runWrk(ctx, e.tmp, o.cpusLoad, s.base, payloadOf(config), o.wrkConns, o.step)
		return err
	})
	if err != nil {
		return rows, err
	}
	w.RPS = wr.RPS()
	w.Rejected = wr.StatusErrors
	w.Accepted = wr.Requests - wr.StatusErrors
	w.Errors = wr.ConnectErrors + wr.ReadErrors + wr.WriteErrors + wr.Timeouts
	w.Latency = Latency{N: int(wr.Requests), P50: float64(wr.P50Us) / 1e3, P99: float64(wr.P99Us) / 1e3,
		P999: float64(wr.P999Us) / 1e3, Max: float64(wr.MaxUs) / 1e3}
	rows = append(rows, w)
	logf("%s wrk: %.0f req/s, %d×503, stored %.0f spans/s, p99 %.1f ms", config, w.RPS, w.Rejected, w.StoredSpans, w.Latency.P99)
	s.drain(ctx, 60*time.Second)
	if res.SaturationRPS == 0 {
		// wrk answers every 503 with another request at once: thousands of
		// rejected requests a second on the load CPU, which MariaDB
		// shares. The saturation rate is also measured with clients that
		// behave like Zipkin reporters under back-pressure — 16
		// connections, each waiting 20 ms after a 503 — and the higher of
		// the two storage rates is used.
		p := Row{Config: config, Run: 1, Kind: "closed-backoff"}
		var lr LoadResult
		err := e.measure(ctx, &p, s, true, func() error {
			if payloadOf(config) != payloadJSON {
				// The same closed loop in the generator, with the configuration's payload.
				sr, err := e.runOpenLoop(ctx, openLoop{BaseURL: s.base, Closed: 16, Duration: o.step, Seed: 7, Payload: payloadOf(config)})
				lr = LoadResult{Traces: sr.AcceptedAll, Rejected: int64(sr.Rejected), PostsPerS: float64(sr.AcceptedAll) / o.step.Seconds()}
				return err
			}
			b, _ := json.Marshal(closedLoad{BaseURL: s.base, Conns: 16, Duration: o.step, Seed: 7})
			return e.worker(ctx, "-closedload-worker", string(b), &lr)
		})
		if err != nil {
			return rows, err
		}
		p.RPS, p.Accepted, p.Rejected = lr.PostsPerS, int64(lr.Traces), lr.Rejected
		rows = append(rows, p)
		if max(p.StoredSpans, w.StoredSpans) <= 0 {
			return rows, fmt.Errorf("%s stored no spans during the closed loops: see %s", config, s.log.Name())
		}
		res.SaturationRPS = max(p.StoredSpans, w.StoredSpans) / SpansPerTrace
		logf("saturation rate: %.0f requests/s (stored spans/s: %.0f in the closed loop with backoff, %.0f under wrk)",
			res.SaturationRPS, p.StoredSpans, w.StoredSpans)
		s.drain(ctx, 60*time.Second)
	}
	return rows, nil
}

// closedStep runs one closed-loop step in the generator: 16 senders, each
// waiting 20 ms after a 503, as many reporters that back off; stored
// spans/s counts the step's own spans.
func (e *env) closedStep(ctx context.Context, config string, run int, s *serverProc) (Row, error) {
	o := e.o
	r := Row{Config: config, Run: run, Kind: "closed"}
	var sr StepResult
	err := e.measure(ctx, &r, s, false, func() error {
		var err error
		sr, err = e.runOpenLoop(ctx, openLoop{BaseURL: s.base, Closed: 16, Backoff: 20 * time.Millisecond, Duration: o.step,
			Seed: uint64(run * 1000), WarmUp: time.Second, CountDSN: e.countDSN(config), Payload: payloadOf(config)})
		return err
	})
	if err != nil {
		return r, err
	}
	fillOpen(&r, sr)
	logf("%s run %d closed (16 senders, 20 ms backoff): %.0f done/s, %d×503, %d errors, stored %.0f spans/s, p50 %.1f p99 %.1f ms, server cpu %.0f%%",
		config, run, r.RPS, r.Rejected, r.Errors, r.StoredSpans, r.Latency.P50, r.Latency.P99, r.Server.CPUPercent)
	s.drain(ctx, 60*time.Second)
	return r, nil
}

// openStep runs one open-loop step at pct of the saturation rate.
func (e *env) openStep(ctx context.Context, res *Results, config string, run int, pct float64, s *serverProc) (Row, error) {
	o := e.o
	rate := res.SaturationRPS * pct / 100
	r := Row{Config: config, Run: run, Kind: "open", RatePct: pct, Offered: rate}
	var sr StepResult
	err := e.measure(ctx, &r, s, false, func() error {
		var err error
		sr, err = e.runOpenLoop(ctx, openLoop{BaseURL: s.base, Rate: rate, Duration: o.step,
			QueryRate: o.queryRate, Seed: uint64(run*1000) + uint64(pct),
			WarmUp: time.Second, CountDSN: e.countDSN(config), Payload: payloadOf(config)})
		return err
	})
	if err != nil {
		return r, err
	}
	fillOpen(&r, sr)
	logf("%s run %d %3.0f%% (%.0f/s): %.0f done/s, %d×503, %d errors, stored %.0f spans/s, p50 %.1f p99 %.1f max %.0f ms, server cpu %.0f%%",
		config, run, pct, rate, r.RPS, r.Rejected, r.Errors, r.StoredSpans, r.Latency.P50, r.Latency.P99, r.Latency.Max, r.Server.CPUPercent)
	s.drain(ctx, 60*time.Second)
	return r, nil
}

// countDSN is where the generator counts stored spans ("" for none).
func (e *env) countDSN(config string) string {
	if baseConfig(config) == "none" {
		return ""
	}
	return e.mdb.dsn(dbFor(config))
}

func fillOpen(r *Row, sr StepResult) {
	r.RPS = sr.Completed
	r.Accepted, r.Rejected, r.AcceptedAll = int64(sr.Accepted), int64(sr.Rejected), int64(sr.AcceptedAll)
	r.Errors = int64(sr.Errors + sr.OtherHTTP)
	r.Latency = sr.Latency
	r.Latency202 = sr.Latency202
	if c := baseConfig(r.Config); c == "pool" || c == "spool" {
		r.Samples202 = sr.Samples202
	}
	r.Queries, r.QueryErrors = sr.Queries, sr.QueryErr
	r.LagMs = sr.MaxLagMs
	if sr.StoredPerSec != 0 {
		r.StoredSpans = sr.StoredPerSec
	}
}

// RetentionCheck is the retention-during-load measurement.
type RetentionCheck struct {
	RatePct            float64 `json:"rate_pct"`
	Retention          string  `json:"retention"`
	P99Without         float64 `json:"p99_without_ms"`
	P99With            float64 `json:"p99_with_ms"`
	Ratio              float64 `json:"p99_ratio"`
	SpansBefore        int64   `json:"spans_before"`
	OldSpansLeft       int64   `json:"old_spans_left"`
	DeletedDuringStep  int64   `json:"spans_deleted"`
	DeletedInStep      int64   `json:"spans_deleted_during_step"`
	YoungStored        int64   `json:"young_spans_stored"`
	YoungExpected      int64   `json:"young_spans_expected"`
	OrphanAnnotations  int64   `json:"orphan_annotations"`
	RetentionDeletes   float64 `json:"retention_spans_deleted_metric"`
	RetentionConflicts float64 `json:"retention_conflicts_metric"`
}

// retentionCheck loads the database with spans two to three hours old,
// then runs the 50 % step twice on the pool: without retention, and with
// -retention 1h deleting the old spans while the step's ingest goes on.
// Afterwards it checks that no old span is left, that every span accepted
// during both steps is stored, and that no annotation lost its span.
func (e *env) retentionCheck(ctx context.Context, res *Results, pair int) (*RetentionCheck, []Row, error) {
	o := e.o
	pct := 50.0
	rate := res.SaturationRPS * pct / 100
	s, err := e.startServer(ctx, "pool")
	if err != nil {
		return nil, nil, err
	}
	// Old data: two steps at the saturation rate, 2–3 h old.
	pre, err := e.runOpenLoop(ctx, openLoop{BaseURL: s.base, Rate: res.SaturationRPS, Duration: 2 * o.step,
		AgeMicros: (2 * time.Hour).Microseconds(), SpreadMicros: time.Hour.Microseconds(), Seed: 55})
	if err != nil {
		s.stop()
		e.server = nil
		return nil, nil, err
	}
	s.drain(ctx, 120*time.Second)
	logf("retention: preloaded %d traces 2-3 h old", pre.Accepted)
	var rows []Row
	step := func(srv *serverProc, kind string, seed uint64) (Row, error) {
		// The step counts its own spans: retention deletes only the preloaded old ones.
		countDSN := e.countDSN("pool")
		r := Row{Config: "pool", Run: pair, Kind: kind, RatePct: pct, Offered: rate}
		var sr StepResult
		err := e.measure(ctx, &r, srv, false, func() error {
			var err error
			sr, err = e.runOpenLoop(ctx, openLoop{BaseURL: srv.base, Rate: rate, Duration: o.step,
				QueryRate: o.queryRate, Seed: seed, WarmUp: time.Second, CountDSN: countDSN})
			return err
		})
		fillOpen(&r, sr)
		logf("pool %s %.0f%%: stored %.0f spans/s, p50 %.1f p99 %.1f ms", kind, pct, r.StoredSpans, r.Latency.P50, r.Latency.P99)
		return r, err
	}
	base, err := step(s, "open-baseline", 77+uint64(pair)*10)
	s.drain(ctx, 60*time.Second)
	s.stop()
	e.server = nil
	if err != nil {
		return nil, rows, err
	}
	rows = append(rows, base)

	q := func(query string, args ...any) int64 {
		var n int64
		if err := e.mdb.db.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
			logf("retention check query failed: %v", err)
			return -1
		}
		return n
	}
	cutoff := time.Hour
	before := q("SELECT COUNT(*) FROM "+s.db+".zipkin_spans WHERE start_ts < ?", time.Now().Add(-cutoff).UnixMicro())
	s, err = e.startServerKeep(ctx, "pool", "-retention", "1h", "-retention-interval", "1s")
	if err != nil {
		return nil, rows, err
	}
	defer func() { s.stop(); e.server = nil }()
	with, err := step(s, "open+retention", 78+uint64(pair)*10)
	if err != nil {
		return nil, rows, err
	}
	rows = append(rows, with)
	s.drain(ctx, 60*time.Second)
	inStep, _ := s.metric("zipkin_retention_spans_deleted_total")
	// Let retention finish what is left before checking.
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; {
		if q("SELECT COUNT(*) FROM "+s.db+".zipkin_spans WHERE start_ts < ?", time.Now().Add(-cutoff).UnixMicro()) == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	rc := &RetentionCheck{DeletedInStep: int64(inStep), RatePct: pct, Retention: "1h", P99Without: base.Latency.P99,
		P99With: with.Latency.P99, SpansBefore: before}
	if base.Latency.P99 > 0 {
		rc.Ratio = with.Latency.P99 / base.Latency.P99
	}
	rc.RetentionDeletes, _ = s.metric("zipkin_retention_spans_deleted_total")
	rc.RetentionConflicts, _ = s.metric("zipkin_retention_retries_total")
	now := time.Now()
	rc.OldSpansLeft = q("SELECT COUNT(*) FROM "+s.db+".zipkin_spans WHERE start_ts < ?", now.Add(-cutoff).UnixMicro())
	rc.YoungStored = q("SELECT COUNT(*) FROM "+s.db+".zipkin_spans WHERE start_ts >= ?", now.Add(-cutoff).UnixMicro())
	rc.YoungExpected = (base.AcceptedAll + with.AcceptedAll) * SpansPerTrace
	rc.DeletedDuringStep = before - rc.OldSpansLeft
	rc.OrphanAnnotations = q("SELECT COUNT(*) FROM " + s.db + ".zipkin_annotations a LEFT JOIN " + s.db + ".zipkin_spans s" +
		" ON s.trace_id_high = a.trace_id_high AND s.trace_id = a.trace_id AND s.id = a.span_id WHERE s.id IS NULL")
	logf("retention: p99 %.1f → %.1f ms (×%.2f); deleted %d of %d old spans; young stored %d of %d expected; orphan annotations %d",
		rc.P99Without, rc.P99With, rc.Ratio, rc.DeletedDuringStep, before, rc.YoungStored, rc.YoungExpected, rc.OrphanAnnotations)
	return rc, rows, nil
}

// profiles runs -profile-config (the pool by default) at 50 % and 150 % of
// saturation with the server's pprof endpoint on and saves its mutex and
// block profiles, plus a `go tool pprof -top` of each, and an execution
// trace of the step's middle 5 s with the scheduler-latency and
// syscall profiles derived from it (`go tool trace -pprof`).
func (e *env) profiles(ctx context.Context, res *Results) (map[string]string, error) {
	o := e.o
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cfg := o.profileConfig
	s, err := e.startServer(ctx, cfg, "-pprof", addr)
	if err != nil {
		return nil, err
	}
	defer func() { s.stop(); e.server = nil }()
	prefix := ""
	if cfg != "pool" {
		prefix = cfg + "-"
	}
	out := map[string]string{}
	for _, pct := range []float64{50, 150} {
		rate := res.SaturationRPS * pct / 100
		// Reset the profiles' start: the delta is taken over the step.
		done := make(chan map[string][]byte, 1)
		go func() {
			got := map[string][]byte{}
			sec := int(o.step.Seconds())
			type res struct {
				name string
				b    []byte
			}
			ch := make(chan res, 3)
			for _, p := range []string{"mutex", "block"} {
				go func() {
					b, _ := httpGet(fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", addr, p, sec))
					ch <- res{p, b}
				}()
			}
			go func() {
				// The trace covers the middle of the step, after its start-up.
				tsec := min(5, max(1, sec/2))
				select {
				case <-time.After(time.Duration(sec-tsec) * time.Second / 2):
				case <-ctx.Done():
				}
				b, _ := httpGet(fmt.Sprintf("http://%s/debug/pprof/trace?seconds=%d", addr, tsec))
				ch <- res{"trace", b}
			}()
			for i := 0; i < 3; i++ {
				r := <-ch
				got[r.name] = r.b
			}
			done <- got
		}()
		if _, err := e.runOpenLoop(ctx, openLoop{BaseURL: s.base, Rate: rate, Duration: o.step,
			QueryRate: o.queryRate, Seed: 99}); err != nil {
			return out, err
		}
		got := <-done
		for name, b := range got {
			if name == "trace" {
				file := filepath.Join(o.out, fmt.Sprintf("%strace-%.0fpct.out", prefix, pct))
				if err := os.WriteFile(file, b, 0o644); err != nil {
					return out, err
				}
				for _, kind := range []string{"sched", "syscall"} {
					pf := strings.TrimSuffix(file, ".out") + "-" + kind + ".pb"
					if b, err := exec.CommandContext(ctx, "go", "tool", "trace", "-pprof="+kind, file).Output(); err == nil {
						_ = os.WriteFile(pf, b, 0o644)
						top, _ := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=25", pf).CombinedOutput()
						_ = os.WriteFile(strings.TrimSuffix(pf, ".pb")+".txt", top, 0o644)
					}
				}
				out[fmt.Sprintf("%strace-%.0fpct", prefix, pct)] = file
				continue
			}
			file := filepath.Join(o.out, fmt.Sprintf("%s%s-%.0fpct.pb.gz", prefix, name, pct))
			if err := os.WriteFile(file, b, 0o644); err != nil {
				return out, err
			}
			// Three views: everything; the POST handler (where a request
			// that sends spans waits); the query handlers.
			var txt []byte
			for _, v := range []struct{ title, focus string }{
				{"all goroutines", ""},
				{"POST /api/v2/spans handler", `Server\).postSpans|ingestQueue\).offer`},
				{"query handlers", `Server\).query`},
			} {
				args := []string{"tool", "pprof", "-top", "-nodecount=25", "-ignore=pprof"}
				if v.focus != "" {
					args = append(args, "-focus="+v.focus)
				}
				top, _ := exec.CommandContext(ctx, "go", append(args, e.bin, file)...).CombinedOutput()
				txt = append(txt, "==== "+v.title+"\n"...)
				txt = append(txt, top...)
				txt = append(txt, '\n')
			}
			_ = os.WriteFile(strings.TrimSuffix(file, ".pb.gz")+".txt", txt, 0o644)
			out[fmt.Sprintf("%s%s-%.0fpct", prefix, name, pct)] = file
		}
		s.drain(ctx, 60*time.Second)
		logf("profiles at %.0f%% saved in %s", pct, o.out)
	}
	return out, nil
}

func httpGet(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return io.ReadAll(resp.Body)
}

func writeResults(dir string, res *Results) {
	res.Ratios = ratios(res.Rows)
	res.OTLP = otlpRatios(res.Rows)
	if sr := spoolRatios(res.Rows); sr != nil {
		res.Spool = sr // kept once the rows are written and cleared between runs
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	_ = os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644)
	_ = os.WriteFile(filepath.Join(dir, "results.md"), []byte(markdown(res)), 0o644)
}
