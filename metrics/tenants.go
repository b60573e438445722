package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlpool/sqlpool/pool"
)

// Per-tenant series of a pool with pool.Config.Tenants, labelled pool and tenant: one series per
// configured key plus tenant="" for every other key (and none), so their number is bounded by
// the configuration, never by the keys callers send. Read from Stats().Tenants at every scrape.
const (
	NameTenantHeld           = "sqlpool_tenant_connections_held"
	NameTenantPending        = "sqlpool_tenant_pending"
	NameTenantAcquires       = "sqlpool_tenant_acquires_total"
	NameTenantAcquiresFailed = "sqlpool_tenant_acquires_failed_total"
)

// tenantDescs are the per-tenant series' descriptions.
type tenantDescs struct{ held, pending, acquires, failed *prometheus.Desc }

func newTenantDescs(desc func(name, help string, labels ...string) *prometheus.Desc) tenantDescs {
	return tenantDescs{
		held:     desc(NameTenantHeld, "Connections held by the tenant (Stats.Tenants Held); tenant=\"\" is every unlisted key.", "pool", "tenant"),
		pending:  desc(NameTenantPending, "Goroutines of the tenant waiting for a connection.", "pool", "tenant"),
		acquires: desc(NameTenantAcquires, "Connections handed out to the tenant.", "pool", "tenant"),
		failed:   desc(NameTenantAcquiresFailed, "Acquires of the tenant that timed out or were shed.", "pool", "tenant"),
	}
}

func (d tenantDescs) all() []*prometheus.Desc {
	return []*prometheus.Desc{d.held, d.pending, d.acquires, d.failed}
}

// collect sends the per-tenant series of st (none without tenants).
func (d tenantDescs) collect(ch chan<- prometheus.Metric, name string, st pool.Stats) {
	for _, ts := range st.Tenants {
		ch <- prometheus.MustNewConstMetric(d.held, prometheus.GaugeValue, float64(ts.Held), name, ts.Key)
		ch <- prometheus.MustNewConstMetric(d.pending, prometheus.GaugeValue, float64(ts.Waiting), name, ts.Key)
		ch <- prometheus.MustNewConstMetric(d.acquires, prometheus.CounterValue, float64(ts.Acquires), name, ts.Key)
		ch <- prometheus.MustNewConstMetric(d.failed, prometheus.CounterValue, float64(ts.Failed), name, ts.Key)
	}
}
