package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// Spec is one measured combination: a benchmark on a pool at a concurrency.
type Spec struct {
	Benchmark     string        `json:"benchmark"`
	Pool          string        `json:"pool"`
	Threads       int           `json:"threads"` // goroutines
	Size          int           `json:"size"`    // pool size (MaxConns; MaxOpen = MaxIdle)
	Warmup        int           `json:"warmup"`
	Iterations    int           `json:"iterations"`
	IterationTime time.Duration `json:"iteration_time"`
	Rate          float64       `json:"rate,omitempty"` // contended: requests per ms, all goroutines
	Hold          time.Duration `json:"hold,omitempty"` // saturated: how long each borrower holds its connection
}

func (s Spec) String() string {
	return fmt.Sprintf("%s pool=%s threads=%d", s.Benchmark, s.Pool, s.Threads)
}

// IterEvent reports one finished iteration while a Spec runs.
type IterEvent struct {
	Warmup          bool     `json:"warmup"`
	Index           int      `json:"index"` // 1-based, within warmup or measurement
	Score           float64  `json:"score"` // ops/ms
	BytesPerOp      *float64 `json:"bytes_per_op,omitempty"`
	RoundTripsPerOp *float64 `json:"round_trips_per_op,omitempty"`
	P999us          *float64 `json:"p999_us,omitempty"`
}

// Raw is what one run (one fork) of a Spec measured, in additive form so that forks can be
// merged: iteration scores, totals, traffic and the latency histogram.
type Raw struct {
	Spec     Spec             `json:"spec"`
	Scores   []float64        `json:"scores"`
	AllOps   int64            `json:"all_ops"` // operations completed in measured iterations
	Counting bool             `json:"counting"`
	Counts   mysqltest.Counts `json:"counts"` // traffic in measured iterations
	// NoPackets: the proxy's packet counts are not this protocol's (PostgreSQL); only bytes
	// and connections are reported.
	NoPackets   bool      `json:"no_packets,omitempty"`
	Validations uint64    `json:"validations"`
	Plans       uint64    `json:"release_plans"`
	Missed      int64     `json:"missed"`
	P999s       []float64 `json:"p999s,omitempty"` // contended, saturated: each measured iteration's p99.9, µs
	// saturated: per measured iteration, the operations completed in the window by the
	// slowest goroutine, the median goroutine, and the mean over goroutines.
	SlowestOps []float64      `json:"slowest_ops,omitempty"`
	MedianOps  []float64      `json:"median_ops,omitempty"`
	MeanOps    []float64      `json:"mean_ops,omitempty"`
	Hist       map[int]uint64 `json:"hist,omitempty"`
	HistMax    int64          `json:"hist_max,omitempty"`
	Load1Start float64        `json:"load1_start"`
	Load1End   float64        `json:"load1_end"`
	Started    time.Time      `json:"started"`
}

// RunSpec opens the spec's pool on t, runs its warmup and measured iterations and closes the
// pool. onIter, if not nil, is called after each iteration. logTo receives the pool's warnings.
func RunSpec(s Spec, t *Target, logTo io.Writer, onIter func(IterEvent)) (*Raw, error) {
	raw := &Raw{Spec: s, Counting: t.Counting(), NoPackets: t.pg, Load1Start: Load1(), Started: time.Now()}
	if isInsert(s.Benchmark) {
		if err := t.PrepareInsertTable(); err != nil {
			return nil, err
		}
	}
	d, err := openPoolOn(s.Pool, t, s.Size, logTo)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var hist *Histogram
	latency := s.Benchmark == BenchContended || s.Benchmark == BenchSaturated
	if latency {
		hist = NewHistogram()
	}
	for i := range s.Warmup + s.Iterations {
		warm := i < s.Warmup
		var before poolCounters
		if d.Pool != nil {
			st := d.Pool.Stats()
			before = poolCounters{st.Validations, st.ReleasePlans}
		}
		t.ResetCounts()
		var (
			it  Iteration
			h   *Histogram
			per []int64
		)
		switch s.Benchmark {
		case BenchSaturated:
			it, h, per, err = saturatedLoop(s.Threads, s.IterationTime, func(ctx context.Context, h *Histogram) error {
				return Saturated(ctx, d, s.Hold, h)
			})
		case BenchContended:
			it, h, err = openLoop(s.Threads, s.IterationTime, s.Rate, func(ctx context.Context, sched time.Time, h *Histogram) error {
				return Contended(ctx, d, sched, h)
			})
		default:
			it, err = closedLoop(s.Threads, s.IterationTime, func(g int) (func(context.Context) error, error) {
				return closedOp(s.Benchmark, d, g)
			})
		}
		if err != nil {
			return nil, fmt.Errorf("%v: %w", s, err)
		}
		c := t.Counts()
		ev := IterEvent{Warmup: warm, Score: it.Score()}
		if warm {
			ev.Index = i + 1
		} else {
			ev.Index = i - s.Warmup + 1
		}
		if raw.Counting && it.AllOps > 0 {
			b := float64(c.ClientBytes+c.ServerBytes) / float64(it.AllOps)
			ev.BytesPerOp = &b
			if !raw.NoPackets {
				rt := float64(c.ClientPackets) / float64(it.AllOps)
				ev.RoundTripsPerOp = &rt
			}
		}
		if h != nil {
			p := float64(h.Quantile(0.999)) / 1e3
			ev.P999us = &p
		}
		if !warm {
			raw.Scores = append(raw.Scores, it.Score())
			raw.AllOps += it.AllOps
			raw.Missed += it.Missed
			addCounts(&raw.Counts, c)
			if d.Pool != nil {
				st := d.Pool.Stats()
				raw.Validations += st.Validations - before.validations
				raw.Plans += st.ReleasePlans - before.plans
			}
			if h != nil {
				hist.Merge(h)
				raw.P999s = append(raw.P999s, float64(h.Quantile(0.999))/1e3)
			}
			if per != nil {
				slow, med, mean := goroutineOps(per)
				raw.SlowestOps = append(raw.SlowestOps, slow)
				raw.MedianOps = append(raw.MedianOps, med)
				raw.MeanOps = append(raw.MeanOps, mean)
			}
		}
		if onIter != nil {
			onIter(ev)
		}
	}
	if hist != nil {
		raw.Hist, raw.HistMax = hist.Sparse(), hist.Max()
	}
	raw.Load1End = Load1()
	return raw, nil
}

type poolCounters struct{ validations, plans uint64 }

func addCounts(dst *mysqltest.Counts, c mysqltest.Counts) {
	dst.ClientBytes += c.ClientBytes
	dst.ServerBytes += c.ServerBytes
	dst.ClientPackets += c.ClientPackets
	dst.ServerPackets += c.ServerPackets
	dst.Conns += c.Conns
}
