package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// The go test -bench form of jmh's benchmarks, named for benchstat:
//
//	BenchmarkCycleConnection/pool=sqlpool/threads=4
//
// They run on the stub driver unless SQLPOOL_BENCH_DSN says otherwise: "embedded" starts the
// embedded server, anything else is a go-sql-driver/mysql DSN. On a server, traffic goes
// through a counting proxy and each benchmark reports wire-B/op and roundtrips/op (client
// packets per op). BenchmarkContended is open loop: its ns/op is the offered schedule
// (1/rate), and its figures are the acquire-latency metrics p50-µs, p99-µs, p99.9-µs, max-µs;
// SQLPOOL_BENCH_RATE sets the offered load in requests/ms (default: 0.5 × database-sql's
// closed-loop cycleStatement throughput at the same goroutine count, measured once per run).
const (
	envDSN  = "SQLPOOL_BENCH_DSN"
	envRate = "SQLPOOL_BENCH_RATE"
)

var (
	benchThreads          = []int{1, 4, 8, 64}
	benchContendedThreads = []int{64, 256}
	benchSaturatedThreads = []int{256}
	benchHold             = time.Millisecond
	benchSize             = 8
)

// TestMain runs jmh's fork children (the tests fork this binary) and checks for leaked
// goroutines after the shared server and proxy are stopped.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "-"+ChildFlag+"=") {
		os.Exit(Run(os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(cleanupM{m})
}

type cleanupM struct{ m *testing.M }

func (c cleanupM) Run() int {
	code := c.m.Run()
	shared.close()
	return code
}

// shared is the benchmark target of this test process, opened on first use.
var shared sharedTarget

type sharedTarget struct {
	mu    sync.Mutex
	t     *Target
	stop  func() error
	err   error
	rates map[int]float64
}

func (s *sharedTarget) get(tb testing.TB) *Target {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.t == nil && s.err == nil {
		switch dsn := os.Getenv(envDSN); dsn {
		case "", "stub":
			s.t = OpenStub()
		default:
			if dsn == "embedded" {
				dsn, s.stop, s.err = mysqltest.StartEmbedded()
				if s.err != nil {
					break
				}
			}
			if s.t, s.err = OpenServer(dsn, true); s.err == nil {
				if s.err = s.t.Ping(PingTimeout); s.err != nil {
					_ = s.t.Close()
					s.t = nil
				}
			}
		}
	}
	if s.err != nil {
		tb.Fatalf("benchmark target (%s=%q): %v", envDSN, os.Getenv(envDSN), s.err)
	}
	return s.t
}

func (s *sharedTarget) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.t != nil {
		_ = s.t.Close()
	}
	if s.stop != nil {
		_ = s.stop()
	}
	s.t, s.stop = nil, nil
}

// rate returns the contended benchmark's offered load at g goroutines.
func (s *sharedTarget) rate(b *testing.B, g int) float64 {
	if v := os.Getenv(envRate); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r <= 0 {
			b.Fatalf("%s=%q: want a positive number of requests per ms", envRate, v)
		}
		return r
	}
	t := s.get(b)
	s.mu.Lock()
	r, ok := s.rates[g]
	s.mu.Unlock()
	if ok {
		return r
	}
	raw, err := RunSpec(Spec{Benchmark: BenchCycleStatement, Pool: PoolDatabaseSQL, Threads: g, Size: benchSize,
		Warmup: 1, Iterations: 1, IterationTime: 500 * time.Millisecond}, t, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	r = 0.5 * raw.Scores[0]
	s.mu.Lock()
	if s.rates == nil {
		s.rates = map[int]float64{}
	}
	s.rates[g] = r
	s.mu.Unlock()
	return r
}

func BenchmarkCycleConnection(b *testing.B)     { benchClosed(b, BenchCycleConnection) }
func BenchmarkCycleStatement(b *testing.B)      { benchClosed(b, BenchCycleStatement) }
func BenchmarkCycleParamStatement(b *testing.B) { benchClosed(b, BenchCycleParamStatement) }
func BenchmarkCycleInsert(b *testing.B)         { benchClosed(b, BenchCycleInsert) }
func BenchmarkCycleInsertAutocommit(b *testing.B) {
	benchClosed(b, BenchCycleInsertAutocommit)
}

func benchClosed(b *testing.B, name string) {
	t := shared.get(b)
	for _, threads := range benchThreads {
		for _, kind := range AllPools {
			b.Run(fmt.Sprintf("pool=%s/threads=%d", kind, threads), func(b *testing.B) {
				if isInsert(name) {
					if err := t.PrepareInsertTable(); err != nil {
						b.Fatal(err)
					}
				}
				d := openBenchPool(b, t, kind)
				ops := make([]func(context.Context) error, threads)
				for i := range ops {
					var err error
					if ops[i], err = closedOp(name, d, i); err != nil {
						b.Fatal(err)
					}
				}
				ctx := context.Background()
				b.ReportAllocs()
				t.ResetCounts()
				b.ResetTimer()
				var wg sync.WaitGroup
				for i := range threads {
					n := b.N / threads
					if i < b.N%threads {
						n++
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range n {
							if err := ops[i](ctx); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				reportTraffic(b, t)
			})
		}
	}
}

func BenchmarkContended(b *testing.B) {
	t := shared.get(b)
	for _, g := range benchContendedThreads {
		for _, kind := range AllPools {
			b.Run(fmt.Sprintf("pool=%s/threads=%d", kind, g), func(b *testing.B) {
				rate := shared.rate(b, g)
				d := openBenchPool(b, t, kind)
				t.ResetCounts()
				b.ResetTimer()
				window := time.Duration(float64(b.N) / rate * float64(time.Millisecond))
				_, h, err := openLoop(g, window, rate, func(ctx context.Context, sched time.Time, h *Histogram) error {
					return Contended(ctx, d, sched, h)
				})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(h.Quantile(0.5))/1e3, "p50-µs")
				b.ReportMetric(float64(h.Quantile(0.99))/1e3, "p99-µs")
				b.ReportMetric(float64(h.Quantile(0.999))/1e3, "p99.9-µs")
				b.ReportMetric(float64(h.Max())/1e3, "max-µs")
				b.ReportMetric(rate, "offered-ops/ms")
				reportTraffic(b, t)
			})
		}
	}
}

// BenchmarkSaturated is jmh's saturated benchmark: 256 goroutines on a pool of 8, each holding
// its connection for 1 ms (time.Sleep), closed loop. The window is b.N × hold / size, so ns/op
// is about hold/size when waiting costs nothing; its figures are the acquire-latency metrics
// and slowest/mean, the slowest goroutine's completed operations over the mean.
func BenchmarkSaturated(b *testing.B) {
	t := shared.get(b)
	for _, g := range benchSaturatedThreads {
		for _, kind := range AllPools {
			b.Run(fmt.Sprintf("pool=%s/threads=%d", kind, g), func(b *testing.B) {
				d := openBenchPool(b, t, kind)
				window := max(time.Duration(b.N)*benchHold/time.Duration(benchSize), 10*time.Millisecond)
				t.ResetCounts()
				b.ResetTimer()
				it, h, per, err := saturatedLoop(g, window, func(ctx context.Context, h *Histogram) error {
					return Saturated(ctx, d, benchHold, h)
				})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				slow, _, mean := goroutineOps(per)
				b.ReportMetric(float64(h.Quantile(0.5))/1e3, "p50-µs")
				b.ReportMetric(float64(h.Quantile(0.99))/1e3, "p99-µs")
				b.ReportMetric(float64(h.Quantile(0.999))/1e3, "p99.9-µs")
				b.ReportMetric(float64(h.Max())/1e3, "max-µs")
				if mean > 0 {
					b.ReportMetric(slow/mean, "slowest/mean")
				}
				b.ReportMetric(it.Score(), "ops/ms")
				reportTraffic(b, t)
			})
		}
	}
}

func openBenchPool(b *testing.B, t *Target, kind string) *DB {
	b.Helper()
	d, err := OpenPool(kind, t.Connector(), benchSize, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = d.Close() })
	return d
}

func reportTraffic(b *testing.B, t *Target) {
	if !t.Counting() || b.N == 0 {
		return
	}
	c := t.Counts()
	b.ReportMetric(float64(c.ClientBytes+c.ServerBytes)/float64(b.N), "wire-B/op")
	b.ReportMetric(float64(c.ClientPackets)/float64(b.N), "roundtrips/op")
}
