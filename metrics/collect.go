package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
	for _, d := range []*prometheus.Desc{m.descAcquire, m.descUsage, m.descCreation, m.descStmt, m.descConns, m.descActive, m.descIdle, m.descPending, m.descMax,
		m.descMin, m.descAcquireMax, m.descUsageMax, m.descCreationMax, m.descStmtMax, m.descBypassed,
		m.descExhausted, m.descCacheFull, m.descUp} {
		ch <- d
	}
	for _, d := range append(m.descTenant.all(), m.descOverload.all()...) {
		ch <- d
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.timeouts, m.closed, m.validations,
		m.plans, m.rollbacks, m.resets, m.leaked, m.cancels, m.stmtErrors, m.retryAttempts,
		m.retries, m.retryBudget, m.retryAmbiguous, m.retryCalls, m.connectErrors}
}

// Collect implements prometheus.Collector. It reads each registered pool's Stats (which takes
// the pool's locks briefly, as a scrape may) and rotates the _max windows; it takes no lock a
// borrower takes.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	m.readMu.Lock()
	defer m.readMu.Unlock()
	now := m.clock.Now()
	for name, pm := range *m.pools.Load() {
		ch <- pm.acquire.metric(m.descAcquire, name)
		ch <- pm.usage.metric(m.descUsage, name)
		ch <- pm.creation.metric(m.descCreation, name)
		gauge(m.descAcquireMax, pm.acquireMax.read(now, m.window).Seconds(), name)
		gauge(m.descUsageMax, pm.usageMax.read(now, m.window).Seconds(), name)
		gauge(m.descCreationMax, pm.creationMax.read(now, m.window).Seconds(), name)
		if pm.stmts != nil {
			for _, s := range pm.stmts.all() {
				ch <- s.hist.metric(m.descStmt, name, s.name)
				gauge(m.descStmtMax, s.max.read(now, m.window).Seconds(), name, s.name)
			}
		}
		p := pm.src.Load()
		if p == nil {
			continue
		}
		st := p.Stats()
		gauge(m.descConns, float64(st.Total), name)
		gauge(m.descActive, float64(st.Active), name)
		gauge(m.descIdle, float64(st.Idle), name)
		gauge(m.descPending, float64(st.Waiting), name)
		gauge(m.descMax, float64(st.MaxConns), name)
		gauge(m.descMin, float64(pm.min.Load()), name)
		counter(m.descBypassed, float64(pm.bypassed(st.Acquires, st.Validations, st.ProbeFailures)), name)
		counter(m.descExhausted, float64(st.Exhausted), name)
		counter(m.descCacheFull, float64(st.StatementCacheFull), name)
		up := 1.0
		if !st.DownSince.IsZero() {
			up = 0
		}
		gauge(m.descUp, up, name)
		m.descTenant.collect(ch, name, st)
		m.descOverload.collect(ch, name, st)
	}
}

// bypassed returns the acquires that skipped the probe: acquires minus successful probes. A
// probe is counted just before the acquire it belongs to, so a scrape in between could see the
// difference dip by one; the result never goes below a value already reported, as a counter
// must not. The caller holds Metrics.readMu.
func (pm *poolMetrics) bypassed(acquires, validations, failures uint64) uint64 {
	ok := validations - min(failures, validations)
	var v uint64
	if acquires > ok {
		v = acquires - ok
	}
	v = max(v, pm.lastBypassed)
	pm.lastBypassed = v
	return v
}

// Registry returns the registry Handler serves, with m registered in it. Register more
// collectors in it (collectors.NewGoCollector(), ...) to serve them on the same endpoint.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler returns an http.Handler for /metrics: the Prometheus exposition of Registry().
// To serve these metrics from another registry instead, register m in it (m is a
// prometheus.Collector) and use promhttp there.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
