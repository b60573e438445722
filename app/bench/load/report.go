package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Ratio compares configurations at one offered rate over the interleaved
// runs: medians, and the range the per-run figures allow.
type Ratio struct {
	RatePct float64 `json:"rate_pct"`
	// Stored spans/s, pool over database-sql: median ratio and the
	// extremes (min pool / max sql, max pool / min sql).
	StoredPoolSQL    float64 `json:"stored_pool_over_sql"`
	StoredPoolSQLMin float64 `json:"stored_pool_over_sql_min"`
	StoredPoolSQLMax float64 `json:"stored_pool_over_sql_max"`
	// p99 of the POSTs, pool over database-sql.
	P99PoolSQL    float64 `json:"p99_pool_over_sql"`
	P99PoolSQLMin float64 `json:"p99_pool_over_sql_min"`
	P99PoolSQLMax float64 `json:"p99_pool_over_sql_max"`
	// p99 of the POSTs answered 202, pool over database-sql (median
	// [extremes]); past saturation the configurations answer different
	// shares of 503s, which are cheaper than 202s.
	P99x202PoolSQL    float64 `json:"p99_202_pool_over_sql"`
	P99x202PoolSQLMin float64 `json:"p99_202_pool_over_sql_min"`
	P99x202PoolSQLMax float64 `json:"p99_202_pool_over_sql_max"`
	// p99 of the POSTs, pool over none.
	P99PoolNone float64 `json:"p99_pool_over_none"`
	// Verdicts on the bar (see docs/design/load.md).
	StoredNotLess bool `json:"pool_stored_not_less_beyond_error_bars"`
	// WithinTwiceNone: the pool's median p99 is at most twice none's
	// (the bar applies at rates up to 50 % only).
	WithinTwiceNone   bool `json:"pool_p99_within_2x_none"`
	P99NotWorse       bool `json:"pool_p99_not_worse_beyond_error_bars"`
	RunsPool, RunsSQL int
}

func collect(rows []Row, config string, pct float64, f func(Row) float64) []float64 {
	var v []float64
	for _, r := range rows {
		if r.Config == config && r.Kind == "open" && r.RatePct == pct {
			v = append(v, f(r))
		}
	}
	return v
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// ratios computes the pool/database-sql and pool/none comparisons per
// open-loop rate. The verdicts use the spread of the interleaved runs as
// the error bar of each configuration:
//
//   - the pool "stores not less" when its median stored spans/s is at least
//     database-sql's lowest run, less storedResolution (below saturation
//     both store what is offered, and the count's window makes the last
//     digits noise);
//   - its p99 is "worse beyond the error bars" only when the error bars do
//     not overlap: every pool run's p99 above every database-sql run's.
//     (The stricter "pool median above database-sql's worst run" flags
//     one rate in five as worse when the two are drawn from the same
//     distribution — the two largest of six values both the pool's — and so
//     at one or two of eight rates in a typical run of identical servers.)
func ratios(rows []Row) []Ratio {
	var rates []float64
	for _, r := range rows {
		if r.Kind == "open" && !slices.Contains(rates, r.RatePct) {
			rates = append(rates, r.RatePct)
		}
	}
	slices.Sort(rates)
	var out []Ratio
	stored := func(r Row) float64 { return r.StoredSpans }
	p99 := func(r Row) float64 { return r.Latency.P99 }
	p99x202 := func(r Row) float64 { return r.Latency202.P99 }
	for _, pct := range rates {
		ps, ss := collect(rows, "pool", pct, stored), collect(rows, "database-sql", pct, stored)
		pp, sp := collect(rows, "pool", pct, p99), collect(rows, "database-sql", pct, p99)
		np := collect(rows, "none", pct, p99)
		r := Ratio{RatePct: pct, RunsPool: len(ps), RunsSQL: len(ss)}
		if len(ps) > 0 && len(ss) > 0 {
			r.StoredPoolSQL = div(median(ps), median(ss))
			r.StoredPoolSQLMin = div(slices.Min(ps), slices.Max(ss))
			r.StoredPoolSQLMax = div(slices.Max(ps), slices.Min(ss))
			r.P99PoolSQL = div(median(pp), median(sp))
			r.P99PoolSQLMin = div(slices.Min(pp), slices.Max(sp))
			r.P99PoolSQLMax = div(slices.Max(pp), slices.Min(sp))
			p2, s2 := collect(rows, "pool", pct, p99x202), collect(rows, "database-sql", pct, p99x202)
			r.P99x202PoolSQL = div(median(p2), median(s2))
			r.P99x202PoolSQLMin = div(slices.Min(p2), slices.Max(s2))
			r.P99x202PoolSQLMax = div(slices.Max(p2), slices.Min(s2))
			r.StoredNotLess = median(ps) >= slices.Min(ss)*(1-storedResolution)
			r.P99NotWorse = slices.Min(pp) <= slices.Max(sp)
		}
		if len(np) > 0 && len(pp) > 0 {
			r.P99PoolNone = div(median(pp), median(np))
			r.WithinTwiceNone = r.P99PoolNone <= 2
		}
		out = append(out, r)
	}
	return out
}

// storedResolution is the relative resolution of a step's stored spans/s:
// the count is taken when the last POST is answered, give or take the
// writers' last batch (up to ~0.1 s of a 15 s step).
const storedResolution = 0.01

func f0(v float64) string { return fmt.Sprintf("%.0f", v) }
func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "**no**"
}

// markdown renders the results as docs/design/load.md quotes them.
func markdown(res *Results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run: %s, %s → %s (%s)\n\n", res.Command, res.Started.Format(time.RFC3339),
		res.Finished.Format("15:04:05"), res.Finished.Sub(res.Started).Round(time.Second))
	fmt.Fprintf(&b, "Machine: %s. MariaDB %s, innodb_buffer_pool_size=%s, durable commits (defaults). CPUs: mariadbd %s, zipkin-mysql %s, wrk and generator %s. MYSQL_MAX_CONNECTIONS=%d and -queue-spans %d for every configuration. Steps of %.0f s (open loop: the first second not recorded); query mix %.0f GETs/s alongside the POSTs. Saturation rate (stored spans/s ÷ 10 of the pool's first closed-loop run with backoff, or under wrk if higher): %.0f requests/s.\n\n",
		res.Machine, res.MariaDB, res.BufferPool, res.CPUs["mariadbd"], res.CPUs["zipkin-mysql"], res.CPUs["wrk+generator"],
		res.MaxConns, res.QueueSpans, res.StepSeconds, res.QueryRate, res.SaturationRPS)
	var configs []string
	for _, r := range res.Rows {
		if !slices.Contains(configs, r.Config) {
			configs = append(configs, r.Config)
		}
	}
	for _, c := range configs {
		fmt.Fprintf(&b, "### %s\n\n", c)
		b.WriteString("| run | step | offered/s | done/s | stored spans/s | 202 | 503 | err | p50 ms | p99 ms | p99.9 ms | max ms | server CPU % | server RSS MiB | MariaDB CPU % | gen lag ms | 1213/1205 | load1 |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range res.Rows {
			if r.Config != c {
				continue
			}
			step := "wrk (closed)"
			off := "—"
			switch r.Kind {
			case "closed-backoff":
				step = "closed, 20 ms backoff on 503 (saturation probe)"
			case "closed":
				step = "closed, 16 senders, 20 ms backoff on 503"
			case "open":
				step, off = f0(r.RatePct)+" %", f0(r.Offered)
			case "open-baseline":
				step, off = f0(r.RatePct)+" % (retention baseline)", f0(r.Offered)
			case "open+retention":
				step, off = f0(r.RatePct)+" % + retention", f0(r.Offered)
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %d/%d | %s |\n",
				r.Run, step, off, f0(r.RPS), f0(r.StoredSpans), r.Accepted, r.Rejected, r.Errors,
				f1(r.Latency.P50), f1(r.Latency.P99), f1(r.Latency.P999), f0(r.Latency.Max),
				f0(r.Server.CPUPercent), f0(r.Server.MaxRSSMiB), f0(r.DB.CPUPercent), f0(r.LagMs), r.Deadlocks, r.LockWaits, f1(r.Load1))
		}
		b.WriteString("\n")
	}
	if slices.ContainsFunc(res.Ratios, func(r Ratio) bool { return r.RunsSQL > 0 || r.P99PoolNone > 0 }) {
		b.WriteString("### Ratios (open loop; medians over the interleaved runs, [range])\n\n")
		b.WriteString("| rate | runs pool/sql | stored spans/s pool ÷ database-sql | p99 pool ÷ database-sql | p99 of 202s pool ÷ database-sql | p99 pool ÷ none | stored not less | p99 not worse | ≤ 50 %: p99 ≤ 2× none |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range res.Ratios {
			twice := "—"
			if r.RatePct <= 50 && r.P99PoolNone > 0 {
				twice = yes(r.WithinTwiceNone)
			}
			fmt.Fprintf(&b, "| %s %% | %d/%d | %s [%s–%s] | %s [%s–%s] | %s [%s–%s] | %s | %s | %s | %s |\n", f0(r.RatePct), r.RunsPool, r.RunsSQL,
				f2(r.StoredPoolSQL), f2(r.StoredPoolSQLMin), f2(r.StoredPoolSQLMax),
				f2(r.P99PoolSQL), f2(r.P99PoolSQLMin), f2(r.P99PoolSQLMax),
				f2(r.P99x202PoolSQL), f2(r.P99x202PoolSQLMin), f2(r.P99x202PoolSQLMax), f2(r.P99PoolNone),
				yes(r.StoredNotLess), yes(r.P99NotWorse), twice)
		}
		b.WriteString("\n")
	}
	b.WriteString(spoolTable(res.Spool))
	b.WriteString(otlpTables(res.Rows, res.OTLP))
	if q := queryTable(res.Rows); q != "" {
		b.WriteString(q)
	}
	if len(res.Retention) > 0 {
		rc0 := res.Retention[0]
		fmt.Fprintf(&b, "### Retention during load (pool, %s %% of saturation, -retention %s; one pair of steps per line, each on a fresh database)\n\n", f0(rc0.RatePct), rc0.Retention)
		b.WriteString("| pair | p99 without ms | p99 with ms | ratio | old spans | deleted during the step | left | accepted spans stored | orphaned annotations | retention retries |\n|---|---|---|---|---|---|---|---|---|---|\n")
		var ratios []float64
		for i, rc := range res.Retention {
			ratios = append(ratios, rc.Ratio)
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %d | %d | %d | %d of %d | %d | %.0f |\n", i+1, f1(rc.P99Without), f1(rc.P99With), f2(rc.Ratio),
				rc.SpansBefore, rc.DeletedInStep, rc.OldSpansLeft, rc.YoungStored, rc.YoungExpected, rc.OrphanAnnotations, rc.RetentionConflicts)
		}
		fmt.Fprintf(&b, "\nMedian p99 ratio with/without retention: ×%s.\n\n", f2(median(ratios)))
	}
	return b.String()
}

// queryTable summarises the query mix's latency per configuration and
// rate (runs pooled by taking the median of the per-run figures).
func queryTable(rows []Row) string {
	var b strings.Builder
	b.WriteString("### Query mix alongside ingest (median over runs of each run's p50 / p99, ms)\n\n")
	b.WriteString("| config | rate | services | span names | traces by service | traces by tag | errors |\n|---|---|---|---|---|---|---|\n")
	any := false
	type key struct {
		c string
		p float64
	}
	var keys []key
	for _, r := range rows {
		if r.Kind == "open" && len(r.Queries) > 0 && !slices.Contains(keys, key{r.Config, r.RatePct}) {
			keys = append(keys, key{r.Config, r.RatePct})
		}
	}
	for _, k := range keys {
		any = true
		fmt.Fprintf(&b, "| %s | %s %% |", k.c, f0(k.p))
		errs := 0
		for _, r := range rows {
			if r.Config == k.c && r.RatePct == k.p && r.Kind == "open" {
				errs += r.QueryErrors
			}
		}
		for _, q := range queryKinds {
			p50 := collect(rows, k.c, k.p, func(r Row) float64 { return r.Queries[q].P50 })
			p99 := collect(rows, k.c, k.p, func(r Row) float64 { return r.Queries[q].P99 })
			fmt.Fprintf(&b, " %s / %s |", f1(median(p50)), f1(median(p99)))
		}
		fmt.Fprintf(&b, " %d |\n", errs)
	}
	if !any {
		return ""
	}
	b.WriteString("\n")
	return b.String()
}

// OTLPRatio compares a configuration sent OTLP/HTTP protobuf (its "-otlp"
// twin) with the same configuration sent JSON v2, at one step, over the
// interleaved runs: the ratios of the runs' stored spans/s, run by run
// (each run's two steps are seconds apart).
type OTLPRatio struct {
	Config  string  `json:"config"`   // the JSON configuration, e.g. "pool" or "pool-otel-json"
	Step    string  `json:"step"`     // "closed" (16 senders with backoff) or "open"
	RatePct float64 `json:"rate_pct"` // open loop: offered, % of saturation
	// Stored spans/s, OTLP over JSON, per run, and their median and range.
	Stored []float64 `json:"stored_otlp_over_json_per_run"`
	// Saturated says, per run, whether both steps ran at the storage's
	// capacity: the closed loop always does; an open-loop pair does when
	// both servers refused POSTs with 503 (their queues were full). Below
	// that, both store what is offered and the ratio is 1 whatever their
	// capacities.
	Saturated    []bool  `json:"saturated_per_run"`
	StoredMedian float64 `json:"stored_otlp_over_json"`
	StoredMin    float64 `json:"stored_otlp_over_json_min"`
	StoredMax    float64 `json:"stored_otlp_over_json_max"`
	// p99 of the POSTs, OTLP over JSON, median of the per-run ratios.
	P99Median float64 `json:"p99_otlp_over_json"`
	// PerDBCPU is the ratio of stored spans per second of MariaDB CPU
	// (stored spans/s ÷ mariadbd's CPU % over the step), per run: what
	// each span costs the database, whatever share of its core other
	// processes left it during the step.
	PerDBCPU       []float64 `json:"stored_per_db_cpu_otlp_over_json_per_run"`
	PerDBCPUMedian float64   `json:"stored_per_db_cpu_otlp_over_json"`
}

// otlpStepKey is a row's step in the comparison: the closed loop (rate
// -1, so that it sorts first), or the open loop at its rate.
func otlpStepKey(r Row) (string, float64) {
	if r.Kind == "closed" {
		return "closed", -1
	}
	return "open", r.RatePct
}

// isJSONTwin reports whether config is a JSON v2 configuration (plain, or
// with the tags of OpenTelemetry's exporter) of the same server as the
// OTLP configuration otlpConfig.
func isJSONTwin(config, otlpConfig string) bool {
	base := baseConfig(otlpConfig)
	return config == base || config == base+otelJSONSuffix
}

// perDBCPU is OTLP's stored spans per MariaDB CPU-second over JSON's
// (0 when a CPU figure is missing).
func perDBCPU(json, otlp Row) float64 {
	return div(div(otlp.StoredSpans, otlp.DB.CPUPercent), div(json.StoredSpans, json.DB.CPUPercent))
}

// otlpSaturated reports whether a JSON step and its OTLP twin both ran at
// the storage's capacity (OTLPRatio.Saturated).
func otlpSaturated(json, otlp Row) bool {
	return otlp.Kind == "closed" || json.Rejected > 0 && otlp.Rejected > 0
}

// otlpRatios pairs every OTLP configuration's closed and open steps with
// its JSON twin's of the same run.
func otlpRatios(rows []Row) []OTLPRatio {
	type key struct {
		config string
		step   string
		pct    float64
	}
	var keys []key
	type pairRatio struct {
		stored, p99, perCPU float64
		saturated           bool
	}
	per := map[key][]pairRatio{}
	for _, o := range rows {
		if payloadOf(o.Config) != payloadOTLP || (o.Kind != "open" && o.Kind != "closed") {
			continue
		}
		for _, j := range rows {
			if !isJSONTwin(j.Config, o.Config) || j.Kind != o.Kind || j.Run != o.Run || j.RatePct != o.RatePct {
				continue
			}
			step, pct := otlpStepKey(o)
			k := key{j.Config, step, pct}
			if _, ok := per[k]; !ok {
				keys = append(keys, k)
			}
			per[k] = append(per[k], pairRatio{div(o.StoredSpans, j.StoredSpans), div(o.Latency.P99, j.Latency.P99),
				perDBCPU(j, o), otlpSaturated(j, o)})
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.config != b.config {
			return strings.Compare(a.config, b.config)
		}
		return cmp.Compare(a.pct, b.pct) // closed (-1) first
	})
	var out []OTLPRatio
	for _, k := range keys {
		r := OTLPRatio{Config: k.config, Step: k.step}
		if k.step == "open" {
			r.RatePct = k.pct
		}
		var p99 []float64
		for _, v := range per[k] {
			r.Stored = append(r.Stored, v.stored)
			r.Saturated = append(r.Saturated, v.saturated)
			r.PerDBCPU = append(r.PerDBCPU, v.perCPU)
			p99 = append(p99, v.p99)
		}
		r.StoredMedian, r.StoredMin, r.StoredMax = median(r.Stored), slices.Min(r.Stored), slices.Max(r.Stored)
		r.P99Median = median(p99)
		r.PerDBCPUMedian = median(r.PerDBCPU)
		out = append(out, r)
	}
	return out
}

// otlpBar is the bar of the OTLP payload: at saturation, stored spans/s
// with OTLP/HTTP protobuf at least 0.8× JSON v2's in the same run.
const otlpBar = 0.8

// otlpTables renders the OTLP comparison: the paired steps run by run,
// then the ratios per step and the verdict at saturation.
func otlpTables(rows []Row, rs []OTLPRatio) string {
	if len(rs) == 0 {
		return ""
	}
	var b strings.Builder
	var configs []string
	for _, r := range rs {
		if !slices.Contains(configs, r.Config) {
			configs = append(configs, r.Config)
		}
	}
	for _, c := range configs {
		oc := baseConfig(c) + otlpSuffix
		what := "JSON v2"
		if payloadOf(c) == payloadOTelJSON {
			what = "JSON v2 with the tags of OpenTelemetry's Zipkin exporter"
		}
		fmt.Fprintf(&b, "### OTLP/HTTP protobuf (%s) vs %s (%s), run by run\n\n", oc, what, c)
		b.WriteString("Each pair of steps ran back to back on two servers of the same configuration (own databases); stored spans/s counts each step's own spans. OTLP's 200 is counted as JSON's 202.\n\n")
		b.WriteString("| step | run | JSON stored spans/s | OTLP stored spans/s | OTLP ÷ JSON | at saturation | per MariaDB CPU-s, OTLP ÷ JSON | JSON / OTLP MariaDB CPU % | JSON p50 / p99 ms | OTLP p50 / p99 ms | JSON 503 | OTLP 503 | JSON / OTLP server CPU % | load1 |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range rs {
			if r.Config != c {
				continue
			}
			for _, j := range rows {
				step, pct := otlpStepKey(j)
				if j.Config != c || step != r.Step || (step == "open" && pct != r.RatePct) {
					continue
				}
				for _, o := range rows {
					if o.Config != oc || o.Kind != j.Kind || o.Run != j.Run || o.RatePct != j.RatePct {
						continue
					}
					label := "closed, 16 senders"
					if step == "open" {
						label = f0(pct) + " %"
					}
					sat := "—"
					if otlpSaturated(j, o) {
						sat = "yes"
					}
					fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s / %s | %s / %s | %s / %s | %d | %d | %s / %s | %s |\n", label, j.Run,
						f0(j.StoredSpans), f0(o.StoredSpans), f2(div(o.StoredSpans, j.StoredSpans)), sat,
						f2(perDBCPU(j, o)), f0(j.DB.CPUPercent), f0(o.DB.CPUPercent),
						f1(j.Latency.P50), f1(j.Latency.P99), f1(o.Latency.P50), f1(o.Latency.P99), j.Rejected, o.Rejected,
						f0(j.Server.CPUPercent), f0(o.Server.CPUPercent), f1(min(j.Load1, o.Load1)))
				}
			}
		}
		b.WriteString("\n")
		fmt.Fprintf(&b, "### OTLP ÷ %s (%s), stored spans/s per run: median [min–max]\n\n", what, c)
		b.WriteString("| step | runs | stored spans/s OTLP ÷ JSON | stored per MariaDB CPU-s OTLP ÷ JSON (median) | p99 OTLP ÷ JSON (median) | runs at saturation (both refused) |\n|---|---|---|---|---|---|\n")
		var sat []float64
		for _, r := range rs {
			if r.Config != c {
				continue
			}
			label := "closed, 16 senders"
			if r.Step == "open" {
				label = f0(r.RatePct) + " %"
			}
			n := 0
			for i, s := range r.Saturated {
				if s {
					n++
					sat = append(sat, r.Stored[i])
				}
			}
			fmt.Fprintf(&b, "| %s | %d | %s [%s–%s] | %s | %s | %d |\n", label, len(r.Stored), f2(r.StoredMedian), f2(r.StoredMin), f2(r.StoredMax),
				f2(r.PerDBCPUMedian), f2(r.P99Median), n)
		}
		b.WriteString("\n")
		if len(sat) > 0 {
			fmt.Fprintf(&b, "At saturation (the closed loops, and the open-loop pairs in which both servers refused POSTs), %d paired steps: stored spans/s OTLP ÷ %s median %s, min %s, max %s; bar ≥ %.1f× (median): %s.\n\n",
				len(sat), what, f2(median(sat)), f2(slices.Min(sat)), f2(slices.Max(sat)), otlpBar, yes(median(sat) >= otlpBar))
		}
	}
	return b.String()
}
