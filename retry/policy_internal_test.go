package retry

import (
	"math"
	"testing"
	"time"
)

func TestPolicyResolve(t *testing.T) {
	r := (&Policy{}).resolve()
	if r.maxAttempts != 3 || r.base != 10*time.Millisecond || r.cap != time.Second || r.budget != DefaultBudget() || r.obs != nil {
		t.Fatalf("zero Policy resolved to %+v", r)
	}
	r = (&Policy{MaxAttempts: -1}).resolve()
	if r.maxAttempts != 1 {
		t.Fatalf("MaxAttempts -1 resolved to %d, want 1", r.maxAttempts)
	}
	b := NewBudget(BudgetConfig{})
	r = (&Policy{MaxAttempts: 7, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, Budget: b}).resolve()
	if r.maxAttempts != 7 || r.base != time.Millisecond || r.cap != 5*time.Millisecond || r.budget != b {
		t.Fatalf("explicit Policy resolved to %+v", r)
	}
}

// Full jitter: the wait before retry n is within [0, min(cap, base·2^(n−1))],
// spread over the whole range.
func TestBackoffBounds(t *testing.T) {
	r := (&Policy{}).resolve() // 10 ms doubling, cap 1 s
	want := []time.Duration{10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000}
	for i, w := range want {
		n := i + 1
		c := r.ceiling(n)
		if c != w*time.Millisecond {
			t.Errorf("ceiling(%d) = %v, want %v", n, c, w*time.Millisecond)
		}
		const samples = 4000
		var sum, maxSeen time.Duration
		minSeen := time.Duration(math.MaxInt64)
		for range samples {
			d := r.delay(n)
			if d < 0 || d > c {
				t.Fatalf("delay(%d) = %v, outside [0, %v]", n, d, c)
			}
			sum += d
			minSeen, maxSeen = min(minSeen, d), max(maxSeen, d)
		}
		// Uniform on [0, c]: mean c/2, and the extremes come close to both ends.
		mean := sum / samples
		if mean < c*40/100 || mean > c*60/100 {
			t.Errorf("delay(%d): mean %v, want about %v", n, mean, c/2)
		}
		if minSeen > c/50 || maxSeen < c*49/50 {
			t.Errorf("delay(%d): range [%v, %v] does not cover [0, %v]", n, minSeen, maxSeen, c)
		}
	}
	// Far-out retries neither overflow nor pass the cap.
	for _, n := range []int{40, 63, 64, 1000, math.MaxInt} {
		if c := r.ceiling(n); c != time.Second {
			t.Errorf("ceiling(%d) = %v, want 1s", n, c)
		}
	}
}

func TestBackoffOddSettings(t *testing.T) {
	// No wait.
	r := (&Policy{BaseDelay: -1}).resolve()
	for n := 1; n < 10; n++ {
		if d := r.delay(n); d != 0 {
			t.Fatalf("BaseDelay<0: delay(%d) = %v, want 0", n, d)
		}
	}
	// A cap below the base caps the first wait too.
	r = (&Policy{BaseDelay: 100 * time.Millisecond, MaxDelay: 30 * time.Millisecond}).resolve()
	if c := r.ceiling(1); c != 30*time.Millisecond {
		t.Fatalf("ceiling(1) = %v, want 30ms", c)
	}
	// No cap: doubling until the Duration range ends, without overflow.
	r = (&Policy{BaseDelay: time.Second, MaxDelay: -1}).resolve()
	if c := r.ceiling(11); c != 1024*time.Second {
		t.Fatalf("uncapped ceiling(11) = %v, want 1024s", c)
	}
	for _, n := range []int{34, 35, 62, 63, 64, 200} {
		c := r.ceiling(n)
		if c <= 0 {
			t.Fatalf("uncapped ceiling(%d) = %v overflowed", n, c)
		}
		if d := r.delay(n); d < 0 || d > c {
			t.Fatalf("uncapped delay(%d) = %v outside [0, %v]", n, d, c)
		}
	}
}
