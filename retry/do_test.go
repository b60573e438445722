package retry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/sqlpool/sqlpool/internal/leakcheck"
	_ "github.com/sqlpool/sqlpool/mysqldialect" // MySQL's pool.Dialect, registered on import

	"github.com/sqlpool/sqlpool/retry"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}

// fast is a policy for tests: no waits, a private generous budget.
func fast(maxAttempts int) retry.Policy {
	return retry.Policy{
		MaxAttempts: maxAttempts,
		BaseDelay:   -1,
		Budget:      retry.NewBudget(retry.BudgetConfig{Ratio: retry.MaxRatio}),
	}
}

// recorder is an Observer that records every event.
type recorder struct {
	mu                                      sync.Mutex
	attempts, retries, exhausted, ambiguous int
	done                                    int
	lastDoneAttempts                        int
	lastDoneErr                             error
	retryErrs                               []error
	delays                                  []time.Duration
	onRetry                                 func()
}

func (r *recorder) Attempt(op retry.Op, n int) { r.mu.Lock(); r.attempts++; r.mu.Unlock() }
func (r *recorder) Retry(op retry.Op, n int, err error, d time.Duration) {
	r.mu.Lock()
	r.retries++
	r.retryErrs = append(r.retryErrs, err)
	r.delays = append(r.delays, d)
	f := r.onRetry
	r.mu.Unlock()
	if f != nil {
		f()
	}
}
func (r *recorder) BudgetExhausted(op retry.Op, n int, err error) {
	r.mu.Lock()
	r.exhausted++
	r.mu.Unlock()
}
func (r *recorder) Ambiguous(op retry.Op, n int, err error) {
	r.mu.Lock()
	r.ambiguous++
	r.mu.Unlock()
}
func (r *recorder) Done(op retry.Op, n int, err error) {
	r.mu.Lock()
	r.done++
	r.lastDoneAttempts, r.lastDoneErr = n, err
	r.mu.Unlock()
}

func TestDoRetriesTransient(t *testing.T) {
	rec := &recorder{}
	p := fast(5)
	p.Observer = rec
	calls := 0
	err := retry.Do(context.Background(), p, func(ctx context.Context) error {
		calls++
		if calls < 3 {
			return errDeadlock
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Do = %v", err)
	}
	if calls != 3 || rec.attempts != 3 || rec.retries != 2 || rec.done != 1 || rec.lastDoneAttempts != 3 || rec.lastDoneErr != nil {
		t.Fatalf("calls=%d observer=%+v", calls, rec)
	}
}

func TestDoPermanentOnce(t *testing.T) {
	dup := myErr(1062, "23000", "Duplicate entry")
	calls := 0
	err := retry.Do(context.Background(), fast(5), func(ctx context.Context) error { calls++; return dup })
	if calls != 1 {
		t.Fatalf("a permanent error ran fn %d times", calls)
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 1 || re.Class != retry.Permanent || re.Op != retry.OpDo {
		t.Fatalf("Do = %#v", err)
	}
	if me, ok := errors.AsType[*mysql.MySQLError](err); !ok || me.Number != 1062 {
		t.Fatalf("errors.As does not reach the cause: %v", err)
	}
	if !strings.Contains(err.Error(), "attempt 1") || !strings.Contains(err.Error(), "Duplicate entry") {
		t.Fatalf("message %q", err)
	}
}

func TestDoGivesUpAfterMaxAttempts(t *testing.T) {
	calls := 0
	err := retry.Do(context.Background(), fast(4), func(ctx context.Context) error { calls++; return errLockWait })
	if calls != 4 {
		t.Fatalf("fn ran %d times, want 4", calls)
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 4 || re.Class != retry.Transient || re.BudgetExhausted {
		t.Fatalf("Do = %#v", err)
	}
	if !errors.Is(err, errLockWait) || errors.Is(err, retry.ErrAmbiguousCommit) || errors.Is(err, retry.ErrBudgetExhausted) {
		t.Fatalf("errors.Is mismatch: %v", err)
	}
	if got := err.Error(); !strings.Contains(got, "gave up after 4 attempts") {
		t.Fatalf("message %q", got)
	}
	// The default is 3 attempts; a negative MaxAttempts means one.
	calls = 0
	p := fast(0)
	_ = retry.Do(context.Background(), p, func(ctx context.Context) error { calls++; return errLockWait })
	if calls != 3 {
		t.Fatalf("default MaxAttempts ran fn %d times, want 3", calls)
	}
	calls = 0
	_ = retry.Do(context.Background(), fast(-1), func(ctx context.Context) error { calls++; return errLockWait })
	if calls != 1 {
		t.Fatalf("MaxAttempts -1 ran fn %d times, want 1", calls)
	}
}

func TestDoAmbiguousNotRetried(t *testing.T) {
	rec := &recorder{}
	p := fast(5)
	p.Observer = rec
	calls := 0
	err := retry.Do(context.Background(), p, func(ctx context.Context) error { calls++; return errDuringCommit })
	if calls != 1 || rec.ambiguous != 1 {
		t.Fatalf("1180: fn ran %d times, %d ambiguous events", calls, rec.ambiguous)
	}
	if !errors.Is(err, retry.ErrAmbiguousCommit) || !errors.Is(err, errDuringCommit) || retry.Classify(err) != retry.Ambiguous {
		t.Fatalf("Do = %v", err)
	}
}

// A ctx that ends during the wait between attempts ends the call at once,
// with the ctx error and the last error both reachable.
func TestDoCtxCancelledDuringWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{onRetry: func() { time.AfterFunc(20*time.Millisecond, cancel) }}
	p := retry.Policy{BaseDelay: time.Hour, MaxDelay: time.Hour, Observer: rec, Budget: retry.NewBudget(retry.BudgetConfig{})}
	calls := 0
	start := time.Now()
	err := retry.Do(ctx, p, func(ctx context.Context) error { calls++; return errDeadlock })
	elapsed := time.Since(start)
	if elapsed > 10*time.Second {
		t.Fatalf("Do waited %v after the ctx was cancelled", elapsed)
	}
	if calls != 1 || rec.retries != 1 {
		t.Fatalf("fn ran %d times, %d retries scheduled; want 1 and 1", calls, rec.retries)
	}
	if rec.delays[0] < time.Second {
		t.Skipf("the jittered wait happened to be %v, shorter than the cancel; nothing to check", rec.delays[0])
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errDeadlock) {
		t.Fatalf("Do = %v, want context.Canceled and the deadlock", err)
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 1 || re.CtxErr != context.Canceled {
		t.Fatalf("Do = %#v", err)
	}
	if retry.Classify(err) != retry.Permanent {
		t.Fatalf("Classify(%v) = %v, want permanent", err, retry.Classify(err))
	}
	t.Logf("cancelled after %v: %v", elapsed, err)
}

func TestDoCtxDeadlineDuringWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	p := retry.Policy{BaseDelay: time.Hour, MaxDelay: time.Hour, Budget: retry.NewBudget(retry.BudgetConfig{})}
	start := time.Now()
	err := retry.Do(ctx, p, func(ctx context.Context) error { return errDeadlock })
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Fatalf("Do ran %v past a 50ms deadline", elapsed)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errDeadlock) {
		t.Fatalf("Do = %v", err)
	}
}

func TestDoCtxAlreadyDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := &recorder{}
	p := fast(3)
	p.Observer = rec
	called := false
	err := retry.Do(ctx, p, func(ctx context.Context) error { called = true; return nil })
	if called {
		t.Fatal("fn ran with a cancelled ctx")
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 0 || !errors.Is(err, context.Canceled) || rec.done != 1 || rec.attempts != 0 {
		t.Fatalf("Do = %#v, observer %+v", err, rec)
	}
}

// fn's own ctx errors are permanent: Do never retries past the caller's ctx.
func TestDoCtxErrorFromFn(t *testing.T) {
	calls := 0
	err := retry.Do(context.Background(), fast(5), func(ctx context.Context) error {
		calls++
		return errors.Join(context.DeadlineExceeded, mysql.ErrInvalidConn)
	})
	if calls != 1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fn ran %d times: %v", calls, err)
	}
}

// An error that already went through a retry loop is not retried again.
func TestDoNested(t *testing.T) {
	inner, outer := 0, 0
	err := retry.Do(context.Background(), fast(3), func(ctx context.Context) error {
		outer++
		return retry.Do(ctx, fast(3), func(ctx context.Context) error { inner++; return errDeadlock })
	})
	if outer != 1 || inner != 3 {
		t.Fatalf("nested loops ran outer %d, inner %d times; want 1 and 3", outer, inner)
	}
	if retry.Classify(err) != retry.Transient || !errors.Is(err, errDeadlock) {
		t.Fatalf("Do = %v", err)
	}
}

func TestDoBudgetExhausted(t *testing.T) {
	rec := &recorder{}
	p := retry.Policy{
		MaxAttempts: 100, BaseDelay: -1, Observer: rec,
		Budget: retry.NewBudget(retry.BudgetConfig{MinRetriesPerSec: 2, Ratio: -1, Window: time.Second}),
	}
	calls := 0
	err := retry.Do(context.Background(), p, func(ctx context.Context) error { calls++; return errDeadlock })
	// Floor 2/s × 1 s window = 2 retries, then refused.
	if calls != 3 || rec.exhausted != 1 || rec.retries != 2 {
		t.Fatalf("fn ran %d times, %d retries, %d refusals; want 3, 2, 1", calls, rec.retries, rec.exhausted)
	}
	if !errors.Is(err, retry.ErrBudgetExhausted) || !errors.Is(err, errDeadlock) || !strings.Contains(err.Error(), "budget exhausted after 3 attempts") {
		t.Fatalf("Do = %v", err)
	}
}

// The waits between attempts are the jittered backoff, within their bounds.
func TestDoBackoffObserved(t *testing.T) {
	rec := &recorder{}
	p := retry.Policy{MaxAttempts: 5, BaseDelay: 2 * time.Millisecond, MaxDelay: 5 * time.Millisecond, Observer: rec,
		Budget: retry.NewBudget(retry.BudgetConfig{Ratio: retry.MaxRatio})}
	_ = retry.Do(context.Background(), p, func(ctx context.Context) error { return errDeadlock })
	ceilings := []time.Duration{2 * time.Millisecond, 4 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond}
	if len(rec.delays) != len(ceilings) {
		t.Fatalf("%d retries, want %d", len(rec.delays), len(ceilings))
	}
	for i, d := range rec.delays {
		if d < 0 || d > ceilings[i] {
			t.Errorf("wait before retry %d = %v, outside [0, %v]", i+1, d, ceilings[i])
		}
	}
}

func TestDoSuccessDoesNotAllocate(t *testing.T) {
	p := retry.Policy{}
	ctx := context.Background()
	fn := func(ctx context.Context) error { return nil }
	if n := testing.AllocsPerRun(1000, func() { _ = retry.Do(ctx, p, fn) }); n != 0 {
		t.Fatalf("Do allocates %v times per successful call", n)
	}
}

func TestHooks(t *testing.T) {
	var attempts, retries, exhausted, done atomic.Int32
	h := &retry.Hooks{
		OnAttempt:         func(retry.Op, int) { attempts.Add(1) },
		OnRetry:           func(retry.Op, int, error, time.Duration) { retries.Add(1) },
		OnBudgetExhausted: func(retry.Op, int, error) { exhausted.Add(1) },
		OnDone:            func(retry.Op, int, error) { done.Add(1) },
	}
	p := retry.Policy{MaxAttempts: 10, BaseDelay: -1, Observer: h,
		Budget: retry.NewBudget(retry.BudgetConfig{MinRetriesPerSec: 1, Ratio: -1, Window: time.Second})}
	_ = retry.Do(context.Background(), p, func(ctx context.Context) error { return errDeadlock })
	_ = retry.Do(context.Background(), p, func(ctx context.Context) error { return errDuringCommit }) // OnAmbiguous unset: skipped
	if attempts.Load() != 3 || retries.Load() != 1 || exhausted.Load() != 1 || done.Load() != 2 {
		t.Fatalf("attempts %d retries %d exhausted %d done %d", attempts.Load(), retries.Load(), exhausted.Load(), done.Load())
	}
	var empty retry.Hooks
	empty.Attempt(retry.OpDo, 1)
	empty.Retry(retry.OpDo, 1, nil, 0)
	empty.BudgetExhausted(retry.OpDo, 1, nil)
	empty.Ambiguous(retry.OpDo, 1, nil)
	empty.Done(retry.OpDo, 1, nil)
}

func BenchmarkDoSuccess(b *testing.B) {
	p := retry.Policy{Budget: retry.NewBudget(retry.BudgetConfig{})}
	ctx := context.Background()
	fn := func(ctx context.Context) error { return nil }
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = retry.Do(ctx, p, fn)
		}
	})
}

func BenchmarkClassify(b *testing.B) {
	err := fmt.Errorf("insert span: %w", errDeadlock)
	b.ReportAllocs()
	for b.Loop() {
		retry.Classify(err)
	}
}
