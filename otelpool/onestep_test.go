package otelpool_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/internal/testutil"
	"github.com/sqlpool/sqlpool/metrics"
	"github.com/sqlpool/sqlpool/otelpool"
	"github.com/sqlpool/sqlpool/pool"
)

// tel.Trace() in Config.Trace, with package metrics' Trace as Next, is the one step that
// instruments a pool for both: every asynchronous instrument of the semantic conventions' table
// (the others have data from their first event) and sqlpool.pool.up have data points without
// Observe, the Prometheus gauges are served
// without Register, and Close stops both.
func TestOneStepInstrumentsBoth(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	m, err := metrics.New(metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tel, err := otelpool.New(otelpool.Options{MeterProvider: mp, Next: m.Trace()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(fakedb.New(), pool.Config{Name: "orders", MaxConns: 2, Trace: tel.Trace()})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "two idle connections", func() bool { return p.Stats().Idle == 2 })

	got := collect(t, reader)
	for _, name := range []string{otelpool.MetricCount, otelpool.MetricMax, otelpool.MetricIdleMax,
		otelpool.MetricIdleMin, otelpool.MetricPendingRequests, otelpool.MetricCreateTime} {
		if _, ok := got[name]; !ok {
			t.Errorf("%s: not exported by the one step", name)
		}
	}
	if up, ok := got[otelpool.MetricUp]; !ok {
		t.Errorf("%s: not exported", otelpool.MetricUp)
	} else if _, vals := gaugePoints(up.Data); len(vals) != 1 || vals[0] != 1 {
		t.Errorf("%s = %v; want 1", otelpool.MetricUp, vals)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{`hikaricp_connections{pool="orders"} 2`, `sqlpool_up{pool="orders"} 1`,
		`sqlpool_retry_calls_total{op="tx",pool="orders",result="ok"} 0`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("Prometheus scrape has no %q", want)
		}
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := collect(t, reader)[otelpool.MetricMax]; ok {
		t.Errorf("%s still observed after Close", otelpool.MetricMax)
	}
}

func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if _, isSum := m.Data.(metricdata.Sum[int64]); isSum || m.Name == otelpool.MetricUp {
				if sets, _ := gaugePoints(m.Data); len(sets) == 0 {
					continue // an observable instrument with no callback left
				}
			}
			got[m.Name] = m
		}
	}
	return got
}

func gaugePoints(d metricdata.Aggregation) (sets []int, vals []float64) {
	switch a := d.(type) {
	case metricdata.Gauge[int64]:
		for i, dp := range a.DataPoints {
			sets, vals = append(sets, i), append(vals, float64(dp.Value))
		}
	case metricdata.Sum[int64]:
		for i, dp := range a.DataPoints {
			sets, vals = append(sets, i), append(vals, float64(dp.Value))
		}
	}
	return sets, vals
}
