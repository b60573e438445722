package retry

import (
	"math"
	"math/rand/v2"
	"time"
)

// Policy defaults.
const (
	// DefaultMaxAttempts is Policy.MaxAttempts when the field is zero.
	DefaultMaxAttempts = 3
	// DefaultBaseDelay is Policy.BaseDelay when the field is zero.
	DefaultBaseDelay = 10 * time.Millisecond
	// DefaultMaxDelay is Policy.MaxDelay when the field is zero.
	DefaultMaxDelay = time.Second
)

// Policy says how often and how fast Do and Tx try again. The zero value is
// the default policy: 3 attempts, backoff from 10 ms capped at 1 s, the
// process-wide budget, no observer. A Policy is a value; copy it freely.
type Policy struct {
	// MaxAttempts is how many times the work may run in all, the first
	// attempt included. Zero value: 3. Negative: 1 (no retries).
	MaxAttempts int

	// BaseDelay is the ceiling of the first backoff: before retry n the wait
	// is uniformly random in [0, min(MaxDelay, BaseDelay × 2^(n−1))]. Zero
	// value: 10 ms. Negative: no wait between attempts.
	BaseDelay time.Duration

	// MaxDelay caps the backoff ceiling. Zero value: 1 s. Negative: no cap
	// (the ctx still bounds every wait). A MaxDelay below BaseDelay caps the
	// first wait too.
	MaxDelay time.Duration

	// Budget limits retries across every call that shares it. Zero value:
	// DefaultBudget(), shared by the whole process.
	Budget *Budget

	// Observer receives the events of every call, for metrics. Zero value:
	// Tx over a pool's *sql.DB uses the pool's (package metrics gives every
	// pool whose Config.Trace is its Trace one); otherwise none, and nothing
	// is called or allocated for it.
	Observer Observer

	// Dialect classifies the errors the package's own rules do not name
	// (see Policy.Classify). Set it to the pool's dialect, p.Dialect(), so
	// that retry and the pool read an error the same way; a dialect of your
	// own that embeds mysqldialect.Dialect or pgdialect.Dialect and overrides
	// Classify, set as pool.Config.Dialect, then teaches both at once. Zero
	// value: Tx over a pool's *sql.DB (or a type that embeds one, such as
	// *sqlx.DB) uses the pool's dialect; Do, TxWith and other starters use
	// none, and such errors are Permanent.
	Dialect Classifier
}

// policy is a Policy with its defaults resolved, for one call.
type policy struct {
	maxAttempts int
	base, cap   time.Duration // cap < 0: no cap; base <= 0: no wait
	budget      *Budget
	obs         Observer
	dialect     Classifier
}

func (p *Policy) resolve() policy {
	r := policy{maxAttempts: p.MaxAttempts, base: p.BaseDelay, cap: p.MaxDelay, budget: p.Budget, obs: p.Observer, dialect: p.Dialect}
	switch {
	case r.maxAttempts == 0:
		r.maxAttempts = DefaultMaxAttempts
	case r.maxAttempts < 0:
		r.maxAttempts = 1
	}
	if r.base == 0 {
		r.base = DefaultBaseDelay
	}
	if r.cap == 0 {
		r.cap = DefaultMaxDelay
	}
	if r.budget == nil {
		r.budget = defaultBudget
	}
	return r
}

// ceiling returns the largest wait before retry n (n ≥ 1):
// min(cap, base × 2^(n−1)), 0 when waits are off.
func (r *policy) ceiling(n int) time.Duration {
	if r.base <= 0 {
		return 0
	}
	shift := n - 1
	if shift < 0 {
		shift = 0
	}
	c := time.Duration(math.MaxInt64)
	if shift < 63 && r.base <= time.Duration(math.MaxInt64)>>shift {
		c = r.base << shift
	}
	if r.cap >= 0 && r.cap < c {
		c = r.cap
	}
	return c
}

// delay returns the wait before retry n: full jitter, uniform in
// [0, ceiling(n)].
func (r *policy) delay(n int) time.Duration {
	c := r.ceiling(n)
	if c <= 0 {
		return 0
	}
	if c == math.MaxInt64 {
		return time.Duration(rand.Int64N(math.MaxInt64))
	}
	return time.Duration(rand.Int64N(int64(c) + 1))
}
