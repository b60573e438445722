package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/cluster"
	"github.com/sqlpool/sqlpool/internal/fakedb"
)

// A host that stops answering (pings never return; dials still succeed, as a frozen process's
// kernel still accepts) is marked down by the heartbeat within HeartbeatInterval +
// HeartbeatTimeout and its connections are evicted; it comes back when it answers again. With
// heartbeats off nothing notices it.
func TestHeartbeatSilentHost(t *testing.T) {
	for _, off := range []bool{false, true} {
		b := newBed(t, 2, 4, cluster.RoundRobin, func(cfg *cluster.Config, _ []*fakedb.Connector) {
			cfg.HeartbeatInterval, cfg.HeartbeatTimeout = 20*time.Millisecond, 50*time.Millisecond
			if off {
				cfg.HeartbeatInterval = -1
			}
		})
		b.waitFull(t, 4)
		b.fakes[1].SetPingBlock(true)
		start := time.Now()
		if off {
			time.Sleep(300 * time.Millisecond) // nothing to wait for: the host must stay up
			if !b.c.Hosts()[1].Up {
				t.Fatal("heartbeats off: the silent host was marked down")
			}
			b.fakes[1].SetPingBlock(false)
			continue
		}
		eventually(t, "the silent host marked down", func() bool { return !b.c.Hosts()[1].Up })
		took := time.Since(start)
		t.Logf("silent host marked down %v after it stopped answering (interval 20ms, timeout 50ms)", took.Round(time.Millisecond))
		if took > 500*time.Millisecond {
			t.Errorf("silent host detected after %v, want within about interval+timeout (70ms; 500ms allowed)", took)
		}
		if n := b.log.count("sqlpool: host down"); n != 1 {
			t.Errorf("%d host-down log lines, want 1", n)
		}
		eventually(t, "the silent host's connections evicted", func() bool { return b.totals()["h2"] == 0 })
		if _, err := b.c.ConnectTo(context.Background(), "h2"); err == nil {
			t.Error("ConnectTo a host marked down succeeded; want an error")
		}
		if _, err := b.c.ConnectTo(context.Background(), "nope"); err == nil {
			t.Error("ConnectTo an unknown host succeeded; want an error")
		}
		b.fakes[1].SetPingBlock(false)
		eventually(t, "the host back once it answers", func() bool { return b.c.Hosts()[1].Up })
		dc, err := b.c.ConnectTo(context.Background(), "h2")
		if err != nil {
			t.Fatalf("ConnectTo an up host: %v", err)
		}
		_ = dc.Close()
	}
}
