package metrics

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sqlpool/sqlpool/internal/testhook"
	"github.com/sqlpool/sqlpool/pool"
)

// Defaults of Options.
const (
	// DefaultMaxWindow is Options.MaxWindow when the field is zero: Micrometer's default
	// distributionStatisticExpiry, over which its timers' _max gauges decay.
	DefaultMaxWindow = 2 * time.Minute
	// DefaultMaxStatementNames is Options.MaxStatementNames when the field is zero.
	DefaultMaxStatementNames = 500
)

// Default histogram buckets, in seconds. An acquire that found an idle connection waits 0 and
// lands in the first bucket.
var (
	DefaultAcquireBuckets   = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	DefaultUsageBuckets     = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	DefaultCreationBuckets  = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	DefaultStatementBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
)

// OtherStatement is the statement label of statements beyond Options.MaxStatementNames distinct
// names in one pool, and of statements whose SQL text starts with no known verb.
const OtherStatement = "other"

// Options configures Metrics. The zero value is the defaults.
type Options struct {
	// AcquireBuckets, UsageBuckets, CreationBuckets and StatementBuckets are the upper bounds,
	// in seconds, of the histograms hikaricp_connections_acquire_seconds, _usage_seconds,
	// _creation_seconds and sqlpool_statement_seconds. Zero value: the Default*Buckets.
	AcquireBuckets, UsageBuckets, CreationBuckets, StatementBuckets []float64

	// MaxWindow is the window of the _max gauges (see docs/metrics.md). Zero value: 2 min,
	// Micrometer's default. Negative: an error.
	MaxWindow time.Duration

	// MaxStatementNames bounds the distinct statement labels per pool; statements beyond it are
	// counted under "other". Zero value: 500. Negative: no statement timers at all
	// (StatementDone does nothing).
	MaxStatementNames int

	// ConstLabels are added to every metric, e.g. {"service": "zipkin"}. They must not be
	// "pool", "reason", "result", "statement", "class", "op" or "phase".
	ConstLabels prometheus.Labels

	// RuntimeCollectors makes Handler serve the Go runtime's and the process's metrics too
	// (go_*, process_*: client_golang's collectors.NewGoCollector and NewProcessCollector),
	// registered in Registry(). Zero value: off (register them yourself, or serve m from a
	// registry that has them).
	RuntimeCollectors bool

	// clock rotates the _max windows; set only by the module's tests, through
	// internal/testhook. nil: the system clock. It is read only when metrics are read (scrapes,
	// snapshots), never on the pool's hot path.
	clock testhook.Clock
}

func init() {
	testhook.SetMetricsClock = func(opts any, c testhook.Clock) { opts.(*Options).clock = c }
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Metrics collects the metrics of one or more pools. Put m.Trace() in pool.Config.Trace: that
// one step feeds m the pool's events, registers the pool's gauges (read from pool.Stats at every
// scrape) when pool.New makes it, and gives the pool its retry observer (pool.Trace's
// RetryObserver, which retry.Tx finds through the pool's DB). m implements prometheus.Collector (register it, or serve Handler).
//
// The pool calls the event methods (the fields of Trace) on every acquire and release. They take no lock, allocate
// nothing and read no clock once a pool's first event has been seen: the per-pool metric
// handles live in a copy-on-write map read with one atomic load, and statement names go
// through a bounded lock-free cache (see StatementDone).
type Metrics struct {
	clock    testhook.Clock
	window   time.Duration
	maxNames int
	registry *prometheus.Registry

	pools  atomic.Pointer[map[string]*poolMetrics] // copy-on-write; written under mu
	single atomic.Pointer[poolMetrics]             // the only pool, when there is one
	mu     sync.Mutex                              // writers of pools: a pool's first event, Register, Unregister

	readMu sync.Mutex // scrapes and snapshots: _max window rotation, bypassed clamp

	acquireBuckets, usageBuckets, creationBuckets, stmtBuckets *buckets

	timeouts          *prometheus.CounterVec
	closed            *prometheus.CounterVec
	validations       *prometheus.CounterVec
	plans             *prometheus.CounterVec
	rollbacks, resets *prometheus.CounterVec
	leaked            *prometheus.CounterVec
	cancels           *prometheus.CounterVec
	stmtErrors        *prometheus.CounterVec
	retryAttempts     *prometheus.CounterVec
	retries           *prometheus.CounterVec
	retryBudget       *prometheus.CounterVec
	retryAmbiguous    *prometheus.CounterVec
	retryCalls        *prometheus.CounterVec

	descAcquire, descUsage, descCreation, descStmt                 *prometheus.Desc
	descConns, descActive, descIdle, descPending, descMax, descMin *prometheus.Desc
	descAcquireMax, descUsageMax, descCreationMax, descStmtMax     *prometheus.Desc
	descBypassed, descExhausted, descCacheFull                     *prometheus.Desc
	descUp                                                         *prometheus.Desc
	descTenant                                                     tenantDescs   // tenants.go
	descOverload                                                   overloadDescs // overload.go
	connectErrors                                                  *prometheus.CounterVec

	constLabels prometheus.Labels // Options.ConstLabels, for the per-host collector (hosts.go)
	hostsMu     sync.Mutex
	hosts       *hostCollector // RegisterHosts; nil until the first

	trace pool.Trace // newTrace
}

var errBuckets = errors.New("metrics: histogram buckets must be finite, non-negative and increasing")

var _ prometheus.Collector = (*Metrics)(nil)

// Trace returns the pool.Trace that instruments a pool: put it in pool.Config.Trace (of every
// pool m serves), and nothing else is needed. Its event functions do what m's event methods
// (Acquired, Released, ...) do; its Attached registers the pool (Register) when pool.New makes
// it, and Detached drops the pool's gauges when it closes (its counters and timers stay until
// Unregister); its RetryObserver gives the pool m.RetryObserver(Config.Name). Give it to
// otelpool.Options.Next to report to both Prometheus and OpenTelemetry.
func (m *Metrics) Trace() *pool.Trace {
	t := m.trace
	return &t
}

// newTrace returns m's pool.Trace. The events of every borrow and statement are closures
// holding the code that records them (their methods call these), the rest method values:
// the pool calls the code of each hot event directly, without a method value's extra call.
func (m *Metrics) newTrace() pool.Trace {
	return pool.Trace{
		Acquired: func(name string, wait time.Duration) {
			pm := m.poolFor(name)
			pm.acquire.observe(wait)
			pm.acquireMax.record(wait)
		},
		AcquireTimedOut: m.AcquireTimedOut,
		Released: func(name string, usage time.Duration) {
			pm := m.poolFor(name)
			pm.usage.observe(usage)
			pm.usageMax.record(usage)
		},
		Created:               m.Created,
		Closed:                m.Closed,
		Validated:             m.Validated,
		ReleasePlanRun:        m.ReleasePlanRun,
		LeakedStatementClosed: m.LeakedStatementClosed,
		StatementDone:         m.statementDone(),
		ServerCancelled:       m.ServerCancelled,
		ConnectFailed:         m.connectFailed,
		Attached:              m.attached,
		Detached:              m.detached,
		RetryObserver:         func(name string) any { return m.poolFor(name).retryObserver(m) },
	}
}

// attached registers p when pool.New makes it (Trace.Attached). A name clash is logged on the
// pool's logger: the second pool of that name has no gauges.
func (m *Metrics) attached(p *pool.Pool) {
	if err := m.Register(p); err != nil {
		p.Config().Logger.Warn("sqlpool: metrics: the pool's gauges are not exported; give each pool its own Config.Name",
			"pool", p.Config().Name, "error", err)
	}
	m.poolFor(p.Config().Name).retryObserver(m) // the retry series exist from the start
}

// detached drops a closed pool's gauges (Trace.Detached), so that a new pool may take its name.
func (m *Metrics) detached(p *pool.Pool) {
	if pm := (*m.pools.Load())[p.Config().Name]; pm != nil {
		pm.src.CompareAndSwap(p, nil)
	}
}

// reservedLabels are the variable labels of this package's metrics.
var reservedLabels = []string{"pool", "reason", "result", "statement", "class", "op", "phase"}

// New returns a Metrics with the given options. It fails only on invalid options.
func New(opts Options) (*Metrics, error) {
	if opts.MaxWindow < 0 {
		return nil, errors.New("metrics: negative MaxWindow")
	}
	for _, l := range reservedLabels {
		if _, ok := opts.ConstLabels[l]; ok {
			return nil, fmt.Errorf("metrics: ConstLabels must not contain %q", l)
		}
	}
	m := &Metrics{clock: opts.clock, window: opts.MaxWindow, maxNames: opts.MaxStatementNames}
	if m.clock == nil {
		m.clock = systemClock{}
	}
	if m.window == 0 {
		m.window = DefaultMaxWindow
	}
	if m.maxNames == 0 {
		m.maxNames = DefaultMaxStatementNames
	}
	cl := opts.ConstLabels
	m.constLabels = cl
	for _, b := range []struct {
		dst       **buckets
		given, df []float64
	}{
		{&m.acquireBuckets, opts.AcquireBuckets, DefaultAcquireBuckets},
		{&m.usageBuckets, opts.UsageBuckets, DefaultUsageBuckets},
		{&m.creationBuckets, opts.CreationBuckets, DefaultCreationBuckets},
		{&m.stmtBuckets, opts.StatementBuckets, DefaultStatementBuckets},
	} {
		given := b.given
		if given == nil {
			given = b.df
		}
		var err error
		if *b.dst, err = newBuckets(given); err != nil {
			return nil, err
		}
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: cl}, labels)
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, cl)
	}
	m.descAcquire = desc(NameAcquireSeconds, "Time borrowers waited for a connection, successful and timed-out acquires, in seconds.", "pool")
	m.descUsage = desc(NameUsageSeconds, "Time connections were held by a borrower, from acquire to release, in seconds.", "pool")
	m.descCreation = desc(NameCreationSeconds, "Time to open a physical connection (dial, AfterConnect hook, session baseline), in seconds.", "pool")
	m.descStmt = desc(NameStatementSeconds, "Time statements took until the driver answered (for a query: the first result), in seconds, by bounded statement name.", "pool", "statement")
	m.timeouts = counter(NameTimeouts, "Acquires that reached their deadline (AcquireTimeout or the caller's ctx deadline).", "pool")
	m.closed = counter(NameClosed, "Physical connections closed by the pool, by reason.", "pool", "reason")
	m.validations = counter(NameValidations, "Liveness probes run on acquire (connection idle longer than AliveBypassWindow), by outcome.", "pool", "result")
	m.plans = counter(NameReleasePlans, "Releases that had to run statements to clean the session (rollback or reset), by outcome.", "pool", "result")
	m.rollbacks = counter(NameReleaseRollbacks, "ROLLBACKs run by the pool on release for transactions the borrower left open.", "pool")
	m.resets = counter(NameReleaseResets, "Session reset statements (other than ROLLBACK) run by the pool on release.", "pool")
	m.leaked = counter(NameLeakedStatements, "Prepared statements the borrower left open, closed by the pool on release.", "pool")
	m.cancels = counter(NameCancels, "Statements stopped on the server after their context ended (server-side cancel), by outcome: ended, timeout, failed, pool_closed.", "pool", "outcome")
	m.stmtErrors = counter(NameStatementErrors, "Statements that returned an error, by bounded statement name and error class.", "pool", "statement", "class")
	m.retryAttempts = counter(NameRetryAttempts, "Attempts made by retry.Do and retry.Tx, first attempts included.", "pool", "op")
	m.retries = counter(NameRetries, "Attempts retry.Do and retry.Tx scheduled again after a transient error.", "pool", "op")
	m.retryBudget = counter(NameRetryBudgetExhausted, "Transient errors not retried because the retry budget refused.", "pool", "op")
	m.retryAmbiguous = counter(NameRetryAmbiguous, "Attempts that ended with an unknown outcome (a COMMIT that may or may not have been applied).", "pool", "op")
	m.retryCalls = counter(NameRetryCalls, "Calls of retry.Do and retry.Tx, by final result.", "pool", "op", "result")

	m.descConns = desc(NameConnections, "Physical connections open (HikariCP TotalConnections).", "pool")
	m.descActive = desc(NameActive, "Connections in use by a borrower.", "pool")
	m.descIdle = desc(NameIdle, "Idle connections (in the pool, or parked idle in a database/sql DB's idle list).", "pool")
	m.descPending = desc(NamePending, "Goroutines waiting for a connection.", "pool")
	m.descMax = desc(NameMax, "MaxConns: the most connections the pool holds.", "pool")
	m.descMin = desc(NameMin, "MinIdleConns: idle connections the pool tries to keep ready.", "pool")
	winHelp := fmt.Sprintf(" (rolling window of %s, %d slots; see docs/metrics.md).", m.window, windowSlots)
	m.descAcquireMax = desc(NameAcquireSeconds+"_max", "Longest acquire wait, in seconds"+winHelp, "pool")
	m.descUsageMax = desc(NameUsageSeconds+"_max", "Longest connection usage, in seconds"+winHelp, "pool")
	m.descCreationMax = desc(NameCreationSeconds+"_max", "Longest connection creation, in seconds"+winHelp, "pool")
	m.descStmtMax = desc(NameStatementSeconds+"_max", "Longest statement, in seconds"+winHelp, "pool", "statement")
	m.descBypassed = desc(NameValidationsBypassed, "Acquires that handed out a connection without probing it (returned within AliveBypassWindow): Stats().Acquires minus successful probes.", "pool")
	m.descExhausted = desc(NameExhausted, "Acquires refused at once with ErrPoolExhausted (MaxWaiters goroutines already waiting).", "pool")
	m.descCacheFull = desc(NameStatementCacheFull, "Times a connection's statement cache was emptied after ER_MAX_PREPARED_STMT_COUNT_REACHED (1461).", "pool")
	m.descUp = desc(NameUp, "1 while the pool can open connections, 0 from a failed attempt until a connection opens again (Stats.DownSince).", "pool")
	m.descTenant = newTenantDescs(desc)
	m.descOverload = newOverloadDescs(desc)
	m.connectErrors = counter(NameConnectErrors, "Failed attempts to open a connection, by the phase that failed: dial, tls, handshake, authentication, init, timeout, probe.", "pool", "phase")

	empty := map[string]*poolMetrics{}
	m.pools.Store(&empty)
	m.registry = prometheus.NewRegistry()
	if err := m.registry.Register(m); err != nil {
		return nil, err
	}
	if opts.RuntimeCollectors {
		if err := m.registry.Register(collectors.NewGoCollector()); err != nil {
			return nil, err
		}
		if err := m.registry.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
			return nil, err
		}
	}
	m.trace = m.newTrace()
	return m, nil
}

// Metric names. The hikaricp_ ones are what HikariCP's Micrometer tracker renders in
// Prometheus; the sqlpool_ ones are this project's own. docs/metrics.md describes each.
const (
	NameConnections         = "hikaricp_connections"
	NameActive              = "hikaricp_connections_active"
	NameIdle                = "hikaricp_connections_idle"
	NamePending             = "hikaricp_connections_pending"
	NameMax                 = "hikaricp_connections_max"
	NameMin                 = "hikaricp_connections_min"
	NameTimeouts            = "hikaricp_connections_timeout_total"
	NameAcquireSeconds      = "hikaricp_connections_acquire_seconds"
	NameUsageSeconds        = "hikaricp_connections_usage_seconds"
	NameCreationSeconds     = "hikaricp_connections_creation_seconds"
	NameClosed              = "sqlpool_connections_closed_total"
	NameExhausted           = "sqlpool_acquires_exhausted_total"
	NameValidations         = "sqlpool_validations_total"
	NameValidationsBypassed = "sqlpool_validations_bypassed_total"
	NameReleasePlans        = "sqlpool_release_plans_total"
	NameReleaseRollbacks    = "sqlpool_release_rollbacks_total"
	NameReleaseResets       = "sqlpool_release_resets_total"
	NameLeakedStatements    = "sqlpool_leaked_statements_closed_total"
	NameStatementCacheFull  = "sqlpool_statement_cache_full_total"
	NameCancels             = "sqlpool_cancels_total"
	NameStatementSeconds    = "sqlpool_statement_seconds"
	NameStatementErrors     = "sqlpool_statement_errors_total"
	NameUp                  = "sqlpool_up"
	NameConnectErrors       = "sqlpool_connect_errors_total"

	NameRetryAttempts        = "sqlpool_retry_attempts_total"
	NameRetries              = "sqlpool_retries_total"
	NameRetryBudgetExhausted = "sqlpool_retry_budget_exhausted_total"
	NameRetryAmbiguous       = "sqlpool_retry_ambiguous_total"
	NameRetryCalls           = "sqlpool_retry_calls_total"
)

// ConnectPhases are the phase label values of sqlpool_connect_errors_total, the phases of
// pool.Trace.ConnectFailed; every pool has a series for each from its first event.
var ConnectPhases = [...]string{"dial", "tls", "handshake", "authentication", "init", "timeout", "probe"}

// connectFailed is pool.Trace.ConnectFailed: it counts sqlpool_connect_errors_total.
func (m *Metrics) connectFailed(name, phase string, _ error) {
	pm := m.poolFor(name)
	for i, ph := range ConnectPhases {
		if ph == phase {
			pm.connectErrs[i].Inc()
			return
		}
	}
	m.connectErrors.WithLabelValues(name, phase).Inc() // a phase added to package pool later
}

// closeReasons are the label values of sqlpool_connections_closed_total, in pool's order; the
// last is for a reason this package does not know yet.
var closeReasons = [...]pool.CloseReason{
	pool.CloseEvicted, pool.CloseMaxLifetime, pool.CloseIdleTimeout, pool.CloseValidationFailed,
	pool.CloseKeepaliveFailed, pool.CloseFatalError, pool.CloseDriverInvalid, pool.CloseResetFailed,
	pool.ClosePoolClosed, "other",
}

func closeIndex(r pool.CloseReason) int {
	switch r {
	case pool.CloseEvicted:
		return 0
	case pool.CloseMaxLifetime:
		return 1
	case pool.CloseIdleTimeout:
		return 2
	case pool.CloseValidationFailed:
		return 3
	case pool.CloseKeepaliveFailed:
		return 4
	case pool.CloseFatalError:
		return 5
	case pool.CloseDriverInvalid:
		return 6
	case pool.CloseResetFailed:
		return 7
	case pool.ClosePoolClosed:
		return 8
	}
	return len(closeReasons) - 1
}

// poolMetrics holds one pool's metric handles, looked up once when the pool is first seen.
type poolMetrics struct {
	name string
	src  atomic.Pointer[pool.Pool] // set by Register
	min  atomic.Int64              // MinIdleConns as resolved, read at Register

	acquire, usage, creation          *histogram
	acquireMax, usageMax, creationMax windowMax
	timeouts                          prometheus.Counter
	closed                            [len(closeReasons)]prometheus.Counter
	alive, dead                       prometheus.Counter
	plansOK, plansFailed              prometheus.Counter
	rollbacks, resets, leaked         prometheus.Counter
	connectErrs                       [len(ConnectPhases)]prometheus.Counter

	stmts *stmtTable // nil when statement timers are off

	retryOnce sync.Once
	retry     *retryObserver // retryObserver

	lastBypassed uint64 // guarded by Metrics.readMu: keeps the bypassed counter monotonic
}

// poolFor returns the handles of the named pool, creating them on its first event. With one
// pool (the common case) it is one atomic load and a string comparison that the pointer
// equality of the pool's Config.Name settles at once; otherwise a map lookup.
func (m *Metrics) poolFor(name string) *poolMetrics {
	if pm := m.single.Load(); pm != nil && pm.name == name {
		return pm
	}
	if pm := (*m.pools.Load())[name]; pm != nil {
		return pm
	}
	return m.addPool(name)
}

// publishPools stores the pools map, and the single pool when there is exactly one. The
// caller holds mu.
func (m *Metrics) publishPools(next map[string]*poolMetrics) {
	m.pools.Store(&next)
	var single *poolMetrics
	if len(next) == 1 {
		for _, pm := range next {
			single = pm
		}
	}
	m.single.Store(single)
}

// addPool is the slow path of poolFor: once per pool name.
func (m *Metrics) addPool(name string) *poolMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.pools.Load()
	if pm := old[name]; pm != nil {
		return pm
	}
	pm := &poolMetrics{
		name:        name,
		acquire:     newHistogram(m.acquireBuckets),
		usage:       newHistogram(m.usageBuckets),
		creation:    newHistogram(m.creationBuckets),
		timeouts:    m.timeouts.WithLabelValues(name),
		alive:       m.validations.WithLabelValues(name, "alive"),
		dead:        m.validations.WithLabelValues(name, "dead"),
		plansOK:     m.plans.WithLabelValues(name, "ok"),
		plansFailed: m.plans.WithLabelValues(name, "failed"),
		rollbacks:   m.rollbacks.WithLabelValues(name),
		resets:      m.resets.WithLabelValues(name),
		leaked:      m.leaked.WithLabelValues(name),
	}
	for i, ph := range ConnectPhases {
		pm.connectErrs[i] = m.connectErrors.WithLabelValues(name, ph)
	}
	for i, r := range closeReasons {
		if r == "other" {
			continue // created on first use only: a reason this package does not know
		}
		pm.closed[i] = m.closed.WithLabelValues(name, string(r))
	}
	now := m.clock.Now()
	for _, w := range []*windowMax{&pm.acquireMax, &pm.usageMax, &pm.creationMax} {
		w.lastRotate = now
	}
	if m.maxNames > 0 {
		pm.stmts = newStmtTable(m, name)
	}
	next := make(map[string]*poolMetrics, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[name] = pm
	m.publishPools(next)
	return pm
}

// Register adds p's gauges (connections, active, idle, pending, max, min, up) and its
// Stats-based counters, read at every scrape. A pool whose Config.Trace is m.Trace() is
// registered by pool.New already; call Register only for a pool with a Trace of its own that
// calls m's event methods. Register fails if another pool with the same name is registered.
func (m *Metrics) Register(p *pool.Pool) error {
	cfg := p.Config()
	pm := m.poolFor(cfg.Name)
	if !pm.src.CompareAndSwap(nil, p) && pm.src.Load() != p {
		return fmt.Errorf("metrics: another pool named %q is already registered", cfg.Name)
	}
	pm.min.Store(int64(max(cfg.MinIdleConns, 0)))
	return nil
}

// MustRegister is Register that panics on error.
func (m *Metrics) MustRegister(p *pool.Pool) {
	if err := m.Register(p); err != nil {
		panic(err)
	}
}

// Unregister removes every series of the pool named name (its gauges, timers, counters,
// statement timers, retry counters and per-host series), typically after the pool was closed. Events that
// arrive later for that name start its series again from zero; a RetryObserver made for that
// name before counts into the removed series, so make a new one.
func (m *Metrics) Unregister(name string) {
	m.mu.Lock()
	old := *m.pools.Load()
	if _, ok := old[name]; ok {
		next := make(map[string]*poolMetrics, len(old))
		for k, v := range old {
			if k != name {
				next[k] = v
			}
		}
		m.publishPools(next)
	}
	m.mu.Unlock()
	m.unregisterHosts(name)
	l := prometheus.Labels{"pool": name}
	for _, v := range []*prometheus.CounterVec{m.timeouts, m.closed, m.validations, m.plans, m.rollbacks,
		m.resets, m.leaked, m.cancels, m.stmtErrors, m.retryAttempts, m.retries, m.retryBudget, m.retryAmbiguous, m.retryCalls,
		m.connectErrors} {
		v.DeletePartialMatch(l)
	}
}

// Acquired is pool.Trace.Acquired.
func (m *Metrics) Acquired(name string, wait time.Duration) { m.trace.Acquired(name, wait) }

// AcquireTimedOut is pool.Trace.AcquireTimedOut. As in HikariCP, the wait of a timed-out acquire is
// also observed in the acquire histogram.
func (m *Metrics) AcquireTimedOut(name string, wait time.Duration) {
	pm := m.poolFor(name)
	pm.timeouts.Inc()
	pm.acquire.observe(wait)
	pm.acquireMax.record(wait)
}

// Released is pool.Trace.Released.
func (m *Metrics) Released(name string, usage time.Duration) { m.trace.Released(name, usage) }

// Created is pool.Trace.Created.
func (m *Metrics) Created(name string, dial time.Duration) {
	pm := m.poolFor(name)
	pm.creation.observe(dial)
	pm.creationMax.record(dial)
}

// Closed is pool.Trace.Closed.
func (m *Metrics) Closed(name string, reason pool.CloseReason) {
	pm := m.poolFor(name)
	i := closeIndex(reason)
	c := pm.closed[i]
	if c == nil { // a reason added to package pool after this one was written
		c = m.closed.WithLabelValues(name, "other")
	}
	c.Inc()
}

// Validated is pool.Trace.Validated (the probe's ctx and duration are not used).
func (m *Metrics) Validated(_ context.Context, name string, _ time.Duration, alive bool) {
	pm := m.poolFor(name)
	if alive {
		pm.alive.Inc()
	} else {
		pm.dead.Inc()
	}
}

// ReleasePlanRun is pool.Trace.ReleasePlanRun: statements counts the ROLLBACK (when rollback is
// true, it is the first) and the reset statements that ran.
func (m *Metrics) ReleasePlanRun(name string, rollback bool, statements int, ok bool) {
	pm := m.poolFor(name)
	if ok {
		pm.plansOK.Inc()
	} else {
		pm.plansFailed.Inc()
	}
	if rollback && statements > 0 {
		pm.rollbacks.Inc()
		statements--
	}
	if statements > 0 {
		pm.resets.Add(float64(statements))
	}
}

// ServerCancelled is pool.Trace.ServerCancelled: it counts sqlpool_cancels_total by outcome.
// It is not on the hot path (one call per cancelled statement), so the labelled child is
// looked up per call.
func (m *Metrics) ServerCancelled(name string, outcome pool.CancelOutcome, _ time.Duration) {
	m.cancels.WithLabelValues(name, string(outcome)).Inc()
}

// LeakedStatementClosed is pool.Trace.LeakedStatementClosed.
func (m *Metrics) LeakedStatementClosed(name string) {
	m.poolFor(name).leaked.Inc()
}
