package bench

import (
	"math"
	"math/bits"
	"sort"
)

// Summary is JMH's summary of one result: the mean of the iteration scores, the half-width of
// its 99.9 % confidence interval (Student's t, as JMH computes "Error"), min and max.
type Summary struct {
	N     int     // iterations (over all forks)
	Score float64 // mean
	Error float64 // half-width of the 99.9 % CI; NaN when N < 2
	Min   float64
	Max   float64
	Stdev float64 // sample standard deviation; NaN when N < 2
}

// Confidence is the confidence level of Summary.Error, JMH's default.
const Confidence = 0.999

// Summarize computes the Summary of xs as JMH does: Error = t(1-(1-Confidence)/2, n-1) · s/√n.
func Summarize(xs []float64) Summary {
	s := Summary{N: len(xs), Error: math.NaN(), Stdev: math.NaN(), Min: math.NaN(), Max: math.NaN(), Score: math.NaN()}
	if len(xs) == 0 {
		return s
	}
	s.Min, s.Max = math.Inf(1), math.Inf(-1)
	var sum float64
	for _, x := range xs {
		sum += x
		s.Min = math.Min(s.Min, x)
		s.Max = math.Max(s.Max, x)
	}
	s.Score = sum / float64(len(xs))
	if len(xs) < 2 {
		return s
	}
	var ss float64
	for _, x := range xs {
		d := x - s.Score
		ss += d * d
	}
	s.Stdev = math.Sqrt(ss / float64(len(xs)-1))
	s.Error = StudentT(1-(1-Confidence)/2, float64(len(xs)-1)) * s.Stdev / math.Sqrt(float64(len(xs)))
	return s
}

// Ratio is a/b with an interval built from the two confidence intervals: [lo, hi] =
// [(a-ea)/(b+eb), (a+ea)/(b-eb)] (hi is +Inf when b-eb ≤ 0). It is conservative: when the
// interval contains 1 the two scores are not distinguishable at the 99.9 % level.
type Ratio struct{ Value, Lo, Hi float64 }

// RatioOf returns a/b with its interval.
func RatioOf(a, b Summary) Ratio {
	r := Ratio{Value: a.Score / b.Score, Lo: math.NaN(), Hi: math.NaN()}
	if math.IsNaN(a.Error) || math.IsNaN(b.Error) {
		return r
	}
	r.Lo = math.Max(a.Score-a.Error, 0) / (b.Score + b.Error)
	if d := b.Score - b.Error; d > 0 {
		r.Hi = (a.Score + a.Error) / d
	} else {
		r.Hi = math.Inf(1)
	}
	return r
}

// StudentT returns the p-quantile of Student's t distribution with df degrees of freedom
// (p in (0,1), df > 0), by bisection on the CDF.
func StudentT(p, df float64) float64 {
	if p <= 0 || p >= 1 || df <= 0 || math.IsNaN(p) || math.IsNaN(df) {
		return math.NaN()
	}
	if p == 0.5 {
		return 0
	}
	if p < 0.5 {
		return -StudentT(1-p, df)
	}
	lo, hi := 0.0, 1.0
	for studentCDF(hi, df) < p {
		hi *= 2
		if hi > 1e12 {
			return math.Inf(1)
		}
	}
	for i := 0; i < 200 && hi-lo > 1e-12*hi; i++ {
		mid := (lo + hi) / 2
		if studentCDF(mid, df) < p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// studentCDF is P(T ≤ t) for t ≥ 0: 1 - I_x(df/2, 1/2)/2 with x = df/(df+t²).
func studentCDF(t, df float64) float64 {
	x := df / (df + t*t)
	return 1 - 0.5*regIncBeta(df/2, 0.5, x)
}

// regIncBeta is the regularized incomplete beta function I_x(a, b) (Numerical Recipes'
// continued fraction, modified Lentz).
func regIncBeta(a, b, x float64) float64 {
	if x <= 0 {
		return 0
	}
	if x >= 1 {
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log(1-x))
	if x < (a+1)/(a+b+2) {
		return front * betaCF(a, b, x) / a
	}
	return 1 - front*betaCF(b, a, 1-x)/b
}

func betaCF(a, b, x float64) float64 {
	const eps, tiny = 1e-15, 1e-300
	qab, qap, qam := a+b, a+1, a-1
	c, d := 1.0, 1-qab*x/qap
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= 10000; m++ {
		fm := float64(m)
		m2 := 2 * fm
		aa := fm * (b - fm) * x / ((qam + m2) * (a + m2))
		d = 1 + aa*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		h *= d * c
		aa = -(a + fm) * (qab + fm) * x / ((a + m2) * (qap + m2))
		d = 1 + aa*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < eps {
			break
		}
	}
	return h
}

// Histogram is a log-linear latency histogram in nanoseconds: exact below 64 ns, then 64
// buckets per power of two (relative error < 1.6 %). It is not safe for concurrent use: give
// each goroutine its own and Merge them. Values above 2^40 ns (~18 min) are clamped.
type Histogram struct {
	counts []uint64
	n      uint64
	max    int64
}

const (
	histSub     = 64
	histSubBits = 6
	histMaxExp  = 40
)

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{counts: make([]uint64, (histMaxExp-histSubBits)*histSub+histSub)}
}

func histIndex(v int64) int {
	if v < 0 {
		v = 0
	}
	if v >= 1<<histMaxExp {
		v = 1<<histMaxExp - 1
	}
	if v < histSub {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - histSubBits - 1 // ≥ 0
	return (shift+1)*histSub + int(uint64(v)>>shift) - histSub
}

// histUpper is the largest value that falls in bucket i.
func histUpper(i int) int64 {
	if i < histSub {
		return int64(i)
	}
	shift := i/histSub - 1
	sub := int64(i%histSub + histSub)
	return (sub+1)<<shift - 1
}

// Record adds one value (ns).
func (h *Histogram) Record(v int64) {
	h.counts[histIndex(v)]++
	h.n++
	if v > h.max {
		h.max = v
	}
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest recorded value, exactly.
func (h *Histogram) Max() int64 { return h.max }

// Merge adds o's values to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// Quantile returns the q-quantile (0 < q ≤ 1): the upper bound of the bucket holding the
// ⌈q·n⌉-th smallest value (never above Max), or 0 when empty.
func (h *Histogram) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(histUpper(i), h.max)
		}
	}
	return h.max
}

// Sparse returns the non-empty buckets as index→count, for sending a histogram from a forked
// child to its parent.
func (h *Histogram) Sparse() map[int]uint64 {
	m := map[int]uint64{}
	for i, c := range h.counts {
		if c != 0 {
			m[i] = c
		}
	}
	return m
}

// HistogramFromSparse rebuilds a histogram from Sparse and Max.
func HistogramFromSparse(m map[int]uint64, maxv int64) *Histogram {
	h := NewHistogram()
	idx := make([]int, 0, len(m))
	for i := range m {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		if i >= 0 && i < len(h.counts) {
			h.counts[i] += m[i]
			h.n += m[i]
		}
	}
	h.max = maxv
	return h
}
