// Package txsoak is a fault soak with exact accounting for retry.Tx on a real server: workers
// run transactions that each insert a row of their own and add 1 to two of four hot counter
// rows in random order (so that deadlocks and serialization failures come by themselves), while
// a killer ends one of the pool's server connections every few tens of milliseconds, whatever
// it is doing. Afterwards every transaction is accounted for against the tables:
//
//   - retry.Tx returned nil: its row is there;
//   - an ambiguous commit (retry.ErrAmbiguousCommit): its row may or may not be there (both
//     are counted);
//   - any other error: its row is not there, since a transaction reported failed must not have
//     committed (a COMMIT retried after it was applied fails on the row's key and lands here);
//
// no row is there that no transaction wrote, and the counters add up to twice the rows. A
// failure that is neither an ambiguous commit nor a transient error retried to the end of the
// policy is reported: an error retry should have retried. The databases' tests (pgdialect,
// retry on MariaDB) run it.
package txsoak

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/retry"
)

// Config is one soak. Every field but Iso and Workers is required.
type Config struct {
	// DB runs the transactions (the pool's *sql.DB); Admin runs the killer and the checks
	// (a plain *sql.DB whose connections Kill never ends).
	DB, Admin *sql.DB
	// Insert adds a transaction's row: two placeholders, worker and seq. Bump adds 1 to a
	// counter row: one placeholder, its id, 0 to 3.
	Insert, Bump string
	// Rows selects (worker, seq) of every row; Sum selects the counters' sum.
	Rows, Sum string
	// Kill ends one of DB's server connections (a random one) and returns how many it ended.
	Kill func(ctx context.Context) (int, error)
	// Kind names an error for the log: its server code, or its type.
	Kind func(error) string
	// Duration is how long the workers start transactions.
	Duration time.Duration
	// Iso is the transactions' isolation level; zero: the server's default.
	Iso sql.IsolationLevel
	// Workers is how many goroutines run transactions; zero: 8.
	Workers int
}

type outcome int

const (
	committed outcome = iota
	ambiguous
	failed
)

// Result is every transaction's outcome and what the run counted.
type Result struct {
	cfg      Config
	outcomes map[[2]int]outcome
	errs     map[[2]int]error
	kills    int
	retries  map[string]int
	elapsed  time.Duration
}

// Run runs the soak and returns its outcomes; call Check on them.
func Run(t testing.TB, cfg Config) *Result {
	t.Helper()
	if cfg.Workers == 0 {
		cfg.Workers = 8
	}
	r := &Result{cfg: cfg, outcomes: map[[2]int]outcome{}, errs: map[[2]int]error{}, retries: map[string]int{}}
	var mu sync.Mutex
	policy := retry.Policy{
		MaxAttempts: 50,
		BaseDelay:   time.Millisecond,
		MaxDelay:    50 * time.Millisecond,
		// A deliberate storm (a conflict for about every other attempt): a private budget
		// that does not get in its way.
		Budget: retry.NewBudget(retry.BudgetConfig{Ratio: 100}),
		Observer: &retry.Hooks{OnRetry: func(_ retry.Op, _ int, err error, _ time.Duration) {
			mu.Lock()
			r.retries[r.kind(err)]++
			mu.Unlock()
		}},
	}
	stop := make(chan struct{})
	var killer sync.WaitGroup
	killer.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(10+rand.IntN(50)) * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			n, err := cfg.Kill(ctx)
			cancel()
			if err != nil {
				t.Errorf("txsoak: kill: %v", err)
				return
			}
			mu.Lock()
			r.kills += n
			mu.Unlock()
		}
	})
	start := time.Now()
	var wg sync.WaitGroup
	for w := range cfg.Workers {
		wg.Go(func() {
			for seq := 0; time.Since(start) < cfg.Duration; seq++ {
				a, b := rand.IntN(4), rand.IntN(3)
				if b >= a {
					b++
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err := retry.Tx(ctx, cfg.DB, &sql.TxOptions{Isolation: cfg.Iso}, policy, func(ctx context.Context, tx *sql.Tx) error {
					if _, err := tx.ExecContext(ctx, cfg.Insert, w, seq); err != nil {
						return err
					}
					for _, id := range []int{a, b} {
						if _, err := tx.ExecContext(ctx, cfg.Bump, id); err != nil {
							return err
						}
					}
					return nil
				})
				cancel()
				o := committed
				switch {
				case err == nil:
				case errors.Is(err, retry.ErrAmbiguousCommit):
					o = ambiguous
				default:
					o = failed
				}
				mu.Lock()
				r.outcomes[[2]int{w, seq}] = o
				if err != nil {
					r.errs[[2]int{w, seq}] = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	close(stop)
	killer.Wait()
	return r
}

// Check compares the outcomes with the tables, fails t on every broken promise and logs the
// figures.
func (r *Result) Check(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := r.cfg.Admin.QueryContext(ctx, r.cfg.Rows)
	if err != nil {
		t.Fatalf("txsoak: %s: %v", r.cfg.Rows, err)
	}
	present := map[[2]int]bool{}
	for rows.Next() {
		var k [2]int
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			t.Fatal(err)
		}
		present[k] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var sum int64
	if err := r.cfg.Admin.QueryRowContext(ctx, r.cfg.Sum).Scan(&sum); err != nil {
		t.Fatalf("txsoak: %s: %v", r.cfg.Sum, err)
	}
	var n [3]int
	ambiguousApplied, unexpected := 0, 0
	failures := map[string]int{}
	for k, o := range r.outcomes {
		n[o]++
		switch o {
		case committed:
			if !present[k] {
				t.Errorf("transaction %v: retry.Tx returned nil, and its row is not there", k)
			}
		case ambiguous:
			if present[k] {
				ambiguousApplied++
			}
		case failed:
			err := r.errs[k]
			if present[k] {
				t.Errorf("transaction %v: retry.Tx returned %v, and its row is there: a transaction reported failed committed", k, err)
			}
			failures[r.kind(err)]++
			var re *retry.Error
			if !errors.As(err, &re) || re.Class != retry.Transient {
				unexpected++
				if unexpected <= 5 {
					t.Errorf("transaction %v failed without being retried to the end: %v", k, err)
				}
			}
		}
	}
	for k := range present {
		if _, ok := r.outcomes[k]; !ok {
			t.Errorf("row %v is there, and no transaction wrote it", k)
		}
	}
	if want := 2 * int64(len(present)); sum != want {
		t.Errorf("counters add up to %d, want %d (two per row): a transaction was applied in part or twice", sum, want)
	}
	t.Logf("%v: %d transactions, %d connections killed: %d committed, %d ambiguous (%d of them applied), %d failed %s; retried: %s",
		r.elapsed.Round(time.Millisecond), len(r.outcomes), r.kills, n[committed], n[ambiguous], ambiguousApplied, n[failed], counts(failures), counts(r.retries))
	if n[committed] == 0 {
		t.Errorf("no transaction committed")
	}
}

// kind names err: how retry ended, then cfg.Kind of the cause.
func (r *Result) kind(err error) string {
	var re *retry.Error
	if errors.As(err, &re) && re.Err != nil {
		why := re.Class.String()
		switch {
		case re.BudgetExhausted:
			why = "budget"
		case re.CtxErr != nil:
			why = "ctx"
		case re.Class == retry.Transient:
			why = fmt.Sprintf("after %d attempts", re.Attempts)
		}
		return why + ": " + r.cfg.Kind(re.Err)
	}
	return r.cfg.Kind(err)
}

// Duration is how long a soak runs: the whole seconds in the environment variable env if it is
// set (t fails on anything else), else def, or 1 s with -short.
func Duration(t testing.TB, env string, def time.Duration) time.Duration {
	t.Helper()
	if testing.Short() {
		def = time.Second
	}
	v := os.Getenv(env)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number of seconds", env, v)
	}
	return time.Duration(n) * time.Second
}

// counts formats a tally as "[a×3 b×1]", sorted.
func counts(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s×%d", k, v))
	}
	sort.Strings(parts)
	return "[" + strings.Join(parts, " ") + "]"
}
