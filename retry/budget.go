package retry

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Budget defaults, Finagle's RetryBudget defaults (ttl 10 s, minRetriesPerSec
// 10, percentCanRetry 0.2).
const (
	// DefaultWindow is BudgetConfig.Window when the field is zero.
	DefaultWindow = 10 * time.Second
	// DefaultMinRetriesPerSec is BudgetConfig.MinRetriesPerSec when the field is zero.
	DefaultMinRetriesPerSec = 10
	// DefaultRatio is BudgetConfig.Ratio when the field is zero.
	DefaultRatio = 0.2

	// MinWindow is the shortest Window accepted; shorter ones are raised to it.
	MinWindow = 10 * time.Millisecond
	// MaxRatio is the largest Ratio accepted; larger ones are lowered to it.
	MaxRatio = 1000
)

// budgetBuckets is how many buckets the sliding window is cut into, as
// Finagle's WindowedAdder does.
const budgetBuckets = 10

// milli is the fixed-point scale of the budget's arithmetic: one retry costs
// milli tokens; a call deposits Ratio × milli.
const milli = 1000

// BudgetConfig configures a Budget. Zero values mean the defaults.
type BudgetConfig struct {
	// Window is how long a call or a retry counts toward the budget
	// (Finagle's ttl). Zero value: 10 s. Negative: the default. Values below
	// 10 ms are raised to 10 ms.
	Window time.Duration

	// MinRetriesPerSec is the floor: on top of the ratio, the budget grants
	// MinRetriesPerSec × Window(s) retries per window, so a process that has
	// just started or makes few calls can still retry. Zero value: 10.
	// Negative: no floor.
	MinRetriesPerSec int

	// Ratio is the fraction of calls that may be retried (Finagle's
	// percentCanRetry): 0.2 lets one call in five make one retry. It is used
	// to three decimals. Zero value: 0.2. Negative or NaN: no ratio part.
	// Values above 1000 are lowered to 1000.
	Ratio float64
}

// resolved returns c with defaults and bounds applied.
func (c BudgetConfig) resolved() BudgetConfig {
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.Window < MinWindow {
		c.Window = MinWindow
	}
	switch {
	case c.MinRetriesPerSec == 0:
		c.MinRetriesPerSec = DefaultMinRetriesPerSec
	case c.MinRetriesPerSec < 0:
		c.MinRetriesPerSec = 0
	}
	switch {
	case c.Ratio == 0:
		c.Ratio = DefaultRatio
	case c.Ratio < 0 || math.IsNaN(c.Ratio):
		c.Ratio = 0
	case c.Ratio > MaxRatio:
		c.Ratio = MaxRatio
	}
	return c
}

// A Budget limits retries to a fraction of recent calls plus a small floor,
// over a sliding window, so that a retry storm cannot multiply the load on a
// struggling database. It is Finagle's RetryBudget: every call deposits, every
// retry withdraws, and a retry is granted only while, over the window,
//
//	retries + 1 ≤ Ratio × calls + MinRetriesPerSec × Window(s)
//
// The package documentation states the resulting bound. One Budget is meant
// to be shared by every Policy that works against the same database; it is
// safe for concurrent use. Deposit takes no lock (one compare-and-swap);
// TryWithdraw and Balance take the budget's mutex.
type Budget struct {
	cfg        BudgetConfig // resolved
	bucketNs   int64        // Window / budgetBuckets
	reserve    int64        // MinRetriesPerSec × Window(s), in milli-retries
	ratioMilli int64        // Ratio × milli, rounded
	start      time.Time
	now        func() time.Duration // time since start; tests replace it

	// calls holds, per bucket, the bucket's index truncated to 32 bits in
	// the high half and its count of calls in the low half, so that Deposit
	// can claim a stale bucket and count in it with one compare-and-swap.
	calls [budgetBuckets]atomic.Uint64

	_ [64]byte // keep the lock off the cache lines deposits write

	mu      sync.Mutex
	retries [budgetBuckets]retryBucket // guarded by mu
}

type retryBucket struct {
	index int64 // the bucket's index since start; buckets older than budgetBuckets are stale
	n     int64
}

// NewBudget returns a Budget configured by c; zero fields take the defaults.
func NewBudget(c BudgetConfig) *Budget {
	return newBudget(c, nil)
}

// newBudget is NewBudget with a clock (time since the budget started) for tests.
func newBudget(c BudgetConfig, now func() time.Duration) *Budget {
	c = c.resolved()
	b := &Budget{
		cfg:        c,
		bucketNs:   int64(c.Window) / budgetBuckets,
		ratioMilli: int64(math.Round(c.Ratio * milli)),
		start:      time.Now(),
		now:        now,
	}
	// MinRetriesPerSec × Window in milli-retries = MinRetriesPerSec × Window in ms.
	ms := c.Window.Milliseconds()
	const reserveCap = 1 << 50
	if c.MinRetriesPerSec > 0 && ms > reserveCap/int64(c.MinRetriesPerSec) {
		b.reserve = reserveCap
	} else {
		b.reserve = int64(c.MinRetriesPerSec) * ms
	}
	if b.now == nil {
		b.now = b.sinceStart
	}
	for i := range b.retries {
		b.retries[i].index = -budgetBuckets
	}
	return b
}

func (b *Budget) sinceStart() time.Duration { return time.Since(b.start) }

// defaultBudget is the budget of every Policy whose Budget is nil.
var defaultBudget = NewBudget(BudgetConfig{})

// DefaultBudget returns the process-wide Budget, with the default settings,
// that every Policy whose Budget is nil shares.
func DefaultBudget() *Budget { return defaultBudget }

// Config returns the budget's configuration with the defaults filled in.
func (b *Budget) Config() BudgetConfig { return b.cfg }

// index is the current bucket index: time since start in bucket widths.
func (b *Budget) index() int64 { return int64(b.now()) / b.bucketNs }

// Deposit records one call. Do and Tx call it once per call, before the
// first attempt; call it yourself only for calls you retry with TryWithdraw.
func (b *Budget) Deposit() {
	idx := b.index()
	w := &b.calls[idx%budgetBuckets]
	epoch := uint32(idx)
	for {
		old := w.Load()
		var nw uint64
		switch e := uint32(old >> 32); {
		case e == epoch || int32(e-epoch) > 0:
			// The current bucket, or a newer one claimed while this
			// goroutine was descheduled: count the call there.
			if old&math.MaxUint32 == math.MaxUint32 {
				return // saturated; cannot happen at real call rates
			}
			nw = old + 1
		default:
			// A stale bucket: claim it for this index with one call.
			nw = uint64(epoch)<<32 | 1
		}
		if w.CompareAndSwap(old, nw) {
			return
		}
	}
}

// TryWithdraw reports whether one retry may be made now, and if so counts it.
// A refusal is immediate; the budget never makes a caller wait.
func (b *Budget) TryWithdraw() bool {
	if b.reserve == 0 && b.ratioMilli == 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// The index is read under the lock so that it never goes backwards
	// between two withdrawals.
	idx := b.index()
	calls, retries := b.sumsLocked(idx)
	if (retries+1)*milli > b.ratioMilli*calls+b.reserve {
		return false
	}
	r := &b.retries[idx%budgetBuckets]
	if r.index != idx {
		r.index, r.n = idx, 0
	}
	r.n++
	return true
}

// Balance returns how many retries the budget would grant now if no calls
// were made meanwhile: a gauge for metrics.
func (b *Budget) Balance() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	calls, retries := b.sumsLocked(b.index())
	n := (b.ratioMilli*calls+b.reserve)/milli - retries
	if n < 0 {
		return 0
	}
	return int(n)
}

// sumsLocked returns the calls and retries of the buckets that cover the
// window ending in bucket idx. b.mu must be held (for retries; calls are
// atomic and only grow the allowance if one is missed).
func (b *Budget) sumsLocked(idx int64) (calls, retries int64) {
	cur := uint32(idx)
	for i := range b.calls {
		w := b.calls[i].Load()
		if cur-uint32(w>>32) < budgetBuckets {
			calls += int64(w & math.MaxUint32)
		}
	}
	for i := range b.retries {
		if r := &b.retries[i]; idx-r.index < budgetBuckets {
			retries += r.n
		}
	}
	return calls, retries
}
