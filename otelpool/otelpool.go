// Package otelpool reports a sqlpool pool in OpenTelemetry's terms: the semantic conventions'
// connection-pool metrics (db.client.connection.*), and optional spans for the acquires that
// had to wait or probe. It is its own module, so that the library (package pool) depends on no
// telemetry SDK: the pool only calls the functions of its pool.Trace, which this package
// provides.
//
//	tel, err := otelpool.New(otelpool.Options{MeterProvider: mp, TracerProvider: tp})
//	p, err := pool.New(connector, pool.Config{Name: "orders", Trace: tel.Trace()}) // the one step
//
// tel.Trace() in Config.Trace is all a pool needs: pool.New hands the pool to tel, which
// observes its gauges from then on and stops at Close. With Options.Next set to package
// metrics' Trace, the same step instruments the pool for Prometheus too (gauges, retry
// observer and all).
//
// The metrics, as the semantic conventions name them (docs/database/database-metrics.md of
// open-telemetry/semantic-conventions; status: experimental), each with the attribute
// db.client.connection.pool.name (Config.Name):
//
//	db.client.connection.count            UpDownCounter  {connection}  + db.client.connection.state = idle | used
//	db.client.connection.max              UpDownCounter  {connection}  MaxConns
//	db.client.connection.idle.max         UpDownCounter  {connection}  MaxConns (every connection may be idle)
//	db.client.connection.idle.min         UpDownCounter  {connection}  MinIdleConns
//	db.client.connection.pending_requests UpDownCounter  {request}     Stats().Waiting
//	db.client.connection.timeouts         Counter        {timeout}     acquires that reached their deadline
//	db.client.connection.create_time      Histogram      s             dial, AfterConnect hook, baseline
//	db.client.connection.wait_time        Histogram      s             0 for an idle connection handed out at once
//	db.client.connection.use_time         Histogram      s             from hand-out to return
//
// and two of this project's own:
//
//	sqlpool.pool.up                       Gauge          1             1 while connections open, 0 from a failed attempt (Stats.DownSince)
//	sqlpool.pool.connect_errors           Counter        {error}       failed attempts to open a connection, + sqlpool.connect.phase
//
// The first five and sqlpool.pool.up are asynchronous (read from Stats and Config at each collection);
// the others are recorded as the pool's events happen. "idle" counts connections idle in the
// pool and those parked in database/sql's idle list (Stats().Idle), "used" the rest.
//
// Spans (with a TracerProvider): one span "sqlpool.acquire" per acquire that had to wait for a
// connection or probe one (pool.Trace.AcquireEnded), a child of the span in the acquire's ctx, with
// the attributes db.client.connection.pool.name, sqlpool.acquire.wait_ms, sqlpool.acquire.probes
// and, on failure, error.type and the span status. Acquires served from an idle connection
// without a probe make no span: they cost nothing to trace, and an operator looks for waits.
// Each liveness probe an acquire runs is a span "sqlpool.probe" (sqlpool.probe.alive) under the
// acquire's ctx, and, with Options.ReleasePlanSpans, each release that runs a plan a root span
// "sqlpool.release_plan" (sqlpool.release_plan.statements, sqlpool.release_plan.rollback; the
// borrower's span is gone when the connection comes back) (pool.Trace.Validated and
// ReleasePlanEnded).
package otelpool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqlpool/sqlpool/pool"
)

// ScopeName is the instrumentation scope of the meter and tracer.
const ScopeName = "github.com/sqlpool/sqlpool/otelpool"

// The semantic conventions' names.
const (
	MetricCount           = "db.client.connection.count"
	MetricMax             = "db.client.connection.max"
	MetricIdleMax         = "db.client.connection.idle.max"
	MetricIdleMin         = "db.client.connection.idle.min"
	MetricPendingRequests = "db.client.connection.pending_requests"
	MetricTimeouts        = "db.client.connection.timeouts"
	MetricCreateTime      = "db.client.connection.create_time"
	MetricWaitTime        = "db.client.connection.wait_time"
	MetricUseTime         = "db.client.connection.use_time"

	AttrPoolName = "db.client.connection.pool.name"
	AttrState    = "db.client.connection.state"
	StateIdle    = "idle"
	StateUsed    = "used"

	MetricUp            = "sqlpool.pool.up"
	MetricConnectErrors = "sqlpool.pool.connect_errors"
	AttrConnectPhase    = "sqlpool.connect.phase"

	SpanAcquire     = "sqlpool.acquire"
	SpanReleasePlan = "sqlpool.release_plan"
	SpanProbe       = "sqlpool.probe"
)

// Options configures New. The zero value uses neither metrics nor spans.
type Options struct {
	// MeterProvider receives the metrics. Zero value: no metrics.
	MeterProvider metric.MeterProvider
	// TracerProvider receives the acquire spans. Zero value: no spans.
	TracerProvider trace.TracerProvider
	// ReleasePlanSpans makes each release that runs a plan a root span (a trace of its own:
	// the borrower's span has ended when the connection comes back). Zero value: off, as the
	// span server's self-tracing leaves it (its own span writes run release plans, which would
	// make spans to write, and those have no ctx to mark).
	ReleasePlanSpans bool
	// Next, when set, receives every event too (for example package metrics' Prometheus
	// collector: metrics.Metrics.Trace()), so that one pool can report to both. Zero value:
	// none.
	Next *pool.Trace
}

// Telemetry reports pools to OpenTelemetry. Create it with New and put its Trace in
// pool.Config.Trace; one Telemetry may serve several pools (told apart by their names).
type Telemetry struct {
	trace     pool.Trace // own events chained with Options.Next's
	tracer    trace.Tracer
	planSpans bool
	meter     metric.Meter

	timeouts   metric.Int64Counter
	createTime metric.Float64Histogram
	waitTime   metric.Float64Histogram
	useTime    metric.Float64Histogram

	count, max, idleMax, idleMin, pending metric.Int64ObservableUpDownCounter
	up                                    metric.Int64ObservableGauge
	connectErrors                         metric.Int64Counter

	regMu sync.Mutex
	regs  map[*pool.Pool]*poolRegistration // Observe, Trace.Attached

	// attrs caches the attribute options per pool name: the last one used (the common case of
	// one pool), then a map.
	last   atomic.Pointer[poolAttrs]
	mu     sync.Mutex
	byPool map[string]*poolAttrs
}

type poolAttrs struct {
	name       string
	add        []metric.AddOption
	record     []metric.RecordOption
	idle, used []metric.ObserveOption
	observe    []metric.ObserveOption
	spanAttr   attribute.KeyValue
}

// New returns the Telemetry for opts; it fails only when the meter rejects an instrument.
func New(opts Options) (*Telemetry, error) {
	t := &Telemetry{planSpans: opts.ReleasePlanSpans, byPool: map[string]*poolAttrs{}, regs: map[*pool.Pool]*poolRegistration{}}
	if tp := opts.TracerProvider; tp != nil {
		t.tracer = tp.Tracer(ScopeName)
	}
	mp := opts.MeterProvider
	if mp == nil {
		t.trace = chain(t.own(), opts.Next)
		return t, nil
	}
	m := mp.Meter(ScopeName)
	t.meter = m
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	// Bucket boundaries in seconds, from 100 µs (an idle hand-out) to 10 s (an AcquireTimeout).
	buckets := metric.WithExplicitBucketBoundaries(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10)
	t.timeouts, err = m.Int64Counter(MetricTimeouts, metric.WithUnit("{timeout}"),
		metric.WithDescription("The number of connection timeouts that have occurred trying to obtain a connection from the pool"))
	add(err)
	t.createTime, err = m.Float64Histogram(MetricCreateTime, metric.WithUnit("s"), buckets,
		metric.WithDescription("The time it took to create a new connection"))
	add(err)
	t.waitTime, err = m.Float64Histogram(MetricWaitTime, metric.WithUnit("s"), buckets,
		metric.WithDescription("The time it took to obtain an open connection from the pool"))
	add(err)
	t.useTime, err = m.Float64Histogram(MetricUseTime, metric.WithUnit("s"), buckets,
		metric.WithDescription("The time between borrowing a connection and returning it to the pool"))
	add(err)
	t.count, err = m.Int64ObservableUpDownCounter(MetricCount, metric.WithUnit("{connection}"),
		metric.WithDescription("The number of connections that are currently in state described by the state attribute"))
	add(err)
	t.max, err = m.Int64ObservableUpDownCounter(MetricMax, metric.WithUnit("{connection}"),
		metric.WithDescription("The maximum number of open connections allowed"))
	add(err)
	t.idleMax, err = m.Int64ObservableUpDownCounter(MetricIdleMax, metric.WithUnit("{connection}"),
		metric.WithDescription("The maximum number of idle open connections allowed"))
	add(err)
	t.idleMin, err = m.Int64ObservableUpDownCounter(MetricIdleMin, metric.WithUnit("{connection}"),
		metric.WithDescription("The minimum number of idle open connections allowed"))
	add(err)
	t.pending, err = m.Int64ObservableUpDownCounter(MetricPendingRequests, metric.WithUnit("{request}"),
		metric.WithDescription("The number of current pending requests for an open connection"))
	add(err)
	t.up, err = m.Int64ObservableGauge(MetricUp, metric.WithUnit("1"),
		metric.WithDescription("1 while the pool can open connections, 0 from a failed attempt until a connection opens again"))
	add(err)
	t.connectErrors, err = m.Int64Counter(MetricConnectErrors, metric.WithUnit("{error}"),
		metric.WithDescription("Failed attempts to open a connection, by the phase that failed"))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	t.trace = chain(t.own(), opts.Next)
	return t, nil
}

// Trace returns the pool.Trace that reports to t (and to Options.Next): put it in
// pool.Config.Trace. Only the events t records or Next wants are set, so a pool pays nothing
// for the others.
func (t *Telemetry) Trace() *pool.Trace {
	tr := t.trace
	return &tr
}

// own is t's own part of its Trace: the events its instruments and tracer record.
func (t *Telemetry) own() *pool.Trace {
	var tr pool.Trace
	if t.waitTime != nil {
		tr.Acquired = t.acquired
	}
	if t.timeouts != nil {
		tr.AcquireTimedOut = t.acquireTimedOut
	}
	if t.useTime != nil {
		tr.Released = t.released
	}
	if t.createTime != nil {
		tr.Created = t.created
	}
	if t.meter != nil {
		tr.ConnectFailed = t.connectFailed
		tr.Attached = t.attached
		tr.Detached = t.detached
	}
	if t.tracer != nil {
		tr.AcquireEnded = t.acquireEnded
		tr.Validated = t.probeEnded
		if t.planSpans {
			tr.ReleasePlanEnded = t.releasePlanEnded
		}
	}
	return &tr
}

// Observe registers the asynchronous metrics (connection counts, limits, pending requests, up)
// of p, read from p.Stats() and p.Config() at each collection; they follow the pool's runtime
// resizes. A pool whose Config.Trace is t.Trace() is observed from pool.New to Close already,
// and Observe returns that registration. Call Unregister on the result before dropping a pool
// observed this way. Without a MeterProvider it does nothing and returns a Registration whose
// Unregister does nothing.
func (t *Telemetry) Observe(p *pool.Pool) (metric.Registration, error) {
	if t.meter == nil {
		return noRegistration{}, nil
	}
	a := t.attrs(p.Config().Name)
	t.regMu.Lock()
	defer t.regMu.Unlock()
	if r := t.regs[p]; r != nil {
		return r, nil
	}
	reg, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := p.Stats()
		cfg := p.Config()
		o.ObserveInt64(t.count, int64(st.Idle), a.idle...)
		o.ObserveInt64(t.count, int64(st.Active), a.used...)
		o.ObserveInt64(t.max, int64(st.MaxConns), a.observe...)
		o.ObserveInt64(t.idleMax, int64(cfg.MaxConns), a.observe...)
		o.ObserveInt64(t.idleMin, int64(cfg.MinIdleConns), a.observe...)
		o.ObserveInt64(t.pending, int64(st.Waiting), a.observe...)
		up := int64(1)
		if !st.DownSince.IsZero() {
			up = 0
		}
		o.ObserveInt64(t.up, up, a.observe...)
		return nil
	}, t.count, t.max, t.idleMax, t.idleMin, t.pending, t.up)
	if err != nil {
		return nil, err
	}
	r := &poolRegistration{Registration: reg, t: t, p: p}
	t.regs[p] = r
	return r, nil
}

// poolRegistration is one pool's callback; Unregister also forgets it, so that Observe may
// register the pool again.
type poolRegistration struct {
	metric.Registration
	t    *Telemetry
	p    *pool.Pool
	once sync.Once
	err  error
}

func (r *poolRegistration) Unregister() error {
	r.once.Do(func() {
		r.t.regMu.Lock()
		if r.t.regs[r.p] == r {
			delete(r.t.regs, r.p)
		}
		r.t.regMu.Unlock()
		r.err = r.Registration.Unregister()
	})
	return r.err
}

// attached observes a pool that pool.New made with t's Trace (pool.Trace.Attached).
func (t *Telemetry) attached(p *pool.Pool) {
	if _, err := t.Observe(p); err != nil {
		p.Config().Logger.Warn("sqlpool: otelpool: the pool's gauges are not observed", "pool", p.Config().Name, "error", err)
	}
}

// detached stops observing a closed pool (pool.Trace.Detached).
func (t *Telemetry) detached(p *pool.Pool) {
	t.regMu.Lock()
	r := t.regs[p]
	t.regMu.Unlock()
	if r != nil {
		_ = r.Unregister()
	}
}

// connectFailed counts sqlpool.pool.connect_errors (pool.Trace.ConnectFailed).
func (t *Telemetry) connectFailed(p, phase string, _ error) {
	kv := attribute.String(AttrPoolName, p)
	t.connectErrors.Add(context.Background(), 1, metric.WithAttributes(kv, attribute.String(AttrConnectPhase, phase)))
}

type noRegistration struct{ metric.Registration }

func (noRegistration) Unregister() error { return nil }

// attrs returns the cached attribute options of the pool called name.
func (t *Telemetry) attrs(name string) *poolAttrs {
	if a := t.last.Load(); a != nil && a.name == name {
		return a
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.byPool[name]
	if a == nil {
		kv := attribute.String(AttrPoolName, name)
		set := attribute.NewSet(kv)
		a = &poolAttrs{
			name:     name,
			add:      []metric.AddOption{metric.WithAttributeSet(set)},
			record:   []metric.RecordOption{metric.WithAttributeSet(set)},
			observe:  []metric.ObserveOption{metric.WithAttributeSet(set)},
			idle:     []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(kv, attribute.String(AttrState, StateIdle)))},
			used:     []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(kv, attribute.String(AttrState, StateUsed)))},
			spanAttr: kv,
		}
		t.byPool[name] = a
	}
	t.last.Store(a)
	return a
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// acquired records db.client.connection.wait_time.
func (t *Telemetry) acquired(p string, wait time.Duration) {
	t.waitTime.Record(context.Background(), seconds(wait), t.attrs(p).record...)
}

// acquireTimedOut counts db.client.connection.timeouts.
func (t *Telemetry) acquireTimedOut(p string, _ time.Duration) {
	t.timeouts.Add(context.Background(), 1, t.attrs(p).add...)
}

// released records db.client.connection.use_time.
func (t *Telemetry) released(p string, usage time.Duration) {
	t.useTime.Record(context.Background(), seconds(usage), t.attrs(p).record...)
}

// created records db.client.connection.create_time.
func (t *Telemetry) created(p string, dial time.Duration) {
	t.createTime.Record(context.Background(), seconds(dial), t.attrs(p).record...)
}

// acquireEnded makes one "sqlpool.acquire" span per acquire that waited or probed, ending now
// and starting waited ago.
func (t *Telemetry) acquireEnded(ctx context.Context, p string, waited time.Duration, probes int, err error) {
	end := time.Now()
	a := t.attrs(p)
	_, span := t.tracer.Start(ctx, SpanAcquire, trace.WithTimestamp(end.Add(-waited)),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(a.spanAttr,
			attribute.Float64("sqlpool.acquire.wait_ms", float64(waited)/float64(time.Millisecond)),
			attribute.Int("sqlpool.acquire.probes", probes)))
	if err != nil {
		span.SetAttributes(attribute.String("error.type", errorType(err)))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(trace.WithTimestamp(end))
}

// errorType is a low-cardinality class of an acquire error, for error.type.
func errorType(err error) string {
	switch {
	case errors.Is(err, pool.ErrAcquireTimeout):
		return "timeout"
	case errors.Is(err, pool.ErrPoolExhausted):
		return "pool_exhausted"
	case errors.Is(err, pool.ErrClosed):
		return "pool_closed"
	case errors.Is(err, pool.ErrHook):
		return "hook_failed"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "_OTHER"
}

// releasePlanEnded makes, with Options.ReleasePlanSpans, one root span
// "sqlpool.release_plan" per release that ran a plan (the borrower's span is gone by then).
func (t *Telemetry) releasePlanEnded(p string, took time.Duration, statements int, rollback bool, err error) {
	end := time.Now()
	_, span := t.tracer.Start(context.Background(), SpanReleasePlan, trace.WithTimestamp(end.Add(-took)),
		trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(t.attrs(p).spanAttr,
			attribute.Int("sqlpool.release_plan.statements", statements),
			attribute.Bool("sqlpool.release_plan.rollback", rollback)))
	if err != nil {
		span.SetAttributes(attribute.String("error.type", "reset_failed"))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(trace.WithTimestamp(end))
}

// probeEnded makes one span "sqlpool.probe" per liveness probe an acquire ran, under the
// span in the acquire's ctx.
func (t *Telemetry) probeEnded(ctx context.Context, p string, took time.Duration, alive bool) {
	end := time.Now()
	_, span := t.tracer.Start(ctx, SpanProbe, trace.WithTimestamp(end.Add(-took)),
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(t.attrs(p).spanAttr, attribute.Bool("sqlpool.probe.alive", alive)))
	if !alive {
		span.SetAttributes(attribute.String("error.type", "validation_failed"))
		span.SetStatus(codes.Error, "the connection failed its liveness probe")
	}
	span.End(trace.WithTimestamp(end))
}

// chain returns a Trace that calls own's function and then next's for each event (next's
// first for the span-making events, as Telemetry always did), or the one set alone, so that
// an event neither wants stays nil. own sets only the ten fields below; next may be nil.
func chain(own, next *pool.Trace) pool.Trace {
	if next == nil {
		return *own
	}
	tr := *next
	if f, g := own.Acquired, next.Acquired; f != nil {
		tr.Acquired = f
		if g != nil {
			tr.Acquired = func(p string, d time.Duration) { f(p, d); g(p, d) }
		}
	}
	if f, g := own.AcquireTimedOut, next.AcquireTimedOut; f != nil {
		tr.AcquireTimedOut = f
		if g != nil {
			tr.AcquireTimedOut = func(p string, d time.Duration) { f(p, d); g(p, d) }
		}
	}
	if f, g := own.Released, next.Released; f != nil {
		tr.Released = f
		if g != nil {
			tr.Released = func(p string, d time.Duration) { f(p, d); g(p, d) }
		}
	}
	if f, g := own.Created, next.Created; f != nil {
		tr.Created = f
		if g != nil {
			tr.Created = func(p string, d time.Duration) { f(p, d); g(p, d) }
		}
	}
	if f, g := own.AcquireEnded, next.AcquireEnded; f != nil {
		tr.AcquireEnded = f
		if g != nil {
			tr.AcquireEnded = func(ctx context.Context, p string, d time.Duration, n int, err error) {
				g(ctx, p, d, n, err)
				f(ctx, p, d, n, err)
			}
		}
	}
	if f, g := own.Validated, next.Validated; f != nil {
		tr.Validated = f
		if g != nil {
			tr.Validated = func(ctx context.Context, p string, d time.Duration, alive bool) {
				g(ctx, p, d, alive)
				f(ctx, p, d, alive)
			}
		}
	}
	if f, g := own.ConnectFailed, next.ConnectFailed; f != nil {
		tr.ConnectFailed = f
		if g != nil {
			tr.ConnectFailed = func(p, phase string, err error) { f(p, phase, err); g(p, phase, err) }
		}
	}
	if f, g := own.Attached, next.Attached; f != nil {
		tr.Attached = f
		if g != nil {
			tr.Attached = func(p *pool.Pool) { f(p); g(p) }
		}
	}
	if f, g := own.Detached, next.Detached; f != nil {
		tr.Detached = f
		if g != nil {
			tr.Detached = func(p *pool.Pool) { f(p); g(p) }
		}
	}
	if f, g := own.ReleasePlanEnded, next.ReleasePlanEnded; f != nil {
		tr.ReleasePlanEnded = f
		if g != nil {
			tr.ReleasePlanEnded = func(p string, d time.Duration, n int, rollback bool, err error) {
				g(p, d, n, rollback, err)
				f(p, d, n, rollback, err)
			}
		}
	}
	return tr
}
