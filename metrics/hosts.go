package metrics

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlpool/sqlpool/cluster"
)

// Per-host metric names (package cluster), labelled pool and host. docs/metrics.md and
// docs/cluster.md describe them.
const (
	NameHostUp                   = "sqlpool_host_up"
	NameHostConnections          = "sqlpool_host_connections"
	NameHostActive               = "sqlpool_host_connections_active"
	NameHostIdle                 = "sqlpool_host_connections_idle"
	NameHostCreated              = "sqlpool_host_connections_created_total"
	NameHostClosed               = "sqlpool_host_connections_closed_total"
	NameHostDown                 = "sqlpool_host_down_total"
	NameHostRebalanced           = "sqlpool_host_rebalanced_total"
	NameHostDialErrors           = "sqlpool_host_dial_errors_total"
	NameAllHostsDown             = "sqlpool_all_hosts_down_total"
	hostLabelPool, hostLabelHost = "pool", "host"
)

// hostCollector reads the registered cluster.Connectors' Hosts at every scrape. One serves every
// connector of a Metrics (the series differ by their pool label).
type hostCollector struct {
	mu                                      sync.Mutex
	cs                                      []*cluster.Connector
	up, conns, active, idle                 *prometheus.Desc
	created, closed, down, rebalanced, dial *prometheus.Desc
	allDown                                 *prometheus.Desc
}

// RegisterHosts adds per-host series for the pool that c serves (attach c with pool.New
// first; it fails otherwise, or when a connector of a pool with the same name is registered): sqlpool_host_up, sqlpool_host_connections{,_active,_idle},
// sqlpool_host_connections_{created,closed}_total, sqlpool_host_down_total,
// sqlpool_host_rebalanced_total and sqlpool_host_dial_errors_total, labelled pool and host,
// and sqlpool_all_hosts_down_total labelled pool. They are read from c at every scrape. The
// hikaricp_* families of the pool keep their labels (pool only) and count all hosts together.
func (m *Metrics) RegisterHosts(c *cluster.Connector) error {
	name := c.PoolName()
	if name == "" {
		return fmt.Errorf("metrics: RegisterHosts: the connector serves no pool yet; pass it to pool.New first")
	}
	m.hostsMu.Lock()
	defer m.hostsMu.Unlock()
	if hc := m.hosts; hc != nil {
		hc.mu.Lock()
		defer hc.mu.Unlock()
		for _, o := range hc.cs {
			if o == c {
				return nil
			}
			if o.PoolName() == name {
				return fmt.Errorf("metrics: RegisterHosts: the hosts of another pool named %q are already registered", name)
			}
		}
		hc.cs = append(hc.cs, c)
		return nil
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, m.constLabels)
	}
	l := []string{hostLabelPool, hostLabelHost}
	hc := &hostCollector{
		cs:         []*cluster.Connector{c},
		up:         desc(NameHostUp, "1 while the host is in use, 0 while it is down (failed a dial, or a check after a connection reported the server gone).", l...),
		conns:      desc(NameHostConnections, "Physical connections open to the host.", l...),
		active:     desc(NameHostActive, "Connections to the host in use by a borrower.", l...),
		idle:       desc(NameHostIdle, "Idle connections to the host.", l...),
		created:    desc(NameHostCreated, "Connections opened to the host.", l...),
		closed:     desc(NameHostClosed, "Connections to the host closed.", l...),
		down:       desc(NameHostDown, "Times the host went down.", l...),
		rebalanced: desc(NameHostRebalanced, "Connections moved away from the host by rebalancing.", l...),
		dial:       desc(NameHostDialErrors, "Failed dials, readiness checks and probes of the host.", l...),
		allDown:    desc(NameAllHostsDown, "Times every host of the pool was down at once.", hostLabelPool),
	}
	if err := m.registry.Register(hc); err != nil {
		return err
	}
	m.hosts = hc
	return nil
}

// unregisterHosts drops the connectors of the pool named name (Unregister).
func (m *Metrics) unregisterHosts(name string) {
	m.hostsMu.Lock()
	hc := m.hosts
	m.hostsMu.Unlock()
	if hc == nil {
		return
	}
	hc.mu.Lock()
	defer hc.mu.Unlock()
	kept := hc.cs[:0]
	for _, c := range hc.cs {
		if c.PoolName() != name {
			kept = append(kept, c)
		}
	}
	hc.cs = kept
}

func (h *hostCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{h.up, h.conns, h.active, h.idle, h.created, h.closed, h.down, h.rebalanced, h.dial, h.allDown} {
		ch <- d
	}
}

func (h *hostCollector) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	cs := append([]*cluster.Connector(nil), h.cs...)
	h.mu.Unlock()
	for _, c := range cs {
		h.collect(ch, c)
	}
}

func (h *hostCollector) collect(ch chan<- prometheus.Metric, c *cluster.Connector) {
	name := c.PoolName()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	for _, s := range c.Hosts() {
		up := 0.0
		if s.Up {
			up = 1
		}
		gauge(h.up, up, name, s.Name)
		gauge(h.conns, float64(s.Conns.Total), name, s.Name)
		gauge(h.active, float64(s.Conns.Active), name, s.Name)
		gauge(h.idle, float64(s.Conns.Idle), name, s.Name)
		counter(h.created, float64(s.Conns.Created), name, s.Name)
		counter(h.closed, float64(s.Conns.Closed), name, s.Name)
		counter(h.down, float64(s.Downs), name, s.Name)
		counter(h.rebalanced, float64(s.Rebalanced), name, s.Name)
		counter(h.dial, float64(s.DialErrors), name, s.Name)
	}
	counter(h.allDown, float64(c.AllHostsDownEvents()), name)
}
