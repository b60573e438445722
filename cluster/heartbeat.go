package cluster

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"
)

// heartbeat is one host's heartbeat goroutine while a pool is attached: every
// HeartbeatInterval, while the host is up, it pings the host over a connection of its own
// within HeartbeatTimeout. No answer in time marks the host down (a silent host); an error
// answer makes it suspect, for the monitor's check. A host the connector cannot ping (its
// driver's connections are not driver.Pinger) gets no heartbeat.
func (c *Connector) heartbeat(h *host) {
	defer c.wg.Done()
	var conn driver.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	t := time.NewTicker(c.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-c.done:
			return
		}
		c.mu.Lock()
		up := h.up
		c.mu.Unlock()
		if !up {
			if conn != nil {
				_ = conn.Close()
				conn = nil
			}
			continue
		}
		if conn == nil {
			// A dial within HeartbeatTimeout as well: a host that accepts TCP connections but
			// never answers the handshake is as silent as one that stopped answering pings.
			ctx, cancel := context.WithTimeout(c.ctx, c.cfg.HeartbeatTimeout)
			dc, err := h.conn.Connect(ctx)
			cancel()
			if c.ctx.Err() != nil {
				if dc != nil {
					_ = dc.Close()
				}
				return
			}
			if err != nil {
				c.heartbeatFailed(h, err)
				continue
			}
			if _, ok := dc.(driver.Pinger); !ok {
				_ = dc.Close()
				return
			}
			conn = dc
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.HeartbeatTimeout)
		err := conn.(driver.Pinger).Ping(ctx)
		cancel()
		if err == nil {
			continue
		}
		if c.ctx.Err() != nil {
			return
		}
		_ = conn.Close()
		conn = nil
		c.heartbeatFailed(h, err)
	}
}

// heartbeatFailed marks h down when the heartbeat got no answer within HeartbeatTimeout, and
// suspect (the monitor's check decides) when the answer was an error.
func (c *Connector) heartbeatFailed(h *host, err error) {
	if errors.Is(err, context.DeadlineExceeded) {
		c.markDown(h, fmt.Errorf("no answer to a heartbeat within HeartbeatTimeout %v: %w", c.cfg.HeartbeatTimeout, err))
		return
	}
	c.HostGone(h.name, err)
}

// ConnectTo implements pool.HostConnector: it opens a connection to the host called name (no
// Ready check), for the pool's server-side cancel. It fails at once for an unknown host or a
// host marked down: a KILL could not reach it.
func (c *Connector) ConnectTo(ctx context.Context, name string) (driver.Conn, error) {
	h := c.byName(name)
	if h == nil {
		return nil, fmt.Errorf("cluster: ConnectTo: no host called %q", name)
	}
	c.mu.Lock()
	up := h.up
	c.mu.Unlock()
	if !up {
		return nil, fmt.Errorf("cluster: ConnectTo: host %s is down", name)
	}
	return h.conn.Connect(ctx)
}
