package spool

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"
)

// BenchmarkAppendConcurrent measures Append at 1, 8, 32 and 64 concurrent
// appenders of 2 KiB records with fdatasync on, in a temporary directory
// (set TMPDIR to time another disk). ns/op is the spool's throughput;
// p50-µs and p99-µs are the latency of one Append, which is what a POST
// waits for before its 202; recs/fsync is the group commit's batching.
func BenchmarkAppendConcurrent(b *testing.B) {
	payload := make([]byte, 2048)
	for _, g := range []int{1, 8, 32, 64} {
		b.Run(fmt.Sprintf("appenders=%d", g), func(b *testing.B) {
			s, err := Open(Options{Dir: b.TempDir(), Logger: quiet}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			lat := make([][]time.Duration, g)
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := 0; w < g; w++ {
				n := b.N / g
				if w < b.N%g {
					n++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					l := make([]time.Duration, 0, n)
					for i := 0; i < n; i++ {
						t0 := time.Now()
						seq, err := s.Append(payload)
						if err != nil {
							b.Error(err)
							return
						}
						l = append(l, time.Since(t0))
						s.Done(seq)
					}
					lat[w] = l
				}()
			}
			wg.Wait()
			b.StopTimer()
			var all []time.Duration
			for _, l := range lat {
				all = append(all, l...)
			}
			sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
			}
			st := s.Stats()
			if st.Fsyncs > 0 {
				b.ReportMetric(float64(st.Appends)/float64(st.Fsyncs), "recs/fsync")
			}
		})
	}
}
