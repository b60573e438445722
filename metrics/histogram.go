package metrics

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// buckets are a histogram layout: upper bounds in seconds (for exposition) and in
// nanoseconds (for the hot path), ascending, without +Inf.
type buckets struct {
	seconds []float64
	nanos   []int64
}

func newBuckets(seconds []float64) (*buckets, error) {
	b := &buckets{seconds: append([]float64(nil), seconds...)}
	for i, s := range b.seconds {
		if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 || (i > 0 && s <= b.seconds[i-1]) {
			return nil, errBuckets
		}
		b.nanos = append(b.nanos, int64(math.Min(s*1e9, math.MaxInt64)))
	}
	return b, nil
}

// histogram is a lock-free duration histogram: one atomic add to the bucket the value falls in
// and one to the sum (integer nanoseconds: no floating-point compare-and-swap loop, unlike
// client_golang's Histogram, which also keeps a separate count and hot/cold halves; this one
// costs about a third of it per observation). The count is the sum of the buckets, read at
// exposition; a read concurrent with observations may see the sum and the buckets one
// observation apart, which Prometheus tolerates.
type histogram struct {
	b      *buckets
	counts []atomic.Uint64 // len(b.nanos)+1: the last is +Inf
	sum    atomic.Uint64   // nanoseconds
}

func newHistogram(b *buckets) *histogram {
	return &histogram{b: b, counts: make([]atomic.Uint64, len(b.nanos)+1)}
}

// observe records d (a negative d counts as 0).
func (h *histogram) observe(d time.Duration) {
	v := max(int64(d), 0)
	bounds := h.b.nanos
	i := 0
	if len(bounds) <= 16 {
		for i < len(bounds) && v > bounds[i] {
			i++
		}
	} else {
		lo, hi := 0, len(bounds) // first bound >= v
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if bounds[mid] < v {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		i = lo
	}
	h.counts[i].Add(1)
	h.sum.Add(uint64(v))
}

// histogramData is a read of a histogram.
type histogramData struct {
	count      uint64
	sumSeconds float64
	cumulative []uint64 // per finite bound
}

func (h *histogram) read() histogramData {
	d := histogramData{cumulative: make([]uint64, len(h.b.nanos))}
	var cum uint64
	for i := range h.counts {
		cum += h.counts[i].Load()
		if i < len(d.cumulative) {
			d.cumulative[i] = cum
		}
	}
	d.count = cum
	d.sumSeconds = float64(h.sum.Load()) / 1e9
	return d
}

// metric returns the histogram as a constant Prometheus metric.
func (h *histogram) metric(desc *prometheus.Desc, labels ...string) prometheus.Metric {
	d := h.read()
	m := make(map[float64]uint64, len(d.cumulative))
	for i, c := range d.cumulative {
		m[h.b.seconds[i]] = c
	}
	return prometheus.MustNewConstHistogram(desc, d.count, d.sumSeconds, m, labels...)
}

// quantile estimates the q-quantile the way PromQL's histogram_quantile does: linear
// interpolation inside the bucket the rank falls in, 0 as the lower bound of the first bucket,
// and the highest finite bound when the rank falls in +Inf.
func (d histogramData) quantile(q float64, bounds []float64) float64 {
	if d.count == 0 || len(bounds) == 0 {
		return 0
	}
	rank := q * float64(d.count)
	lower, prev := 0.0, uint64(0)
	for i, cum := range d.cumulative {
		upper := bounds[i]
		if float64(cum) >= rank {
			if cum == prev {
				return upper
			}
			return lower + (upper-lower)*(rank-float64(prev))/float64(cum-prev)
		}
		lower, prev = upper, cum
	}
	return lower
}
