package bench

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

func f3(p *float64) string {
	if p == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", *p)
}

func f1(p *float64) string {
	if p == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", *p)
}

func f2(p *float64) string {
	if p == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", *p)
}

// printResult prints JMH's per-result block.
func printResult(w io.Writer, r *Result) {
	s := r.Summary()
	fmt.Fprintf(w, "\nResult \"%s pool=%s threads=%d\":\n", r.Benchmark, r.Pool, r.Threads)
	if math.IsNaN(s.Error) {
		fmt.Fprintf(w, "  %.3f ops/ms\n", s.Score)
	} else {
		fmt.Fprintf(w, "  %.3f ±(99.9%%) %.3f ops/ms [Average]\n", s.Score, s.Error)
		fmt.Fprintf(w, "  (min, avg, max) = (%.3f, %.3f, %.3f), stdev = %.3f\n", s.Min, s.Score, s.Max, s.Stdev)
		fmt.Fprintf(w, "  CI (99.9%%): [%.3f, %.3f] (assumes normal distribution)\n", s.Score-s.Error, s.Score+s.Error)
	}
	if r.BytesPerOp != nil {
		fmt.Fprintf(w, "  traffic: %s B/op (client %s, server %s), %s client packets (round trips)/op, %d new connections\n",
			f1(r.BytesPerOp), f1(r.ClientBytesPerOp), f1(r.ServerBytesPerOp), f3(r.RoundTripsPerOp), *r.NewConns)
	}
	if r.ValidationsPerOp != nil {
		fmt.Fprintf(w, "  pool: %s validations/op, %s release plans/op\n", f3(r.ValidationsPerOp), f3(r.ReleasePlansPerOp))
	}
	if r.P999us != nil && r.Benchmark == BenchSaturated {
		fmt.Fprintf(w, "  acquire latency (µs): p50 %s, p99 %s, p99.9 %s, max %s over %d borrows; hold %s µs\n",
			f1(r.P50us), f1(r.P99us), f1(r.P999us), f1(r.MaxUs), *r.Requests, f1(r.HoldUs))
		fmt.Fprintf(w, "  p99.9 per iteration (µs): %s ±(99.9%%) %s\n", f1(r.P999IterUs), f1(r.P999IterErrorUs))
		fmt.Fprintf(w, "  operations per goroutine and iteration: slowest %s, median %s, mean %s; slowest/mean %s\n",
			f1(r.SlowestOps), f1(r.MedianOps), f1(r.MeanOps), f2(r.SlowestShare))
	} else if r.P999us != nil {
		fmt.Fprintf(w, "  acquire latency from schedule (µs): p50 %s, p99 %s, p99.9 %s, max %s over %d requests (%d missed); offered %s ops/ms\n",
			f1(r.P50us), f1(r.P99us), f1(r.P999us), f1(r.MaxUs), *r.Requests, *r.Missed, f3(r.RatePerMs))
		fmt.Fprintf(w, "  p99.9 per iteration (µs): %s ±(99.9%%) %s\n", f1(r.P999IterUs), f1(r.P999IterErrorUs))
	}
}

// PrintTable prints the JMH-style summary table.
func PrintTable(w io.Writer, rs []*Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "Benchmark\tPool\tThreads\tCnt\tScore\t\tError\tMin\tMax\tUnits\tB/op\tRT/op\tp50 µs\tp99 µs\tp99.9 µs\tmax µs\tslowest/mean\t")
	for _, r := range rs {
		s := r.Summary()
		errs := "n/a"
		if !math.IsNaN(s.Error) {
			errs = fmt.Sprintf("%.3f", s.Error)
		}
		lat := "\t\t\t\t\t"
		if r.P999us != nil {
			share := ""
			if r.SlowestShare != nil {
				share = f2(r.SlowestShare)
			}
			lat = fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t", f1(r.P50us), f1(r.P99us), f1(r.P999us), f1(r.MaxUs), share)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.3f\t±\t%s\t%.3f\t%.3f\tops/ms\t%s\t%s\t%s\n", r.Benchmark, r.Pool, r.Threads,
			s.N, s.Score, errs, s.Min, s.Max, f1(r.BytesPerOp), f2(r.RoundTripsPerOp), lat)
	}
	_ = tw.Flush()
}

// PrintRatios prints, for every benchmark and concurrency, each pool's score over
// database-sql's with the interval from both confidence intervals (see Ratio).
func PrintRatios(w io.Writer, rs []*Result) {
	type key struct {
		b string
		t int
	}
	base := map[key]*Result{}
	for _, r := range rs {
		if r.Pool == PoolDatabaseSQL {
			base[key{r.Benchmark, r.Threads}] = r
		}
	}
	if len(base) == 0 {
		return
	}
	fmt.Fprintln(w, "Ratios to database-sql (score / database-sql's score; interval from both 99.9% CIs):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Benchmark\tThreads\tPool\tRatio\tInterval\tVerdict\t")
	for _, r := range rs {
		b := base[key{r.Benchmark, r.Threads}]
		if b == nil || r.Pool == PoolDatabaseSQL {
			continue
		}
		q := RatioOf(r.Summary(), b.Summary())
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.3f\t%s\t%s\t\n", r.Benchmark, r.Threads, r.Pool, q.Value, q.interval(), q.Verdict())
		if r.P999IterUs != nil && b.P999IterUs != nil {
			q := RatioOf(p999Summary(r), p999Summary(b))
			v := q.Verdict()
			switch v { // for latency, above 1 is worse
			case "faster":
				v = "higher (worse)"
			case "slower":
				v = "lower (better)"
			}
			fmt.Fprintf(tw, "%s p99.9\t%d\t%s\t%.3f\t%s\t%s\t\n", r.Benchmark, r.Threads, r.Pool, q.Value, q.interval(), v)
		}
	}
	_ = tw.Flush()
}

func (q Ratio) interval() string {
	if math.IsNaN(q.Lo) {
		return "n/a"
	}
	return fmt.Sprintf("[%.3f, %.3f]", q.Lo, q.Hi)
}

// Verdict says whether the ratio's interval lies above 1 ("faster"), below 1 ("slower") or
// contains it ("same within error").
func (q Ratio) Verdict() string {
	switch {
	case math.IsNaN(q.Lo):
		return "no error bars"
	case q.Lo > 1:
		return "faster"
	case q.Hi < 1:
		return "slower"
	default:
		return "same within error"
	}
}

// p999Summary is the per-iteration p99.9 of a contended result as a Summary.
func p999Summary(r *Result) Summary {
	s := Summary{Score: *r.P999IterUs, Error: math.NaN()}
	if r.P999IterErrorUs != nil {
		s.Error = *r.P999IterErrorUs
	}
	return s
}
