package retry

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a manual clock: time since the budget started.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Duration      { return time.Duration(c.ns.Load()) }
func (c *fakeClock) set(d time.Duration)     { c.ns.Store(int64(d)) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func withdrawAll(b *Budget) int {
	n := 0
	for b.TryWithdraw() {
		n++
		if n > 1e6 {
			panic("budget never refuses")
		}
	}
	return n
}

func TestBudgetConfigResolved(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   BudgetConfig
		want BudgetConfig
	}{
		{"zero", BudgetConfig{}, BudgetConfig{Window: 10 * time.Second, MinRetriesPerSec: 10, Ratio: 0.2}},
		{"negative", BudgetConfig{Window: -1, MinRetriesPerSec: -5, Ratio: -1}, BudgetConfig{Window: 10 * time.Second, MinRetriesPerSec: 0, Ratio: 0}},
		{"tiny window", BudgetConfig{Window: time.Millisecond}, BudgetConfig{Window: MinWindow, MinRetriesPerSec: 10, Ratio: 0.2}},
		{"huge ratio", BudgetConfig{Ratio: math.Inf(1)}, BudgetConfig{Window: DefaultWindow, MinRetriesPerSec: 10, Ratio: MaxRatio}},
		{"NaN ratio", BudgetConfig{Ratio: math.NaN()}, BudgetConfig{Window: DefaultWindow, MinRetriesPerSec: 10, Ratio: 0}},
		{"explicit", BudgetConfig{Window: time.Second, MinRetriesPerSec: 3, Ratio: 0.5}, BudgetConfig{Window: time.Second, MinRetriesPerSec: 3, Ratio: 0.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewBudget(tc.in).Config(); got != tc.want {
				t.Errorf("Config() = %+v, want %+v", got, tc.want)
			}
		})
	}
	if got := DefaultBudget().Config(); got != (BudgetConfig{Window: DefaultWindow, MinRetriesPerSec: DefaultMinRetriesPerSec, Ratio: DefaultRatio}) {
		t.Errorf("DefaultBudget().Config() = %+v", got)
	}
}

// The budget's arithmetic, step by step on a manual clock: the floor, the
// ratio, and calls and retries leaving the window a bucket at a time.
func TestBudgetWindowFakeClock(t *testing.T) {
	var clk fakeClock
	b := newBudget(BudgetConfig{Window: time.Second, MinRetriesPerSec: 10, Ratio: 0.2}, clk.now)

	// No calls yet: the floor alone, MinRetriesPerSec × Window = 10.
	if got := b.Balance(); got != 10 {
		t.Fatalf("Balance at start = %d, want 10", got)
	}
	if got := withdrawAll(b); got != 10 {
		t.Fatalf("retries granted with no calls = %d, want 10 (floor × window)", got)
	}
	// 4 calls earn 0.8 of a retry: not enough for one.
	for range 4 {
		b.Deposit()
	}
	if b.TryWithdraw() {
		t.Fatal("a retry was granted on 0.8 of a token")
	}
	// The fifth call completes one.
	b.Deposit()
	if got := withdrawAll(b); got != 1 {
		t.Fatalf("retries granted after 5 calls = %d, want 1", got)
	}
	// 45 more calls, later in the window: 0.2 × 50 = 10 in all.
	clk.set(500 * time.Millisecond)
	for range 45 {
		b.Deposit()
	}
	if got := b.Balance(); got != 9 {
		t.Fatalf("Balance = %d, want 9", got)
	}
	if got := withdrawAll(b); got != 9 {
		t.Fatalf("retries granted = %d, want 9", got)
	}
	// Up to the end of the window nothing leaves it.
	clk.set(999 * time.Millisecond)
	if b.TryWithdraw() {
		t.Fatal("a retry was granted in a spent window")
	}
	// At 1 s the first bucket (t in [0, 100 ms)) leaves: its 5 calls (1
	// token) and its 11 retries. Calls: 45 (9 tokens) + floor 10 = 19;
	// retries still in the window: 9 → 10 more.
	clk.set(time.Second)
	if got := withdrawAll(b); got != 10 {
		t.Fatalf("retries granted after the first bucket left = %d, want 10", got)
	}
	// At 1.5 s the bucket of the 45 calls and 9 retries leaves too; the 10
	// retries made at 1 s stay until 2 s.
	clk.set(1500 * time.Millisecond)
	if got := withdrawAll(b); got != 0 {
		t.Fatalf("retries granted = %d, want 0 (the floor is spent until 2 s)", got)
	}
	clk.set(2 * time.Second)
	if got := withdrawAll(b); got != 10 {
		t.Fatalf("retries granted in a fresh window = %d, want 10", got)
	}
	// A bucket slot is reused for a later index: its old count is dropped.
	clk.set(3*time.Second + 50*time.Millisecond) // index 30, slot 0
	b.Deposit()
	calls, _ := b.sumsLocked(b.index())
	if calls != 1 {
		t.Fatalf("calls in window after slot reuse = %d, want 1", calls)
	}
}

func TestBudgetNoFloorNoRatio(t *testing.T) {
	b := NewBudget(BudgetConfig{MinRetriesPerSec: -1, Ratio: -1})
	for range 100 {
		b.Deposit()
	}
	if b.TryWithdraw() {
		t.Fatal("a budget with neither floor nor ratio granted a retry")
	}
	b = NewBudget(BudgetConfig{MinRetriesPerSec: -1, Ratio: 0.5})
	for range 10 {
		b.Deposit()
	}
	if got := withdrawAll(b); got != 5 {
		t.Fatalf("ratio-only budget granted %d retries for 10 calls, want 5", got)
	}
}

// A deposit that was computed for an older bucket, landing after a newer one
// claimed the slot, counts in the newer bucket instead of wiping it.
func TestBudgetLateDeposit(t *testing.T) {
	var clk fakeClock
	b := newBudget(BudgetConfig{Window: time.Second, MinRetriesPerSec: -1, Ratio: 1}, clk.now)
	clk.set(time.Second) // index 10, slot 0
	b.Deposit()
	b.Deposit()
	// Simulate a goroutine that read index 0 and stalled: it sees slot 0 at
	// epoch 10, newer than its own.
	w := &b.calls[0]
	old := w.Load()
	if uint32(old>>32) != 10 || old&math.MaxUint32 != 2 {
		t.Fatalf("slot 0 = epoch %d count %d, want 10 / 2", old>>32, old&math.MaxUint32)
	}
	clk.set(0)
	b.Deposit() // index 0 → slot 0, older epoch
	clk.set(time.Second)
	if calls, _ := b.sumsLocked(b.index()); calls != 3 {
		t.Fatalf("calls = %d, want 3", calls)
	}
}

// Concurrent deposits and withdrawals never grant more than the formula
// allows (run under -race).
func TestBudgetConcurrentExact(t *testing.T) {
	var clk fakeClock
	b := newBudget(BudgetConfig{Window: time.Second, MinRetriesPerSec: 10, Ratio: 0.2}, clk.now)
	const goroutines, callsEach = 8, 500
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range callsEach {
				b.Deposit()
				for b.TryWithdraw() {
					granted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	// 4000 calls × 0.2 + 10 × 1 s = 810, and the last withdrawal saw every
	// deposit, so exactly 810.
	if got := granted.Load(); got != 810 {
		t.Fatalf("granted %d retries, want exactly 810", got)
	}
}

func TestBudgetDepositDoesNotAllocate(t *testing.T) {
	b := NewBudget(BudgetConfig{})
	if n := testing.AllocsPerRun(1000, b.Deposit); n != 0 {
		t.Fatalf("Deposit allocates %v times", n)
	}
}

func BenchmarkBudgetDeposit(b *testing.B) {
	bu := NewBudget(BudgetConfig{})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bu.Deposit()
		}
	})
}
