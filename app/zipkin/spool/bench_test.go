package spool

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
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

// BenchmarkFlushFloor measures what one group commit waits for at least on
// this disk, in a temporary directory (set TMPDIR to time another disk):
// each op writes 4 KiB into a segment zero-filled and made durable
// beforehand, at the next offset, and makes it durable. fdatasync writes
// it and then calls fdatasync(2) (the spool's group commit); odsync
// writes it with one pwrite(2) on a description opened O_DSYNC; append
// writes past the end of a growing file and calls fdatasync(2), which
// also waits for the journal commit of the new size. p50-µs, p99-µs and
// max-µs are the distribution of one op.
func BenchmarkFlushFloor(b *testing.B) {
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(i)
	}
	for _, mode := range []string{"fdatasync", "odsync", "append"} {
		b.Run(mode, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "floor.log")
			size := int64(b.N+1) * int64(len(buf))
			f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o640)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if mode != "append" {
				zeros := make([]byte, 1<<20)
				for off := int64(0); off < size; off += int64(len(zeros)) {
					if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off); err != nil {
						b.Fatal(err)
					}
				}
				if err := fdatasync(f); err != nil {
					b.Fatal(err)
				}
			}
			w := f
			if mode == "odsync" {
				if w, err = os.OpenFile(path, os.O_WRONLY|syscall.O_DSYNC, 0); err != nil {
					b.Fatal(err)
				}
				defer w.Close()
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if _, err := w.WriteAt(buf, int64(i)*int64(len(buf))); err != nil {
					b.Fatal(err)
				}
				if mode != "odsync" {
					if err := fdatasync(f); err != nil {
						b.Fatal(err)
					}
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
		})
	}
}
