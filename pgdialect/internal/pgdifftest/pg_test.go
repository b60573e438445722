package pgdifftest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/lib/pq"

	"github.com/sqlpool/sqlpool/internal/pgtest"
	"github.com/sqlpool/sqlpool/pgdialect"
	"github.com/sqlpool/sqlpool/pool"
)

// TestDifferentialPostgres runs the fuzzer on PostgreSQL with pgx stdlib and with lib/pq:
// DIFFTEST_PG_STEPS steps per driver (default 20,000, so 40,000 in all; 1,000 with -short),
// programs of DIFFTEST_CHUNK steps (default 2,000) from DIFFTEST_SEED on.
func TestDifferentialPostgres(t *testing.T) {
	s := pgtest.Shared(t)
	steps := envInt(t, "DIFFTEST_PG_STEPS", 20000)
	if testing.Short() {
		steps = 1000
	}
	chunk := envInt(t, "DIFFTEST_CHUNK", 2000)
	seed0 := uint64(envInt(t, "DIFFTEST_SEED", 1))
	admin := sql.OpenDB(s.PgxConnector(t))
	defer admin.Close()
	dsnFor := func(db string) string {
		return strings.Replace(s.DSN(), "/postgres?", "/"+db+"?", 1)
	}
	conns := map[string]func(db string) (driver.Connector, error){
		"pgx": func(db string) (driver.Connector, error) {
			cfg, err := pgx.ParseConfig(dsnFor(db))
			if err != nil {
				return nil, err
			}
			return stdlib.GetConnector(*cfg), nil
		},
		"pq": func(db string) (driver.Connector, error) { return pq.NewConnector(dsnFor(db)) },
	}
	for _, name := range []string{"pgx", "pq"} {
		t.Run(name, func(t *testing.T) {
			r, err := NewPGRunner(PGOptions{Connector: conns[name], Admin: admin, Prefix: "difftest_pg_" + name})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			start := time.Now()
			for done, seed := 0, seed0; done < steps; seed++ {
				n := min(chunk, steps-done)
				p := GeneratePG(seed, n)
				d, err := r.Run(p)
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				if d != nil {
					var b strings.Builder
					for i := max(0, d.Step-40); i <= d.Step && i < len(p); i++ {
						fmt.Fprintf(&b, "%4d  %s\n", i, p[i])
					}
					t.Fatalf("divergence (seed %d, DIFFTEST_SEED=%d DIFFTEST_CHUNK=%d reproduces it): %v\nthe 40 steps before it:\n%s",
						seed, seed, chunk, d, b.String())
				}
				done += n
			}
			el := time.Since(start)
			t.Logf("%s: %d steps in %v (%.0f steps/s), 0 divergences", name, steps, el.Round(time.Millisecond), float64(steps)/el.Seconds())
		})
	}
}

// forgetful is PostgreSQL's dialect with a release plan that never sends UNLISTEN *.
type forgetful struct{ pool.Dialect }

func (f forgetful) NewSession(ctx context.Context, dc driver.Conn) (pool.SessionTracker, error) {
	t, err := f.Dialect.NewSession(ctx, dc)
	return forgetfulTracker{t}, err
}

type forgetfulTracker struct{ pool.SessionTracker }

func (f forgetfulTracker) Plan() pool.ReleasePlan {
	p := f.SessionTracker.Plan()
	var out []string
	for _, s := range p.Statements {
		s = strings.TrimPrefix(strings.ReplaceAll(strings.ReplaceAll(s, "; UNLISTEN *", ""), "UNLISTEN *; ", ""), "UNLISTEN *")
		if s != "" {
			out = append(out, s)
		}
	}
	p.Statements = out
	return p
}

// TestDifferentialPostgresFindsInjected: with a dialect that forgets UNLISTEN *, the fuzzer
// reports a divergence in the listen channels.
func TestDifferentialPostgresFindsInjected(t *testing.T) {
	s := pgtest.Shared(t)
	admin := sql.OpenDB(s.PgxConnector(t))
	defer admin.Close()
	r, err := NewPGRunner(PGOptions{
		Connector: func(db string) (driver.Connector, error) {
			return pq.NewConnector(strings.Replace(s.DSN(), "/postgres?", "/"+db+"?", 1))
		},
		Admin: admin, Prefix: "difftest_pg_inject", Dialect: forgetful{pgdialect.Dialect},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for seed := uint64(1); seed < 20; seed++ {
		d, err := r.Run(GeneratePG(seed, 500))
		if err != nil {
			t.Fatal(err)
		}
		if d != nil {
			if !strings.Contains(d.What, "listen") {
				t.Fatalf("found %v; want the listen channels", d)
			}
			t.Logf("seed %d: %v", seed, d)
			return
		}
	}
	t.Fatal("no divergence in 19 programs of 500 steps with UNLISTEN * left out of the release plans")
}
