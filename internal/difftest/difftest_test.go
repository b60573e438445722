package difftest

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/leakcheck"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// TestMain runs the tests, then the leak check.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := leakcheck.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// envInt reads a positive integer environment variable, or def.
func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// runPrograms runs programs of chunk steps from consecutive seeds until steps steps ran, and
// fails with the shrunk sequence of the first divergence.
func runPrograms(t *testing.T, o Options, seed uint64, steps, chunk int) {
	r, err := NewRunner(o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	start := time.Now()
	for done := 0; done < steps; seed++ {
		n := min(chunk, steps-done)
		p := Generate(seed, n, o.Vocabulary)
		d, err := r.Run(p)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if d != nil {
			t.Logf("seed %d, %d steps: %v", seed, n, d)
			sp, sd, err := r.Shrink(p, d, 400)
			if err != nil {
				t.Fatalf("shrink: %v", err)
			}
			t.Fatalf("divergence (seed %d, DIFFTEST_SEED=%d DIFFTEST_CHUNK=%d reproduces it); shrunk to %d steps:\n%s%v", seed, seed, chunk, len(sp), sp, sd)
		}
		done += n
		if steps > 100000 && done%20000 < chunk {
			t.Logf("%d steps in %v", done, time.Since(start).Round(time.Second))
		}
	}
	el := time.Since(start)
	t.Logf("%d steps in %v (%.0f steps/s), 0 divergences", steps, el.Round(time.Millisecond), float64(steps)/el.Seconds())
}

// TestDifferential runs the differential fuzzer on MariaDB (MYSQL_TEST_DSN): 20,000 steps by
// default (2,000 with -short), DIFFTEST_STEPS for long runs by hand, DIFFTEST_SEED for the
// first seed, DIFFTEST_CHUNK for the steps per program (each program starts from freshly
// created databases), DIFFTEST_PREFIX for the databases' names (to run several at once).
func TestDifferential(t *testing.T) {
	mysqltest.RequireMariaDB(t, "the differential fuzzer's full vocabulary")
	steps := envInt(t, "DIFFTEST_STEPS", 20000)
	if testing.Short() {
		steps = 2000
	}
	prefix := "difftest"
	if s := os.Getenv("DIFFTEST_PREFIX"); s != "" {
		prefix = s // several runs side by side on one server
	}
	runPrograms(t, Options{DSN: mysqltest.DSN(t), Prefix: prefix}, uint64(envInt(t, "DIFFTEST_SEED", 1)), steps, envInt(t, "DIFFTEST_CHUNK", 2000))
}

// TestDifferentialEmbedded runs a smaller program on the embedded server, with the part of
// the vocabulary it serves.
func TestDifferentialEmbedded(t *testing.T) {
	if mysqltest.IsMariaDB() {
		t.Skip("MYSQL_TEST_DSN is set: TestDifferential covers MariaDB")
	}
	dsn := mysqltest.EmbeddedDSN(t)
	runPrograms(t, Options{DSN: dsn, Prefix: "difftest", Vocabulary: Vocabulary{Embedded: true}}, 1, envInt(t, "DIFFTEST_STEPS", 2000), 1000)
}

// TestDifferentialFindsInjected makes the pool skip one reset (UNLOCK TABLES, which ends a
// borrower's LOCK TABLES) and checks that the fuzzer finds the divergence and shrinks it.
func TestDifferentialFindsInjected(t *testing.T) {
	mysqltest.RequireMariaDB(t, "the differential fuzzer's full vocabulary")
	r, err := NewRunner(Options{DSN: mysqltest.DSN(t), Prefix: "difftest_inj", Inject: "UNLOCK TABLES"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for seed := uint64(1); seed < 20; seed++ {
		p := Generate(seed, 2000, r.o.Vocabulary)
		d, err := r.Run(p)
		if err != nil {
			t.Fatal(err)
		}
		if d == nil {
			continue
		}
		sp, sd, err := r.Shrink(p, d, 400)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: found at step %d of %d, shrunk to %d steps:\n%s%v", seed, d.Step, len(p), len(sp), sp, sd)
		if len(sp) > 5 {
			t.Errorf("shrunk sequence has %d steps, want at most 5 (LOCK TABLES, a borrow)", len(sp))
		}
		return
	}
	t.Fatal("the injected divergence was not found")
}
