package pool

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/fakedb"
)

// twoHosts is a minimal HostConnector: connections alternate between hosts "a" and "b".
type twoHosts struct {
	fakes    map[string]*fakedb.Connector
	n        atomic.Int64
	onlyA    atomic.Bool // new connections go to "a" only
	mu       sync.Mutex
	gone     []string
	attached *HostPool
	detached bool
}

func newTwoHosts() *twoHosts {
	return &twoHosts{fakes: map[string]*fakedb.Connector{"a": fakedb.New(), "b": fakedb.New()}}
}

func (h *twoHosts) Connect(ctx context.Context) (driver.Conn, error) {
	c, _, err := h.ConnectHost(ctx)
	return c, err
}
func (h *twoHosts) Driver() driver.Driver { return h.fakes["a"].Driver() }
func (h *twoHosts) ConnectHost(ctx context.Context) (driver.Conn, string, error) {
	name := "a"
	if h.n.Add(1)%2 == 0 && !h.onlyA.Load() {
		name = "b"
	}
	c, err := h.fakes[name].Connect(ctx)
	return c, name, err
}
func (h *twoHosts) ConnectTo(ctx context.Context, host string) (driver.Conn, error) {
	return h.fakes[host].Connect(ctx)
}
func (h *twoHosts) AttachPool(p *HostPool) error { h.attached = p; return nil }
func (h *twoHosts) HostGone(host string, err error) {
	h.mu.Lock()
	h.gone = append(h.gone, host)
	h.mu.Unlock()
}
func (h *twoHosts) DetachPool() { h.mu.Lock(); h.detached = true; h.mu.Unlock() }

func hostTotals(hp *HostPool) map[string]HostStats {
	m := map[string]HostStats{}
	for _, s := range hp.HostStats() {
		m[s.Host] = s
	}
	return m
}

// The hooks for package cluster: attach/detach, and through the HostPool the connector is given
// per-host Stats, per-host server gone, EvictHost and SetUnavailable.
func TestHostHooks(t *testing.T) {
	hc := newTwoHosts()
	p, err := New(hc, Config{MaxConns: 4, Logger: quiet, AcquireTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if hp := hc.attached; hp == nil || hp.p != p {
		t.Fatal("New did not attach the pool to its HostConnector")
	}
	if name := hc.attached.Name(); name != p.Config().Name {
		t.Fatalf("HostPool.Name() = %q, want the pool's name %q", name, p.Config().Name)
	}
	hp := hc.attached
	eventually(t, "4 connections", func() bool { return p.Stats().Total == 4 })
	st := hostTotals(hp)
	if st["a"].Total != 2 || st["b"].Total != 2 || st["a"].Idle != 2 || st["a"].Created != 2 {
		t.Fatalf("HostStats %+v, want 2 idle on each host", st)
	}

	// A server-gone error on a connection to "a" is reported for "a", and only "a"'s idle
	// connections are probed on their next acquire.
	c1 := mustConnect(t, p)
	c2 := mustConnect(t, p)
	c3 := mustConnect(t, p)
	c4 := mustConnect(t, p)
	var onA *conn
	for _, c := range []*conn{c1, c2, c3, c4} {
		if c.e.host.name == "a" {
			onA = c
		}
	}
	onA.e.conn.(*fakedb.Conn).FailNext(io.EOF)
	if _, err := onA.ExecContext(context.Background(), "DO 1", nil); !errors.Is(err, io.EOF) {
		t.Fatalf("exec: %v", err)
	}
	hc.mu.Lock()
	gone := append([]string(nil), hc.gone...)
	hc.mu.Unlock()
	if len(gone) != 1 || gone[0] != "a" {
		t.Fatalf("HostGone calls %v, want [a]", gone)
	}
	if p.goneAt.Load() != 0 {
		t.Fatal("a per-host server-gone error set the whole pool's mark")
	}
	for _, c := range []*conn{c1, c2, c3, c4} {
		_ = c.Close()
	}
	eventually(t, "the failed connection replaced", func() bool { return p.Stats().Total == 4 && p.Stats().Idle == 4 })
	pingsA, pingsB := hc.fakes["a"].Pings.Load(), hc.fakes["b"].Pings.Load()
	var held []*conn
	for i := 0; i < 4; i++ {
		held = append(held, mustConnect(t, p))
	}
	if d := hc.fakes["b"].Pings.Load() - pingsB; d != 0 {
		t.Errorf("%d probes on host b after a server-gone error on host a, want 0", d)
	}
	if d := hc.fakes["a"].Pings.Load() - pingsA; d == 0 {
		t.Errorf("no probe on host a's older connection after its server-gone error")
	}

	// EvictHost: busy connections are marked, idle ones closed at once. (Replacements go to
	// "a", so that the creator cannot refill "b" while we look.)
	hc.onlyA.Store(true)
	_ = held[0].Close()
	_ = held[1].Close()
	if n := hp.EvictHost("b", -1); n != 2 {
		t.Fatalf("EvictHost(b) closed or marked %d connections, want 2", n)
	}
	st = hostTotals(hp)
	if st["b"].Idle != 0 || st["b"].Evicting != st["b"].Total {
		t.Fatalf("after EvictHost(b): %+v, want no idle and every remaining connection marked", st["b"])
	}
	for _, c := range held[2:] {
		_ = c.Close()
	}
	if st := hostTotals(hp)["b"]; st.Evicting != 0 {
		t.Fatalf("marked connections not closed on release: %+v", st)
	}

	// SetUnavailable: an acquire that would wait fails at once; nil lifts it.
	eventually(t, "pool refilled", func() bool { return p.Stats().Idle == 4 })
	for i := 0; i < 4; i++ {
		held[i] = mustConnect(t, p)
	}
	down := errors.New("every host is down")
	hp.SetUnavailable(down)
	start := time.Now()
	_, err = p.Connect(context.Background())
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, down) {
		t.Fatalf("Connect while unavailable: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Connect while unavailable took %v", d)
	}
	hp.SetUnavailable(nil)
	_ = held[0].Close()
	c, err := p.Connect(context.Background())
	if err != nil {
		t.Fatalf("Connect after SetUnavailable(nil): %v", err)
	}
	_ = c.Close()
	for _, c := range held[1:] {
		_ = c.Close()
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	hc.mu.Lock()
	detached := hc.detached
	hc.mu.Unlock()
	if !detached {
		t.Fatal("Close did not detach the pool from its HostConnector")
	}
}

// A plain connector: no hosts, HostStats empty, server gone is the pool's.
func TestHostHooksSingleHost(t *testing.T) {
	p, _ := newPool(t, Config{MaxConns: 1})
	eventually(t, "1 connection", func() bool { return p.Stats().Total == 1 })
	if hs := p.hostStats(); hs != nil {
		t.Fatalf("HostStats with a plain connector: %+v, want nil", hs)
	}
	if n := p.evictHost("x", -1); n != 0 {
		t.Fatalf("EvictHost of an unknown host: %d", n)
	}
	c := mustConnect(t, p)
	if c.e.host != nil {
		t.Fatal("a plain connector's connection has a host")
	}
	c.e.conn.(*fakedb.Conn).FailNext(io.EOF)
	_, _ = c.ExecContext(context.Background(), "DO 1", nil)
	if p.goneAt.Load() == 0 {
		t.Fatal("server gone on a plain connector did not set the pool's mark")
	}
	_ = c.Close()
}
