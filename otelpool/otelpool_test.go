package otelpool_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/internal/testutil"
	"github.com/sqlpool/sqlpool/otelpool"
	"github.com/sqlpool/sqlpool/pool"
)

// The semantic conventions' connection-pool table (open-telemetry/semantic-conventions,
// docs/database/database-metrics.md, "Connection pools"; experimental): name, instrument,
// unit, attributes.
var semconv = []struct {
	name, instrument, unit string
	attrs                  []string
}{
	{"db.client.connection.count", "UpDownCounter", "{connection}", []string{"db.client.connection.pool.name", "db.client.connection.state"}},
	{"db.client.connection.idle.max", "UpDownCounter", "{connection}", []string{"db.client.connection.pool.name"}},
	{"db.client.connection.idle.min", "UpDownCounter", "{connection}", []string{"db.client.connection.pool.name"}},
	{"db.client.connection.max", "UpDownCounter", "{connection}", []string{"db.client.connection.pool.name"}},
	{"db.client.connection.pending_requests", "UpDownCounter", "{request}", []string{"db.client.connection.pool.name"}},
	{"db.client.connection.timeouts", "Counter", "{timeout}", []string{"db.client.connection.pool.name"}},
	{"db.client.connection.create_time", "Histogram", "s", []string{"db.client.connection.pool.name"}},
	{"db.client.connection.wait_time", "Histogram", "s", []string{"db.client.connection.pool.name"}},
	{"db.client.connection.use_time", "Histogram", "s", []string{"db.client.connection.pool.name"}},
}

func instrumentOf(d metricdata.Aggregation) string {
	switch a := d.(type) {
	case metricdata.Sum[int64]:
		if a.IsMonotonic {
			return "Counter"
		}
		return "UpDownCounter"
	case metricdata.Sum[float64]:
		if a.IsMonotonic {
			return "Counter"
		}
		return "UpDownCounter"
	case metricdata.Histogram[float64], metricdata.Histogram[int64]:
		return "Histogram"
	}
	return "unknown"
}

func attrKeys(s attribute.Set) []string {
	var ks []string
	for _, kv := range s.ToSlice() {
		ks = append(ks, string(kv.Key))
	}
	sort.Strings(ks)
	return ks
}

// dataPoints returns the attribute sets and values (sums) or counts (histograms) of a metric.
func dataPoints(d metricdata.Aggregation) (sets []attribute.Set, vals []float64) {
	switch a := d.(type) {
	case metricdata.Sum[int64]:
		for _, p := range a.DataPoints {
			sets, vals = append(sets, p.Attributes), append(vals, float64(p.Value))
		}
	case metricdata.Histogram[float64]:
		for _, p := range a.DataPoints {
			sets, vals = append(sets, p.Attributes), append(vals, float64(p.Count))
		}
	}
	return
}

func TestMetricsMatchTheSemanticConventions(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())

	tel, err := otelpool.New(otelpool.Options{MeterProvider: mp, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(fakedb.New(), pool.Config{Name: "orders", MaxConns: 2, MinIdleConns: 2,
		AcquireTimeout: 200 * time.Millisecond, Trace: tel.Trace()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	reg, err := tel.Observe(p)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	testutil.Eventually(t, 5*time.Second, "two idle connections", func() bool { return p.Stats().Idle == 2 })

	ctx := context.Background()
	a, err := p.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan driver.Conn)
	go func() {
		c, err := p.Connect(ctx) // waits for b
		if err != nil {
			t.Error(err)
		}
		served <- c
	}()
	testutil.Eventually(t, 5*time.Second, "a waiter", func() bool { return p.Stats().Waiting == 1 })
	_ = b.Close()
	c := <-served
	if _, err := p.Connect(ctx); !errors.Is(err, pool.ErrAcquireTimeout) {
		t.Fatalf("third Connect = %v, want a timeout", err)
	}
	_ = c.Close()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelpool.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			got[m.Name] = m
		}
	}
	values := map[string]map[string]float64{} // metric → state ("" for none) → value
	for _, want := range semconv {
		m, ok := got[want.name]
		if !ok {
			t.Errorf("%s: not exported", want.name)
			continue
		}
		if m.Unit != want.unit {
			t.Errorf("%s: unit %q, want %q", want.name, m.Unit, want.unit)
		}
		if inst := instrumentOf(m.Data); inst != want.instrument {
			t.Errorf("%s: instrument %s, want %s", want.name, inst, want.instrument)
		}
		if m.Description == "" {
			t.Errorf("%s: no description", want.name)
		}
		sets, vals := dataPoints(m.Data)
		if len(sets) == 0 {
			t.Errorf("%s: no data points", want.name)
		}
		values[want.name] = map[string]float64{}
		for i, s := range sets {
			if ks := attrKeys(s); !equal(ks, want.attrs) {
				t.Errorf("%s: attributes %v, want %v", want.name, ks, want.attrs)
			}
			if v, _ := s.Value(otelpool.AttrPoolName); v.AsString() != "orders" {
				t.Errorf("%s: pool name %q", want.name, v.AsString())
			}
			state, _ := s.Value(otelpool.AttrState)
			values[want.name][state.AsString()] = vals[i]
		}
	}
	for name, want := range map[string]map[string]float64{
		"db.client.connection.count":            {"idle": 1, "used": 1},
		"db.client.connection.max":              {"": 2},
		"db.client.connection.idle.max":         {"": 2},
		"db.client.connection.idle.min":         {"": 2},
		"db.client.connection.pending_requests": {"": 0},
		"db.client.connection.timeouts":         {"": 1},
		"db.client.connection.create_time":      {"": 2}, // histogram counts
		"db.client.connection.wait_time":        {"": 3},
		"db.client.connection.use_time":         {"": 2},
	} {
		for state, v := range want {
			if got := values[name][state]; got != v {
				t.Errorf("%s{state=%q} = %v, want %v", name, state, got, v)
			}
		}
	}
	// A resize shows in the gauges at the next collection.
	if err := p.SetMaxConns(5); err != nil {
		t.Fatal(err)
	}
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == otelpool.MetricMax {
				if _, vals := dataPoints(m.Data); len(vals) != 1 || vals[0] != 5 {
					t.Errorf("max after SetMaxConns(5) = %v", vals)
				}
			}
		}
	}
	_ = a.Close()

	// Spans: the acquire that waited for b and the one that timed out; the two served from
	// idle connections made none.
	ss := spans.GetSpans()
	if len(ss) != 2 {
		t.Fatalf("%d spans, want 2 (the wait and the timeout): %v", len(ss), ss)
	}
	for _, s := range ss {
		if s.Name != otelpool.SpanAcquire {
			t.Errorf("span %q", s.Name)
		}
		attrs := attribute.NewSet(s.Attributes...)
		if v, _ := attrs.Value(otelpool.AttrPoolName); v.AsString() != "orders" {
			t.Errorf("span pool name %q", v.AsString())
		}
		if _, ok := attrs.Value("sqlpool.acquire.wait_ms"); !ok {
			t.Error("span without wait_ms")
		}
	}
	last := attribute.NewSet(ss[1].Attributes...)
	if v, _ := last.Value("error.type"); v.AsString() != "timeout" {
		t.Errorf("the timed-out acquire's span: error.type %q", v.AsString())
	}
	if d := ss[1].EndTime.Sub(ss[1].StartTime); d < 150*time.Millisecond {
		t.Errorf("the timed-out acquire's span lasts %v, want about AcquireTimeout", d)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The cost of telemetry on a clean borrow (Connect + Close of an idle connection, no wait, no
// probe): go test -run X -bench Borrow -benchmem ./otelpool
func BenchmarkBorrow(b *testing.B) {
	for _, mode := range []string{"off", "metrics", "metrics+tracing"} {
		b.Run(mode, func(b *testing.B) {
			cfg := pool.Config{MaxConns: 1}
			if mode != "off" {
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				defer mp.Shutdown(context.Background())
				opts := otelpool.Options{MeterProvider: mp}
				if mode == "metrics+tracing" {
					tp := sdktrace.NewTracerProvider()
					defer tp.Shutdown(context.Background())
					opts.TracerProvider = tp
				}
				tel, err := otelpool.New(opts)
				if err != nil {
					b.Fatal(err)
				}
				cfg.Trace = tel.Trace()
			}
			p, err := pool.New(fakedb.New(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				c, err := p.Connect(ctx)
				if err != nil {
					b.Fatal(err)
				}
				_ = c.Close()
			}
		})
	}
}

// Probes and release plans make spans: a probe under the acquire's span, a plan as a root span.
func TestProbeAndReleasePlanSpans(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	tel, err := otelpool.New(otelpool.Options{TracerProvider: tp, ReleasePlanSpans: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(fakedb.New(), pool.Config{Name: "orders", MaxConns: 1, AliveBypassWindow: -1, Trace: tel.Trace()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
	c, err := p.Connect(ctx) // probed: AliveBypassWindow is off
	if err != nil {
		t.Fatal(err)
	}
	tx, err := c.(driver.ConnBeginTx).BeginTx(ctx, driver.TxOptions{})
	if err != nil || tx == nil {
		t.Fatal(err)
	}
	_ = c.Close() // the open transaction: a ROLLBACK plan
	parent.End()
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans.GetSpans() {
		byName[s.Name] = s
	}
	probe, ok := byName[otelpool.SpanProbe]
	if !ok {
		t.Fatalf("no probe span in %v", names(spans.GetSpans()))
	}
	if probe.Parent.SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("the probe span is not under the request's span")
	}
	ps := attribute.NewSet(probe.Attributes...)
	if v, ok := ps.Value("sqlpool.probe.alive"); !ok || !v.AsBool() {
		t.Errorf("probe alive = %v (set %v)", v, ok)
	}
	plan, ok := byName[otelpool.SpanReleasePlan]
	if !ok {
		t.Fatalf("no release plan span in %v", names(spans.GetSpans()))
	}
	pa := attribute.NewSet(plan.Attributes...)
	if v, _ := pa.Value("sqlpool.release_plan.rollback"); !v.AsBool() || plan.Parent.IsValid() {
		t.Errorf("release plan span: rollback %v, parent %v; want a ROLLBACK plan as a root span", v, plan.Parent)
	}
	if acq, ok := byName[otelpool.SpanAcquire]; !ok {
		t.Error("no acquire span for the probed acquire")
	} else {
		as := attribute.NewSet(acq.Attributes...)
		if v, _ := as.Value("sqlpool.acquire.probes"); v.AsInt64() != 1 {
			t.Errorf("acquire span probes = %v, want 1", v)
		}
	}
}

func names(ss tracetest.SpanStubs) []string {
	var n []string
	for _, s := range ss {
		n = append(n, s.Name)
	}
	return n
}

// Options.Next receives every event, those Telemetry records too (after or, for the span
// events, before it) and those it does not.
func TestNextReceivesEveryEvent(t *testing.T) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	var mu sync.Mutex
	seen := map[string]int{}
	note := func(s string) { mu.Lock(); seen[s]++; mu.Unlock() }
	next := &pool.Trace{
		Acquired:        func(string, time.Duration) { note("acquired") },
		Released:        func(string, time.Duration) { note("released") },
		Created:         func(string, time.Duration) { note("created") },
		Closed:          func(string, pool.CloseReason) { note("closed") },
		AcquireEnded:    func(context.Context, string, time.Duration, int, error) { note("acquire_ended") },
		Validated:       func(context.Context, string, time.Duration, bool) { note("validated") },
		StatementDone:   func(context.Context, string, string, time.Duration, error) { note("statement") },
		ServerCancelled: func(string, pool.CancelOutcome, time.Duration) { note("cancelled") },
	}
	tel, err := otelpool.New(otelpool.Options{MeterProvider: mp, TracerProvider: tp, Next: next})
	if err != nil {
		t.Fatal(err)
	}
	tr := tel.Trace()
	if tr.Closed == nil || tr.StatementDone == nil || tr.ServerCancelled == nil || tr.ReleasePlanRun != nil {
		t.Fatal("Trace: want Next's events that Telemetry does not record passed on as they are, and no others")
	}
	tr.ServerCancelled("orders", pool.CancelEnded, time.Millisecond)
	p, err := pool.New(fakedb.New(), pool.Config{Name: "orders", MaxConns: 1, AliveBypassWindow: -1, Trace: tr})
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Connect(context.Background()) // probed: AliveBypassWindow is off
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.(driver.ExecerContext).ExecContext(context.Background(), "SELECT 1", nil); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	_ = p.Close()
	mu.Lock()
	defer mu.Unlock()
	for _, e := range []string{"acquired", "released", "created", "closed", "acquire_ended", "validated", "statement", "cancelled"} {
		if seen[e] == 0 {
			t.Errorf("Next was not told of %s (seen %v)", e, seen)
		}
	}
	if n := len(spans.GetSpans()); n < 2 {
		t.Errorf("%d spans; want the acquire's and the probe's", n)
	}
}
