package main

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/spool"
)

// exposition renders cumulative fsync buckets as client_golang does.
func exposition(cum []int64) string {
	var b strings.Builder
	b.WriteString("# TYPE zipkin_spool_fsync_seconds histogram\n")
	for i, bound := range spool.FsyncBounds {
		fmt.Fprintf(&b, "zipkin_spool_fsync_seconds_bucket{transport=\"http\",le=\"%g\"} %d\n", bound.Seconds(), cum[i])
	}
	fmt.Fprintf(&b, "zipkin_spool_fsync_seconds_bucket{transport=\"http\",le=\"+Inf\"} %d\n", cum[len(cum)-1])
	fmt.Fprintf(&b, "zipkin_spool_fsync_seconds_sum{transport=\"http\"} 0.5\nzipkin_spool_fsync_seconds_count{transport=\"http\"} %d\n", cum[len(cum)-1])
	return b.String()
}

// cumulative turns per-bucket counts (index → count) into the cumulative
// readings of the histogram.
func cumulative(per map[int]int64) []int64 {
	out := make([]int64, len(spool.FsyncBounds)+1)
	var n int64
	for i := range out {
		n += per[i]
		out[i] = n
	}
	return out
}

func TestFsyncDeltaAndQuantiles(t *testing.T) {
	before, err := parseFsyncBuckets(exposition(cumulative(map[int]int64{0: 5, 9: 1})))
	if err != nil {
		t.Fatal(err)
	}
	// The step adds 98 fdatasyncs of at most 1 ms (bucket 7), one of at
	// most 20 ms (bucket 16) and one past 10 s.
	after, err := parseFsyncBuckets(exposition(cumulative(map[int]int64{0: 5, 7: 98, 9: 1, 16: 1, len(spool.FsyncBounds): 1})))
	if err != nil {
		t.Fatal(err)
	}
	st := fsyncDelta(before, after)
	if st.N != 100 || st.Counts[7] != 98 || st.Counts[16] != 1 || st.Counts[len(spool.FsyncBounds)] != 1 || st.Counts[0] != 0 {
		t.Fatalf("delta %+v", st)
	}
	if st.P50 != 1 || st.P99 != 20 {
		t.Fatalf("p50 %v p99 %v, want 1 and 20 ms (bucket upper bounds)", st.P50, st.P99)
	}
	if q := fsyncQuantile(st.Counts, 1); !math.IsInf(q, 1) {
		t.Fatalf("max %v, want +Inf (the overflow bucket)", q)
	}
	if _, err := parseFsyncBuckets("zipkin_spool_bytes 3\n"); err == nil {
		t.Fatal("no histogram: want an error")
	}
	if _, err := parseFsyncBuckets(strings.Replace(exposition(after), `le="+Inf"`, `le="99"`, 1)); err == nil {
		t.Fatal("no +Inf bucket: want an error")
	}
}

func TestFsyncFloorP99(t *testing.T) {
	counts := make([]int64, len(spool.FsyncBounds)+1)
	// Every fdatasync in the bucket (2 ms, 3 ms]: its lower bound is 2 ms.
	counts[10] = 7
	samples := make([]float64, 100)
	for i := range samples {
		samples[i] = 1
	}
	samples[99] = 50 // one slow request in a hundred: at the p99 rank the sum is still 1 + 2
	if got := fsyncFloorP99(samples, counts, false); got != 3 {
		t.Fatalf("floor %v, want 3 ms", got)
	}
	if got := fsyncFloorP99(samples, counts, true); got != 4 {
		t.Fatalf("floor at the upper bounds %v, want 1 + 3 ms", got)
	}
	samples[98] = 40 // two slow ones: the p99 is now a slow one's sum
	if got := fsyncFloorP99(samples, counts, false); got != 42 {
		t.Fatalf("floor %v, want 42 ms", got)
	}
	if got := fsyncFloorP99(samples, make([]int64, len(counts)), false); got != 0 {
		t.Fatalf("floor without fdatasyncs %v, want 0", got)
	}
	// Fast fdatasyncs (bucket 0, lower bound 0) leave the p99 as it was.
	counts[10], counts[0] = 0, 3
	if got := fsyncFloorP99(samples, counts, false); got != 40 {
		t.Fatalf("floor %v, want 40 ms", got)
	}
}

func TestSpoolRatios(t *testing.T) {
	counts := make([]int64, len(spool.FsyncBounds)+1)
	counts[10] = 10
	fs := &FsyncStats{N: 10, P50: 3, P99: 3, Counts: counts}
	var rows []Row
	for run := 1; run <= 3; run++ {
		rows = append(rows,
			Row{Config: "pool", Kind: "open", Run: run, RatePct: 100, StoredSpans: 1000,
				Latency202: Latency{P99: 10 + float64(run)}, Samples202: []float64{1, 1, 1}},
			Row{Config: "spool", Kind: "open", Run: run, RatePct: 100, StoredSpans: 850 + 50*float64(run),
				Latency202: Latency{P99: 12 + float64(run)}, Fsync: fs})
	}
	rows = append(rows, Row{Config: "spool", Kind: "wrk", Run: 1})
	rs := spoolRatios(rows)
	if len(rs) != 1 {
		t.Fatalf("%d ratios, want one rate", len(rs))
	}
	r := rs[0]
	if r.Runs != 3 || r.Stored != 0.95 || r.StoredMin != 0.9 || r.StoredMax != 1 || !r.StoredAtLeast90 {
		t.Fatalf("stored: %+v", r)
	}
	// The spool's best run (13 ms) is not above the pool's worst (13 ms).
	if !r.P99NotWorse || len(r.Floor) != 3 || r.Floor[0] != 3 || !r.FloorNotWorse {
		t.Fatalf("p99 verdicts: %+v", r)
	}
	for i := range rows {
		if rows[i].Config == "spool" {
			rows[i].Latency202.P99 += 5
		}
	}
	if r := spoolRatios(rows)[0]; r.P99NotWorse {
		t.Fatalf("every spool run's p99 above every pool run's: %+v, want worse", r)
	}
	md := spoolTable(spoolRatios(rows))
	if !strings.Contains(md, "| 100 % | 3 | 0.95 [0.90–1.00] | 11.0, 12.0, 13.0 | 18.0, 19.0, 20.0 | 3.0 / 3.0, 3.0 / 3.0, 3.0 / 3.0 | 3.0–4.0, 3.0–4.0, 3.0–4.0 | yes | **no** | yes |") {
		t.Fatalf("table:\n%s", md)
	}
	if spoolRatios(rows[:1]) != nil || spoolTable(nil) != "" {
		t.Fatal("without spool rows: want no comparison")
	}
}
