package metrics_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sqlpool/sqlpool/cluster"
	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/metrics"
	"github.com/sqlpool/sqlpool/pool"
)

// Per-host series carry the labels pool and host and follow the connector; a host that refuses
// connections shows up 0 and its down counter.
func TestRegisterHosts(t *testing.T) {
	a, b := fakedb.New(), fakedb.New()
	b.SetDialError(syscall.ECONNREFUSED)
	c, err := cluster.New(cluster.Config{Strategy: cluster.RoundRobin, Logger: quiet,
		Hosts: []cluster.Host{{Name: "a:3306", Connector: a}, {Name: "b:3306", Connector: b}}})
	if err != nil {
		t.Fatal(err)
	}
	m := newMetrics(t, metrics.Options{})
	p, err := pool.New(c, pool.Config{Name: "hosts", MaxConns: 3, Trace: m.Trace(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := m.RegisterHosts(c); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for p.Stats().Total != 3 {
		if time.Now().After(deadline) {
			t.Fatal("pool never filled")
		}
		time.Sleep(5 * time.Millisecond)
	}
	want := `
# HELP sqlpool_host_connections Physical connections open to the host.
# TYPE sqlpool_host_connections gauge
sqlpool_host_connections{host="a:3306",pool="hosts"} 3
sqlpool_host_connections{host="b:3306",pool="hosts"} 0
# HELP sqlpool_host_down_total Times the host went down.
# TYPE sqlpool_host_down_total counter
sqlpool_host_down_total{host="a:3306",pool="hosts"} 0
sqlpool_host_down_total{host="b:3306",pool="hosts"} 1
# HELP sqlpool_host_up 1 while the host is in use, 0 while it is down (failed a dial, or a check after a connection reported the server gone).
# TYPE sqlpool_host_up gauge
sqlpool_host_up{host="a:3306",pool="hosts"} 1
sqlpool_host_up{host="b:3306",pool="hosts"} 0
# HELP sqlpool_all_hosts_down_total Times every host of the pool was down at once.
# TYPE sqlpool_all_hosts_down_total counter
sqlpool_all_hosts_down_total{pool="hosts"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), metrics.NameHostConnections,
		metrics.NameHostDown, metrics.NameHostUp, metrics.NameAllHostsDown); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{metrics.NameHostActive, metrics.NameHostIdle, metrics.NameHostCreated,
		metrics.NameHostClosed, metrics.NameHostRebalanced, metrics.NameHostDialErrors} {
		if n, err := testutil.GatherAndCount(m.Registry(), name); err != nil || n != 2 {
			t.Errorf("%s: %d series (%v), want 2", name, n, err)
		}
	}
	// The pool's own families keep their single label and count every host.
	m.MustRegister(p)
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP hikaricp_connections Physical connections open (HikariCP TotalConnections).
# TYPE hikaricp_connections gauge
hikaricp_connections{pool="hosts"} 3
`), metrics.NameConnections); err != nil {
		t.Fatal(err)
	}
}

// Two pools' connectors share one Metrics; Unregister drops one pool's host series.
func TestRegisterHostsTwoPools(t *testing.T) {
	m := newMetrics(t, metrics.Options{})
	var cs []*cluster.Connector
	for _, name := range []string{"p1", "p2"} {
		c, err := cluster.New(cluster.Config{Logger: quiet, Hosts: []cluster.Host{{Name: "h:1", Connector: fakedb.New()}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.RegisterHosts(c); err == nil {
			t.Fatal("RegisterHosts accepted a connector that serves no pool")
		}
		p, err := pool.New(c, pool.Config{Name: name, MaxConns: 1, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := m.RegisterHosts(c); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	if err := m.RegisterHosts(cs[0]); err != nil {
		t.Fatalf("registering the same connector again: %v", err)
	}
	if n, err := testutil.GatherAndCount(m.Registry(), metrics.NameHostUp); err != nil || n != 2 {
		t.Fatalf("%s: %d series (%v), want 2", metrics.NameHostUp, n, err)
	}
	m.Unregister("p1")
	if n, err := testutil.GatherAndCount(m.Registry(), metrics.NameHostUp); err != nil || n != 1 {
		t.Fatalf("%s after Unregister: %d series (%v), want 1", metrics.NameHostUp, n, err)
	}
}
