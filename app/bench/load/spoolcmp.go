package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sqlpool/sqlpool/app/zipkin/spool"
)

// FsyncStats are the spool's group-commit fdatasyncs of one step, from the
// server's zipkin_spool_fsync_seconds histogram: Counts[i] took at most
// spool.FsyncBounds[i] (the last element: longer), P50 and P99 are bucket
// upper bounds in milliseconds.
type FsyncStats struct {
	N      int64   `json:"n"`
	P50    float64 `json:"p50_ms_at_most"`
	P99    float64 `json:"p99_ms_at_most"`
	Counts []int64 `json:"counts"`
}

const fsyncMetric = "zipkin_spool_fsync_seconds"

// parseFsyncBuckets returns the cumulative counts of the fsync histogram's
// buckets in a Prometheus text exposition, in the order of
// spool.FsyncBounds, then +Inf.
func parseFsyncBuckets(text string) ([]int64, error) {
	byLE := map[string]int64{}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, fsyncMetric+"_bucket{") {
			continue
		}
		i := strings.Index(line, `le="`)
		if i < 0 {
			continue
		}
		j := strings.IndexByte(line[i+4:], '"')
		f := strings.Fields(line)
		if j < 0 || len(f) < 2 {
			return nil, fmt.Errorf("malformed histogram line %q", line)
		}
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return nil, fmt.Errorf("histogram line %q: %w", line, err)
		}
		byLE[line[i+4:i+4+j]] = int64(v)
	}
	if len(byLE) == 0 {
		return nil, fmt.Errorf("metric %s not found", fsyncMetric)
	}
	out := make([]int64, 0, len(spool.FsyncBounds)+1)
	for _, b := range spool.FsyncBounds {
		v, ok := byLE[strconv.FormatFloat(b.Seconds(), 'g', -1, 64)]
		if !ok {
			return nil, fmt.Errorf("%s has no bucket le=%v", fsyncMetric, b.Seconds())
		}
		out = append(out, v)
	}
	inf, ok := byLE["+Inf"]
	if !ok {
		return nil, fmt.Errorf("%s has no +Inf bucket", fsyncMetric)
	}
	return append(out, inf), nil
}

// fsyncDelta turns two cumulative readings into the step's FsyncStats.
func fsyncDelta(before, after []int64) *FsyncStats {
	if len(before) != len(after) || len(after) == 0 {
		return nil
	}
	st := &FsyncStats{Counts: make([]int64, len(after))}
	var prev int64
	for i := range after {
		cum := after[i] - before[i]
		st.Counts[i] = cum - prev
		prev = cum
	}
	st.N = prev
	st.P50, st.P99 = fsyncQuantile(st.Counts, 0.50), fsyncQuantile(st.Counts, 0.99)
	return st
}

// fsyncQuantile is the upper bound, in ms, of the bucket holding quantile q
// (+Inf for the overflow bucket, 0 when there are none).
func fsyncQuantile(counts []int64, q float64) float64 {
	var n int64
	for _, c := range counts {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	var cum int64
	for i, c := range counts {
		cum += c
		if cum >= max(rank, 1) {
			if i == len(spool.FsyncBounds) {
				return math.Inf(1)
			}
			return float64(spool.FsyncBounds[i].Microseconds()) / 1e3
		}
	}
	return math.Inf(1)
}

// fsyncFloorP99 is the p99 of a 202 from a server that answers as fast as
// the one without the spool and then waits for one fdatasync drawn from
// the spool's own: the p99 of the sums of every no-spool 202 latency (ms)
// with every fdatasync of counts, the two independent, each fdatasync
// taken at its bucket's lower bound (upper false: a lower bound) or its
// upper bound (upper true; the overflow bucket at twice the last bound).
// Slow fdatasyncs that come with slow requests, as on a busy disk and
// core, only raise the true p99.
func fsyncFloorP99(samples []float64, counts []int64, upper bool) float64 {
	type wv struct {
		v float64
		w int64
	}
	var all []wv
	var total int64
	for i, c := range counts {
		if c == 0 {
			continue
		}
		lo := 0.0
		switch {
		case upper && i < len(spool.FsyncBounds):
			lo = float64(spool.FsyncBounds[i].Microseconds()) / 1e3
		case upper:
			lo = 2 * float64(spool.FsyncBounds[i-1].Microseconds()) / 1e3
		case i > 0:
			lo = float64(spool.FsyncBounds[i-1].Microseconds()) / 1e3
		}
		for _, s := range samples {
			all = append(all, wv{s + lo, c})
			total += c
		}
	}
	if total == 0 {
		return 0
	}
	slices.SortFunc(all, func(a, b wv) int { return cmp.Compare(a.v, b.v) })
	rank := int64(math.Ceil(0.99 * float64(total)))
	var cum int64
	for _, x := range all {
		cum += x.w
		if cum >= rank {
			return x.v
		}
	}
	return all[len(all)-1].v
}

// SpoolRatio compares the pool with the spool on (config spool) and
// without (config pool) at one open-loop rate over the interleaved runs.
type SpoolRatio struct {
	RatePct float64 `json:"rate_pct"`
	Runs    int     `json:"runs"`
	// Stored spans/s, spool over pool: median ratio and the extremes.
	Stored    float64 `json:"stored_spool_over_pool"`
	StoredMin float64 `json:"stored_spool_over_pool_min"`
	StoredMax float64 `json:"stored_spool_over_pool_max"`
	// p99 of the 202s of each run, in ms.
	P99Pool  []float64 `json:"p99_202_pool_ms"`
	P99Spool []float64 `json:"p99_202_spool_ms"`
	// The spool's fdatasyncs of each run: p50 and p99 (bucket upper bounds, ms).
	FsyncP50 []float64 `json:"fsync_p50_ms"`
	FsyncP99 []float64 `json:"fsync_p99_ms"`
	// Floor is fsyncFloorP99 of each run: the pool's 202s of that run,
	// each followed by one of the spool's fdatasyncs of that run, at the
	// lower bounds of their buckets; FloorHi at the upper bounds.
	Floor   []float64 `json:"floor_p99_ms"`
	FloorHi []float64 `json:"floor_p99_hi_ms"`
	// Verdicts, as for the pool against database-sql (see ratios): the
	// spool's median stored spans/s is at least 0.9 × the pool's; its
	// p99 is not worse beyond the error bars when its best run is not above
	// the pool's worst; likewise the floor.
	StoredAtLeast90 bool `json:"stored_at_least_0_9"`
	P99NotWorse     bool `json:"p99_not_worse_beyond_error_bars"`
	FloorNotWorse   bool `json:"floor_not_worse_beyond_error_bars"`
}

// spoolRatios compares spool with pool per open-loop rate; nil without
// both.
func spoolRatios(rows []Row) []SpoolRatio {
	var rates []float64
	for _, r := range rows {
		if r.Kind == "open" && r.Config == "spool" && !slices.Contains(rates, r.RatePct) {
			rates = append(rates, r.RatePct)
		}
	}
	slices.Sort(rates)
	var out []SpoolRatio
	for _, pct := range rates {
		sr := SpoolRatio{RatePct: pct}
		var ps, ss []float64
		for _, sp := range rows {
			if sp.Config != "spool" || sp.Kind != "open" || sp.RatePct != pct {
				continue
			}
			i := slices.IndexFunc(rows, func(p Row) bool {
				return p.Config == "pool" && p.Kind == "open" && p.RatePct == pct && p.Run == sp.Run
			})
			if i < 0 {
				continue
			}
			p := rows[i]
			sr.Runs++
			ps, ss = append(ps, p.StoredSpans), append(ss, sp.StoredSpans)
			sr.P99Pool = append(sr.P99Pool, p.Latency202.P99)
			sr.P99Spool = append(sr.P99Spool, sp.Latency202.P99)
			if f := sp.Fsync; f != nil {
				sr.FsyncP50 = append(sr.FsyncP50, f.P50)
				sr.FsyncP99 = append(sr.FsyncP99, f.P99)
				if len(p.Samples202) > 0 {
					sr.Floor = append(sr.Floor, math.Round(fsyncFloorP99(p.Samples202, f.Counts, false)*10)/10)
					sr.FloorHi = append(sr.FloorHi, math.Round(fsyncFloorP99(p.Samples202, f.Counts, true)*10)/10)
				}
			}
		}
		if sr.Runs == 0 {
			continue
		}
		sr.Stored = div(median(ss), median(ps))
		sr.StoredMin, sr.StoredMax = div(slices.Min(ss), slices.Max(ps)), div(slices.Max(ss), slices.Min(ps))
		sr.StoredAtLeast90 = sr.Stored >= 0.9
		sr.P99NotWorse = slices.Min(sr.P99Spool) <= slices.Max(sr.P99Pool)
		if len(sr.Floor) > 0 {
			sr.FloorNotWorse = slices.Min(sr.Floor) <= slices.Max(sr.P99Pool)
		}
		out = append(out, sr)
	}
	return out
}

// spoolTable renders spoolRatios.
func spoolTable(rs []SpoolRatio) string {
	if len(rs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("### Spool on ÷ off (open loop; the spool's and the pool's steps of each run side by side)\n\n")
	b.WriteString("| rate | runs | stored spans/s spool ÷ pool | p99 of 202s pool, ms | p99 of 202s spool, ms | spool fdatasync p50 / p99, ms (at most) | floor p99, ms | stored ≥ 0.9× | p99 not worse | floor not worse |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	list := func(v []float64) string {
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = f1(x)
		}
		return strings.Join(s, ", ")
	}
	for _, r := range rs {
		fs := make([]string, len(r.FsyncP50))
		for i := range r.FsyncP50 {
			fs[i] = f1(r.FsyncP50[i]) + " / " + f1(r.FsyncP99[i])
		}
		floor, floorOK := "—", "—"
		if len(r.Floor) > 0 {
			fl := make([]string, len(r.Floor))
			for i := range r.Floor {
				fl[i] = f1(r.Floor[i]) + "–" + f1(r.FloorHi[i])
			}
			floor, floorOK = strings.Join(fl, ", "), yes(r.FloorNotWorse)
		}
		fmt.Fprintf(&b, "| %s %% | %d | %s [%s–%s] | %s | %s | %s | %s | %s | %s | %s |\n", f0(r.RatePct), r.Runs,
			f2(r.Stored), f2(r.StoredMin), f2(r.StoredMax), list(r.P99Pool), list(r.P99Spool), strings.Join(fs, ", "),
			floor, yes(r.StoredAtLeast90), yes(r.P99NotWorse), floorOK)
	}
	b.WriteString("\nFloor: the p99 of each run's pool 202s each followed by one of that run's spool fdatasyncs (the two independent; each fdatasync at its bucket's lower–upper bound): what a spool that added nothing but the wait for its disk's flush would answer. Its verdict uses the lower figure.\n\n")
	return b.String()
}
