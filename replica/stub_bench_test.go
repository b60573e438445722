package replica_test

import (
	"context"
	"database/sql/driver"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/replica"
)

// stubFlavor answers every position with one fixed LSN: a replica is always caught up.
type stubFlavor struct{}

var stubPos, _ = replica.PostgreSQL.Parse("0/10")

func (stubFlavor) Name() string                             { return "stub" }
func (stubFlavor) Parse(s string) (replica.Position, error) { return replica.PostgreSQL.Parse(s) }
func (stubFlavor) CommitPosition(context.Context, driver.Conn) (replica.Position, error) {
	return stubPos, nil
}
func (stubFlavor) PrimaryPosition(context.Context, driver.Conn) (replica.Position, error) {
	return stubPos, nil
}
func (stubFlavor) ReplicaPosition(context.Context, driver.Conn) (replica.Position, error) {
	return stubPos, nil
}
func (stubFlavor) Wait(context.Context, driver.Conn, replica.Position, time.Duration) (bool, error) {
	return true, nil
}

// BenchmarkRouterRead is the router's own cost per read, on the fake driver (no server): SELECT
// 1 on a replica pool's own DB, through the reader unmarked, and with a covered Token.
func BenchmarkRouterRead(b *testing.B) {
	newPool := func(name string) *pool.Pool {
		p, err := pool.New(fakedb.New(), pool.Config{Name: name, MaxConns: 4, Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = p.Close() })
		return p
	}
	primary, rp := newPool("primary"), newPool("replica")
	r, err := replica.New(replica.Config{Primary: primary, Flavor: stubFlavor{}, Mode: replica.PerToken,
		Replicas: []replica.Replica{{Name: "r1", Connector: rp}}, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close() })
	for r.Stats().Replicas[0].Position == "" {
		time.Sleep(time.Millisecond)
	}
	ctx := context.Background()
	tok, _ := r.ParseToken("stub:0/10")
	direct := rp.OpenDB()
	b.Cleanup(func() { _ = direct.Close() })
	run := func(b *testing.B, f func() error) {
		b.ReportAllocs()
		for b.Loop() {
			if err := f(); err != nil {
				b.Fatal(err)
			}
		}
	}
	var n int
	b.Run("pool-direct", func(b *testing.B) {
		run(b, func() error { return direct.QueryRowContext(ctx, "SELECT 1").Scan(&n) })
	})
	b.Run("reader-unmarked", func(b *testing.B) {
		run(b, func() error { return r.Reader().QueryRowContext(ctx, "SELECT 1").Scan(&n) })
	})
	tctx := replica.WithToken(ctx, tok)
	b.Run("reader-token", func(b *testing.B) {
		run(b, func() error { return r.Reader().QueryRowContext(tctx, "SELECT 1").Scan(&n) })
	})
}
