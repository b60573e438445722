package metrics_test

import (
	"strings"
	"testing"

	"github.com/sqlpool/sqlpool/metrics"
	"github.com/sqlpool/sqlpool/pool"
)

// A pool with Config.Tenants serves one series per configured key plus tenant="" for every
// other key: a key a caller makes up adds no series.
func TestTenantSeriesBounded(t *testing.T) {
	m := newMetrics(t, metrics.Options{})
	p, _ := newFakePool(t, pool.Config{Name: "ten", MaxConns: 2, Trace: m.Trace(), Tenants: map[string]pool.Tenant{"gold": {Weight: 4}}})
	m.MustRegister(p)
	for _, key := range []string{"gold", "made-up-1", "made-up-2"} {
		c, err := p.Connect(pool.WithTenant(bg, key))
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}
	body := scrape(t, m)
	for _, want := range []string{`sqlpool_tenant_acquires_total{pool="ten",tenant="gold"} 1`,
		`sqlpool_tenant_acquires_total{pool="ten",tenant=""} 2`, `sqlpool_tenant_connections_held{pool="ten",tenant="gold"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(body, "made-up") {
		t.Error("an unlisted tenant key became a label value")
	}
}
