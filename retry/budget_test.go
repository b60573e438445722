package retry_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/retry"
)

// attemptBound is the package documentation's formula: N calls that all
// fail, made within one window, make at most N × (1 + Ratio) +
// MinRetriesPerSec × T attempts, T being the window in seconds.
func attemptBound(calls int64, cfg retry.BudgetConfig) int64 {
	return calls + int64(math.Floor(float64(calls)*cfg.Ratio+float64(cfg.MinRetriesPerSec)*cfg.Window.Seconds()+1e-9))
}

// N concurrent calls, every attempt failing, no more calls after them: the
// budget grants exactly Ratio × N + floor × T retries (every goroutine tries
// again until refused, and the last refusal saw every deposit).
func TestBudgetFormulaConcurrentCalls(t *testing.T) {
	cfg := retry.BudgetConfig{Window: time.Second, MinRetriesPerSec: 10, Ratio: 0.2}
	b := retry.NewBudget(cfg)
	p := retry.Policy{MaxAttempts: 1000, BaseDelay: -1, Budget: b}
	const n = 50
	var attempts, refused atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			err := retry.Do(context.Background(), p, func(ctx context.Context) error {
				attempts.Add(1)
				return errDeadlock
			})
			if errors.Is(err, retry.ErrBudgetExhausted) {
				refused.Add(1)
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(began)
	bound := attemptBound(n, cfg) // 50 + 0.2×50 + 10×1 = 70
	t.Logf("%d calls made %d attempts in %v (bound %d); %d ended by the budget", n, attempts.Load(), elapsed, bound, refused.Load())
	if elapsed > cfg.Window*9/10 {
		t.Skipf("took %v, more than one window: the one-window bound does not apply", elapsed)
	}
	if attempts.Load() != bound {
		t.Fatalf("%d attempts, want exactly %d = N × (1 + ratio) + floor × T", attempts.Load(), bound)
	}
	if refused.Load() != n {
		t.Fatalf("%d calls ended by the budget, want all %d", refused.Load(), n)
	}
}

// Goroutines that keep calling for most of a window, every attempt failing:
// attempts never exceed N × (1 + ratio) + floor × T for the N calls made,
// and reach it exactly (the budget is not stingier than it says).
func TestBudgetFormulaOverWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for a second")
	}
	cfg := retry.BudgetConfig{Window: 2 * time.Second, MinRetriesPerSec: 10, Ratio: 0.2}
	b := retry.NewBudget(cfg)
	born := time.Now()
	p := retry.Policy{MaxAttempts: 1000, BaseDelay: 200 * time.Microsecond, MaxDelay: time.Millisecond, Budget: b}
	const goroutines = 8
	stopAt := born.Add(cfg.Window / 2)
	var calls, attempts atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for time.Now().Before(stopAt) {
				calls.Add(1)
				err := retry.Do(context.Background(), p, func(ctx context.Context) error {
					attempts.Add(1)
					time.Sleep(time.Millisecond) // a round trip
					return errDeadlock
				})
				if !errors.Is(err, retry.ErrBudgetExhausted) {
					t.Errorf("a call ended without the budget refusing: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(born)
	n, a := calls.Load(), attempts.Load()
	bound := attemptBound(n, cfg)
	t.Logf("T=%v: %d calls made %d attempts (%d retries) in %v; bound N×(1+%.1f)+%d×%.0f = %d",
		cfg.Window, n, a, a-n, elapsed.Round(time.Millisecond), cfg.Ratio, cfg.MinRetriesPerSec, cfg.Window.Seconds(), bound)
	if elapsed > cfg.Window*9/10 {
		t.Fatalf("the storm took %v, past 0.9 × the window: the machine is too slow for this test", elapsed)
	}
	if a > bound {
		t.Fatalf("%d attempts for %d calls, more than N × (1 + ratio) + floor × T = %d", a, n, bound)
	}
	// Every call ends with a refusal made after its own deposit, so the
	// last refusal saw every deposit: the budget granted all it allows.
	if a != bound {
		t.Fatalf("%d attempts for %d calls, want exactly %d: the budget granted less than it says", a, n, bound)
	}
}
