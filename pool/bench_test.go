package pool

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/fakedb"
)

// benchGoroutines are the concurrency levels of the pool benchmarks (HikariCP-benchmark runs
// 1–8 threads; 64 shows contention).
var benchGoroutines = []int{1, 4, 8, 64}

// runConcurrent runs op b.N times in total, split over g goroutines.
func runConcurrent(b *testing.B, g int, op func()) {
	b.Helper()
	var wg sync.WaitGroup
	per := b.N / g
	extra := b.N % g
	b.ResetTimer()
	for i := 0; i < g; i++ {
		n := per
		if i < extra {
			n++
		}
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			for j := 0; j < n; j++ {
				op()
			}
		}(n)
	}
	wg.Wait()
}

// benchCycles runs acquire+release b.N times over g goroutines on a full pool of size
// connections, each borrower holding its connection for about hold ns of CPU. Besides wall
// time per op it reports cpu-ns/op, the process's CPU time (user + system, getrusage) per op:
// on a machine shared with other jobs wall time also counts the time the benchmark's threads
// waited for a core, CPU time only the work done, cache misses included.
func benchCycles(b *testing.B, size, g, hold int) {
	p, _ := newPool(b, Config{MaxConns: size})
	eventually(b, "pool filled", func() bool { return p.Stats().Idle == size })
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := cpuTime()
	defer func() { b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op") }()
	runConcurrent(b, g, func() {
		e, err := p.acquire(ctx, nil)
		if err != nil {
			b.Error(err)
			return
		}
		if hold > 0 {
			spin(hold)
		}
		p.release(e, nil)
	})
}

// BenchmarkAcquireRelease is the core's own borrow and return, without database/sql, on a pool
// of 32 (HikariCP-benchmark's ConnectionBench setting). Compare with HikariCP's ~17,900
// getConnection+close per ms at 4 threads on this kind of machine (≈ 56 ns/op).
func BenchmarkAcquireRelease(b *testing.B) {
	for _, g := range benchGoroutines {
		b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) { benchCycles(b, 32, g, 0) })
	}
}

// BenchmarkDBConn is db.Conn+Close through p.OpenDB() and plain database/sql (MaxOpen =
// MaxIdle = 32) over the same fake driver.
func BenchmarkDBConn(b *testing.B) {
	for _, kind := range []string{"sqlpool", "database-sql"} {
		for _, g := range benchGoroutines {
			b.Run(fmt.Sprintf("%s/g=%d", kind, g), func(b *testing.B) {
				db := benchDB(b, kind, 32)
				ctx := context.Background()
				b.ReportAllocs()
				cpu0 := cpuTime()
				defer func() { b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op") }()
				runConcurrent(b, g, func() {
					c, err := db.Conn(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					_ = c.Close()
				})
			})
		}
	}
}

// BenchmarkDBConnSaturated is db.Conn+Close from 64 goroutines on 8 connections over the fake
// driver: bench's cycleConnection at 64 goroutines without a server. Borrowers are CPU-bound,
// so holders are preempted with a connection in hand and most borrows wait; through OpenDB
// each wait costs database/sql a new driverConn (docs/benchmarks.md).
func BenchmarkDBConnSaturated(b *testing.B) {
	for _, kind := range []string{"sqlpool", "database-sql"} {
		b.Run(kind, func(b *testing.B) {
			db := benchDB(b, kind, 8)
			ctx := context.Background()
			b.ReportAllocs()
			cpu0 := cpuTime()
			defer func() { b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op") }()
			runConcurrent(b, 64, func() {
				c, err := db.Conn(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				_ = c.Close()
			})
		})
	}
}

func benchDB(b *testing.B, kind string, size int) *sql.DB {
	b.Helper()
	var db *sql.DB
	switch kind {
	case "database-sql":
		db = sql.OpenDB(fakedb.New())
		db.SetMaxOpenConns(size)
		db.SetMaxIdleConns(size)
	case "sqlpool":
		p, _ := newPool(b, Config{MaxConns: size})
		eventually(b, "pool filled", func() bool { return p.Stats().Idle == size })
		db = p.OpenDB()
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

// BenchmarkClock shows why the hot path reads a coarse clock (clock.go): the cost of the
// exact clocks on this machine against the atomic load that replaces them.
func BenchmarkClock(b *testing.B) {
	p, _ := newPool(b, Config{MaxConns: 1})
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			_ = time.Now()
		}
	})
	b.Run("nanotime", func(b *testing.B) {
		for b.Loop() {
			_ = p.nanotime()
		}
	})
	b.Run("coarse", func(b *testing.B) {
		for b.Loop() {
			_ = p.now()
		}
	})
}

// BenchmarkAcquireReleaseContended is the core's borrow and return with many more goroutines
// than connections (a pool of 8), each holding its connection for ~1µs of work: the waiter
// queue, wake-ups and barging under saturation.
func BenchmarkAcquireReleaseContended(b *testing.B) {
	for _, g := range []int{64, 256} {
		b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) { benchCycles(b, 8, g, 1000) })
	}
}

// cpuTime is the process's CPU time so far (user + system), in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

var spinSink atomic.Int64 // spin's result, so that its loop is not optimised away

// spin burns roughly n nanoseconds of CPU without yielding; goroutines call it at once.
func spin(n int) {
	x := 0
	for i := 0; i < n/2; i++ {
		x += i ^ (x >> 3)
	}
	spinSink.Store(int64(x))
}
