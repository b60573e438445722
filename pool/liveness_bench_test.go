package pool

import (
	"context"
	"database/sql/driver"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// BenchmarkAcquireReleaseMySQL is the core's borrow and return inside the bypass window over
// go-sql-driver/mysql connections (MariaDB with MYSQL_TEST_DSN, else the embedded server): the
// hot path with the driver's liveness check at hand-out (checkout), which
// the fake driver's benchmarks do not show. No bytes are sent.
func BenchmarkAcquireReleaseMySQL(b *testing.B) {
	dsn := mysqltest.DSN(b)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		b.Fatal(err)
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, g := range []int{1, 4} {
		b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) {
			p, err := New(connector, Config{MaxConns: 8, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			eventually(b, "pool filled", func() bool { return p.Stats().Idle == 8 })
			ctx := context.Background()
			b.ReportAllocs()
			runConcurrent(b, g, func() {
				e, err := p.acquire(ctx, nil)
				if err != nil {
					b.Error(err)
					return
				}
				p.release(e, nil)
			})
		})
	}
	// The liveness check alone: go-sql-driver/mysql's ResetSession (a non-blocking read).
	b.Run("ResetSession", func(b *testing.B) {
		dc, err := connector.Connect(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		defer dc.Close()
		sr := dc.(driver.SessionResetter)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if err := sr.ResetSession(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
