package bench

import (
	"bufio"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Result is the merged outcome of a Spec over all its forks: one JSON object per line in
// -format json. Fields that do not apply are null (traffic on the stub) or omitted (latency
// percentiles outside contended).
type Result struct {
	Benchmark string    `json:"benchmark"`
	Pool      string    `json:"pool"`
	Threads   int       `json:"threads"`
	Size      int       `json:"size"`
	Target    string    `json:"target"` // stub, embedded or dsn
	Forks     int       `json:"forks"`  // 0: run in the jmh process
	Samples   int       `json:"samples"`
	Iters     []float64 `json:"iterations"` // measured iteration scores, ops/ms, all forks
	OpsPerMs  float64   `json:"ops_per_ms"` // score: mean of Iters
	Error     *float64  `json:"error"`      // half-width of the 99.9 % CI (Student t); null with one sample
	Min       float64   `json:"min"`
	Max       float64   `json:"max"`
	Stdev     *float64  `json:"stdev"`
	Unit      string    `json:"unit"`

	// Traffic through the counting proxy, per operation (null on the stub). RoundTripsPerOp is
	// client packets per op: one per request, including COM_STMT_CLOSE, which has no answer.
	BytesPerOp         *float64 `json:"bytes_per_op"`
	ClientBytesPerOp   *float64 `json:"client_bytes_per_op"`
	ServerBytesPerOp   *float64 `json:"server_bytes_per_op"`
	RoundTripsPerOp    *float64 `json:"round_trips_per_op"`
	ServerPacketsPerOp *float64 `json:"server_packets_per_op"`
	NewConns           *int64   `json:"new_conns"` // connections dialled during measurement

	// The pool's own work per operation (sqlpool kinds only).
	ValidationsPerOp  *float64 `json:"validations_per_op,omitempty"`
	ReleasePlansPerOp *float64 `json:"release_plans_per_op,omitempty"`

	// contended and saturated: acquire latency, µs (contended: from the scheduled start;
	// saturated: from the start of the borrow). contended only: the offered load.
	RatePerMs *float64 `json:"rate_per_ms,omitempty"`
	P50us     *float64 `json:"p50_us,omitempty"`
	P99us     *float64 `json:"p99_us,omitempty"`
	P999us    *float64 `json:"p999_us,omitempty"`
	MaxUs     *float64 `json:"max_us,omitempty"`
	// P999IterUs is the mean of the measured iterations' own p99.9 and P999IterErrorUs its
	// 99.9 % CI half-width: error bars for the tail, which one bad iteration can dominate in
	// P999us (all requests pooled).
	P999IterUs      *float64 `json:"p999_iter_us,omitempty"`
	P999IterErrorUs *float64 `json:"p999_iter_error_us,omitempty"`
	Requests        *uint64  `json:"requests,omitempty"`
	Missed          *int64   `json:"missed,omitempty"` // requests never started (behind at 2× the window)

	// saturated only: the hold time, and per-goroutine operations completed in an iteration
	// window, each the mean over measured iterations: the slowest goroutine's, the median
	// goroutine's, and the mean over goroutines. SlowestShare is the mean of each iteration's
	// slowest/mean (1: every goroutine got the same share; the bar asks ≥ 0.5).
	HoldUs       *float64 `json:"hold_us,omitempty"`
	SlowestOps   *float64 `json:"slowest_ops,omitempty"`
	MedianOps    *float64 `json:"median_ops,omitempty"`
	MeanOps      *float64 `json:"mean_ops,omitempty"`
	SlowestShare *float64 `json:"slowest_share,omitempty"`

	Load1Start float64   `json:"load1_start"` // /proc/loadavg 1-minute load at the start
	Load1End   float64   `json:"load1_end"`
	Started    time.Time `json:"started"`
}

// Summary returns the result's score summary.
func (r *Result) Summary() Summary { return Summarize(r.Iters) }

func fptr(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// Merge combines the raws of one Spec (one per fork) into a Result.
func Merge(target string, forks int, raws []*Raw) *Result {
	s := raws[0].Spec
	r := &Result{Benchmark: s.Benchmark, Pool: s.Pool, Threads: s.Threads, Size: s.Size, Target: target,
		Forks: forks, Unit: "ops/ms", Load1Start: raws[0].Load1Start, Started: raws[0].Started}
	var ops int64
	var c = raws[0].Counts
	c.ClientBytes, c.ServerBytes, c.ClientPackets, c.ServerPackets, c.Conns = 0, 0, 0, 0, 0
	var val, plans uint64
	var missed int64
	hist := NewHistogram()
	var p999s, slow, med, mean, share []float64
	for _, raw := range raws {
		p999s = append(p999s, raw.P999s...)
		slow = append(slow, raw.SlowestOps...)
		med = append(med, raw.MedianOps...)
		mean = append(mean, raw.MeanOps...)
		for i := range raw.SlowestOps {
			if raw.MeanOps[i] > 0 {
				share = append(share, raw.SlowestOps[i]/raw.MeanOps[i])
			}
		}
		r.Iters = append(r.Iters, raw.Scores...)
		ops += raw.AllOps
		addCounts(&c, raw.Counts)
		val += raw.Validations
		plans += raw.Plans
		missed += raw.Missed
		if raw.Hist != nil {
			hist.Merge(HistogramFromSparse(raw.Hist, raw.HistMax))
		}
		r.Load1End = raw.Load1End
	}
	sum := Summarize(r.Iters)
	r.Samples, r.OpsPerMs, r.Min, r.Max = sum.N, sum.Score, sum.Min, sum.Max
	r.Error, r.Stdev = fptr(sum.Error), fptr(sum.Stdev)
	perOp := func(x int64) *float64 {
		if ops == 0 {
			return nil
		}
		return fptr(float64(x) / float64(ops))
	}
	if raws[0].Counting {
		r.BytesPerOp = perOp(c.ClientBytes + c.ServerBytes)
		r.ClientBytesPerOp = perOp(c.ClientBytes)
		r.ServerBytesPerOp = perOp(c.ServerBytes)
		if !raws[0].NoPackets {
			r.RoundTripsPerOp = perOp(c.ClientPackets)
			r.ServerPacketsPerOp = perOp(c.ServerPackets)
		}
		n := c.Conns
		r.NewConns = &n
	}
	if s.Pool == PoolSqlpool {
		r.ValidationsPerOp = perOp(int64(val))
		r.ReleasePlansPerOp = perOp(int64(plans))
	}
	if s.Benchmark == BenchContended || s.Benchmark == BenchSaturated {
		us := func(ns int64) *float64 { return fptr(float64(ns) / 1e3) }
		r.P50us, r.P99us, r.P999us = us(hist.Quantile(0.5)), us(hist.Quantile(0.99)), us(hist.Quantile(0.999))
		r.MaxUs = us(hist.Max())
		if ps := Summarize(p999s); ps.N > 0 {
			r.P999IterUs, r.P999IterErrorUs = fptr(ps.Score), fptr(ps.Error)
		}
		n := hist.Count()
		r.Requests = &n
	}
	if s.Benchmark == BenchContended {
		r.RatePerMs = fptr(s.Rate)
		r.Missed = &missed
	}
	if s.Benchmark == BenchSaturated {
		r.HoldUs = fptr(float64(s.Hold) / 1e3)
		r.SlowestOps = fptr(Summarize(slow).Score)
		r.MedianOps = fptr(Summarize(med).Score)
		r.MeanOps = fptr(Summarize(mean).Score)
		r.SlowestShare = fptr(Summarize(share).Score)
	}
	return r
}

// Load1 returns the 1-minute load average from /proc/loadavg, or NaN.
func Load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// Machine describes the machine for the report header.
func Machine() string {
	model := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		_ = f.Close()
	}
	la := "n/a"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		la = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return "nproc " + strconv.Itoa(runtime.NumCPU()) + ", GOMAXPROCS " + strconv.Itoa(runtime.GOMAXPROCS(0)) +
		", " + model + ", " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ", loadavg " + la
}
