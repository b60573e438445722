package metrics_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/metrics"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/stmtname"
)

// benchPool returns a pool of size conns over c, with m as its Trace when on, filled.
func benchPool(b *testing.B, c driver.Connector, conns int, on bool) (*pool.Pool, *metrics.Metrics) {
	b.Helper()
	cfg := pool.Config{Name: "bench", MaxConns: conns, Logger: quiet}
	var m *metrics.Metrics
	if on {
		m = newMetrics(b, metrics.Options{})
		cfg.Trace = m.Trace()
	}
	p, err := pool.New(c, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	if m != nil {
		m.MustRegister(p)
	}
	eventually(b, "the pool filled", func() bool { return p.Stats().Idle == conns })
	return p, m
}

// cycleStatement is one borrow, SELECT 1, scan and release through database/sql.
func cycleStatement(b *testing.B, db *sql.DB) {
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var n int
	if err := c.QueryRowContext(ctx, "SELECT 1").Scan(&n); err != nil {
		b.Fatal(err)
	}
	if err := c.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCycleStatement is cycleStatement against mysqltest.DSN (MariaDB when
// MYSQL_TEST_DSN is set, else the embedded server) with metrics off and on. Run it through
// benchstat with -count ≥ 10; the sub-benchmarks alternate within each count.
func BenchmarkCycleStatement(b *testing.B) {
	cfg, err := mysql.ParseDSN(mysqltest.DSN(b))
	if err != nil {
		b.Fatal(err)
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			p, _ := benchPool(b, connector, 4, mode == "on")
			db := p.OpenDB()
			defer db.Close()
			b.ReportAllocs()
			for b.Loop() {
				cycleStatement(b, db)
			}
		})
	}
}

// BenchmarkCycleStatementPaired measures the same cycle on two pools of the same server, one
// with metrics and one without, in alternating blocks of 10 cycles (the order flips every
// pair), and reports the median time of a cycle on each and the median difference within a
// pair. On a shared machine the load from other tenants changes from second to second; blocks
// microseconds apart see the same load, so the paired difference is far less noisy than two
// separate benchmarks.
func BenchmarkCycleStatementPaired(b *testing.B) {
	cfg, err := mysql.ParseDSN(mysqltest.DSN(b))
	if err != nil {
		b.Fatal(err)
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		b.Fatal(err)
	}
	pairedCycles(b, connector, connector)
}

// BenchmarkCycleStatementStubPaired is BenchmarkCycleStatementPaired on the fake driver.
func BenchmarkCycleStatementStubPaired(b *testing.B) {
	pairedCycles(b, fakedb.New(), fakedb.New())
}

func pairedCycles(b *testing.B, cOff, cOn driver.Connector) {
	pOff, _ := benchPool(b, cOff, 4, false)
	pOn, _ := benchPool(b, cOn, 4, true)
	dbs := []*sql.DB{pOff.OpenDB(), pOn.OpenDB()}
	defer dbs[0].Close()
	defer dbs[1].Close()
	const block = 10
	var offs, ons, deltas []float64 // per block, ns per cycle
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		var t [2]float64
		for _, k := range [2]int{i % 2, 1 - i%2} {
			start := time.Now()
			for j := 0; j < block; j++ {
				cycleStatement(b, dbs[k])
			}
			t[k] = float64(time.Since(start)) / block
		}
		offs, ons, deltas = append(offs, t[0]), append(ons, t[1]), append(deltas, t[1]-t[0])
	}
	// Medians: a block that another process preempted is an outlier, not a trend.
	b.ReportMetric(median(offs), "off-ns/cycle")
	b.ReportMetric(median(ons), "on-ns/cycle")
	b.ReportMetric(median(deltas), "delta-ns/cycle")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// BenchmarkCycleStatementStub is cycleStatement on the fake driver: the pool's and the
// metrics' own cost with no network in between.
func BenchmarkCycleStatementStub(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			p, _ := benchPool(b, fakedb.New(), 4, mode == "on")
			db := p.OpenDB()
			defer db.Close()
			b.ReportAllocs()
			for b.Loop() {
				cycleStatement(b, db)
			}
		})
	}
}

// BenchmarkAcquireRelease is the pool's own borrow and return (Connect and the proxy's
// Close, no database/sql) on the fake driver, serially and from every P at once.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			p, _ := benchPool(b, fakedb.New(), 32, mode == "on")
			b.ReportAllocs()
			for b.Loop() {
				c, err := p.Connect(bg)
				if err != nil {
					b.Fatal(err)
				}
				_ = c.Close()
			}
		})
	}
	for _, mode := range []string{"off", "on"} {
		b.Run("parallel/"+mode, func(b *testing.B) {
			p, _ := benchPool(b, fakedb.New(), 32, mode == "on")
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c, err := p.Connect(bg)
					if err != nil {
						b.Error(err)
						return
					}
					_ = c.Close()
				}
			})
		})
	}
}

// BenchmarkEvents is the cost of the event methods (m.Trace()'s functions) alone.
func BenchmarkEvents(b *testing.B) {
	m := newMetrics(b, metrics.Options{})
	m.Acquired("bench", 0)
	named := stmtname.With(bg, "get_user")
	b.Run("acquired+released", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.Acquired("bench", 0)
			m.Released("bench", 3*time.Millisecond)
		}
	})
	b.Run("acquired+released/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.Acquired("bench", 0)
				m.Released("bench", 3*time.Millisecond)
			}
		})
	})
	b.Run("statement/named", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.StatementDone(named, "bench", "SELECT * FROM users WHERE id = ?", time.Millisecond, nil)
		}
	})
	b.Run("statement/parsed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.StatementDone(bg, "bench", "SELECT * FROM users WHERE id = ?", time.Millisecond, nil)
		}
	})
	b.Run("statement/uncached", func(b *testing.B) {
		// More distinct texts than the cache holds: each one is parsed every time.
		texts := make([]string, 20000)
		for i := range texts {
			texts[i] = fmt.Sprintf("SELECT * FROM users WHERE id = %d", i)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			m.StatementDone(bg, "bench", texts[i%len(texts)], time.Millisecond, nil)
			i++
		}
	})
}
