package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlpool/sqlpool/pool"
)

// Overload control's series (docs/operations.md "Overload"), labelled pool, read from Stats at
// every scrape.
const (
	NameCongested     = "sqlpool_congested"
	NameLimit         = "sqlpool_connections_limit"
	NameLimitBaseline = "sqlpool_connections_limit_baseline_seconds"
	NameLimitChanges  = "sqlpool_connections_limit_changes_total"
	NameShed          = "sqlpool_acquires_shed_total"
)

// overloadDescs are overload control's series' descriptions.
type overloadDescs struct{ congested, limit, baseline, changes, shed *prometheus.Desc }

func newOverloadDescs(desc func(name, help string, labels ...string) *prometheus.Desc) overloadDescs {
	return overloadDescs{
		congested: desc(NameCongested, "1 while the pool is congested (its queue has not emptied and waiters lose their deadlines): newest waiter first, waits bounded (Stats.Congested).", "pool"),
		limit:     desc(NameLimit, "Connections allowed in circulation: the adaptive limit while engaged, else MaxConns (Stats.Limit).", "pool"),
		baseline:  desc(NameLimitBaseline, "The adaptive limit's baseline: the lowest mean borrow time measured since it engaged, in seconds; 0 when not measured (Stats.LimitBaseline).", "pool"),
		changes:   desc(NameLimitChanges, "Times the adaptive limit moved, engaged or let go (Stats.LimitChanges).", "pool"),
		shed:      desc(NameShed, "Acquires refused with ErrOverloaded: shed after a bounded wait, or failed at once as unable to finish before their deadline (Stats.Shed).", "pool"),
	}
}

func (d overloadDescs) all() []*prometheus.Desc {
	return []*prometheus.Desc{d.congested, d.limit, d.baseline, d.changes, d.shed}
}

// collect sends overload control's series of st.
func (d overloadDescs) collect(ch chan<- prometheus.Metric, name string, st pool.Stats) {
	congested := 0.0
	if st.Congested {
		congested = 1
	}
	ch <- prometheus.MustNewConstMetric(d.congested, prometheus.GaugeValue, congested, name)
	ch <- prometheus.MustNewConstMetric(d.limit, prometheus.GaugeValue, float64(st.Limit), name)
	ch <- prometheus.MustNewConstMetric(d.baseline, prometheus.GaugeValue, st.LimitBaseline.Seconds(), name)
	ch <- prometheus.MustNewConstMetric(d.changes, prometheus.CounterValue, float64(st.LimitChanges), name)
	ch <- prometheus.MustNewConstMetric(d.shed, prometheus.CounterValue, float64(st.Shed), name)
}
