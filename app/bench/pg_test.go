package bench

import (
	"io"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/pgtest"
)

// pgServer returns PG_TEST_DSN's server, or a private one stopped at the end of the test; it
// skips when PostgreSQL is absent (fails with SQLPOOL_REQUIRE_POSTGRES=1).
func pgServer(t *testing.T) *pgtest.Server {
	if os.Getenv("PG_TEST_DSN") != "" {
		return pgtest.Shared(t)
	}
	return pgtest.Start(t)
}

// TestPostgresTargets runs the PostgreSQL table's workloads briefly on every PostgreSQL pool
// and driver, through the counting proxy: each completes operations, traffic is counted in
// bytes only (no MySQL packet figures), and a clean cycleConnection sends (almost) nothing.
func TestPostgresTargets(t *testing.T) {
	s := pgServer(t)
	for _, drv := range []string{DriverPgx, DriverPq} {
		t.Run(drv, func(t *testing.T) {
			tg, err := OpenPostgres(s.DSN(), drv, true)
			if err != nil {
				t.Fatal(err)
			}
			defer tg.Close()
			if err := tg.Ping(PingTimeout); err != nil {
				t.Fatal(err)
			}
			for _, p := range PostgresPools(drv) {
				for _, b := range []string{BenchCycleConnection, BenchCycleParamStatement, BenchSaturated} {
					spec := Spec{Benchmark: b, Pool: p, Threads: 1, Size: 4, Iterations: 1, IterationTime: 50 * time.Millisecond}
					if b == BenchSaturated {
						spec.Threads, spec.Hold = 16, 100*time.Microsecond
					}
					raw, err := RunSpec(spec, tg, io.Discard, nil)
					if err != nil {
						t.Fatalf("%v: %v", spec, err)
					}
					if raw.AllOps == 0 || len(raw.Scores) != 1 || !raw.Counting || !raw.NoPackets {
						t.Fatalf("%v: %d ops, scores %v, counting %v, no packets %v", spec, raw.AllOps, raw.Scores, raw.Counting, raw.NoPackets)
					}
					if b == BenchCycleParamStatement && raw.Counts.ClientBytes == 0 {
						t.Errorf("%v: no client bytes counted for %d statements", spec, raw.AllOps)
					}
					// A clean borrow and return sends nothing; pgx's stdlib may ping a connection
					// idle for over a second, at most once per connection here.
					if b == BenchCycleConnection && raw.Counts.ClientBytes > 64*int64(spec.Size) {
						t.Errorf("%v: %d client bytes over %d clean cycles, want none (a ping per connection at most)", spec, raw.Counts.ClientBytes, raw.AllOps)
					}
					r := Merge("postgres-"+drv, 0, []*Raw{raw})
					if r.BytesPerOp == nil || r.RoundTripsPerOp != nil {
						t.Errorf("%v: bytes/op %v, round trips/op %v; want bytes only", spec, r.BytesPerOp, r.RoundTripsPerOp)
					}
				}
			}
		})
	}
}

func TestPostgresOptions(t *testing.T) {
	o, err := ParseOptions([]string{"-pg", "postgres://u@127.0.0.1:5432/db"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Pools, PostgresPools(DriverPgx)) || o.PGDriver != DriverPgx {
		t.Errorf("-pg defaults: pools %v, driver %q", o.Pools, o.PGDriver)
	}
	o, err = ParseOptions([]string{"-pg", "postgres://u@127.0.0.1:5432/db", "-pg-driver", "pq"}, io.Discard)
	if err != nil || !slices.Equal(o.Pools, PostgresPools(DriverPq)) {
		t.Errorf("-pg-driver pq: %v, %v", o, err)
	}
	for _, args := range [][]string{
		{"-pools", "pgxpool"},
		{"-pg", "postgres://u@h/db", "-pg-driver", "pq", "-pools", "pgxpool"},
		{"-pg", "postgres://u@h/db", "-pg-driver", "mysql"},
		{"-pg", "postgres://u@h/db", "-stub"},
	} {
		if _, err := ParseOptions(args, io.Discard); err == nil {
			t.Errorf("ParseOptions(%q) accepted", args)
		}
	}
	if _, err := OpenPostgres("user:pass@tcp(127.0.0.1:3306)/test", DriverPgx, false); err == nil {
		t.Error("OpenPostgres accepted a MySQL DSN")
	}
}
