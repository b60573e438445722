// Package cluster is a multi-host connector for package pool: one pool over several database
// hosts (a MariaDB Galera cluster, MySQL Group Replication, a primary with fallbacks), with
// failover and load balancing.
//
// A *Connector holds one driver.Connector per host (go-sql-driver/mysql's, see MySQLHosts) and
// picks a host for every connection the pool opens, by Strategy: Sequential (the first healthy
// host in order: a primary with fallbacks), RoundRobin or LeastConnections (spread over equal
// nodes). It is a pool.HostConnector: give it to pool.New and the pool records each connection's
// host, reports errors that say a server went away (package validate: server gone, 1047 "WSREP
// has not yet prepared node", read-only failover codes) per host, and lets the connector evict
// one host's connections.
//
// A host is marked down when a dial to it fails, or when one of its connections reported the
// server gone and a check (a fresh dial plus Config.Ready) fails too. A down host gets no new
// connections, its pooled connections are closed (idle ones at once, busy ones when returned),
// and it is probed back in the background (ProbeInterval doubling up to MaxProbeInterval, with
// jitter). When it comes back, connections move to it over RebalancePeriod, one at a time at
// jittered moments, never all at once. When every host is down the pool fails fast: an acquire
// that finds no idle connection returns an error matching ErrAllHostsDown (and
// pool.ErrUnavailable) at once instead of waiting for AcquireTimeout.
//
// The events a user alerts on are logged once per transition, never per connection: "host
// down" (Warn), "host back" (Info), "all hosts down" (Error) and "hosts available again"
// (Info). Package metrics exports per-host figures (Metrics.RegisterHosts).
//
// Read/write splitting is not done here: each connection keeps its session (a transaction, a
// temporary table) on one host, and database/sql has no way to say "this query may go to a
// replica". Use two pools — one Sequential over the primary and its fallbacks for writes, one
// RoundRobin over the replicas for reads — and choose the *sql.DB per call.
package cluster

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/pool"
)

// Strategy says which healthy host a new connection goes to.
type Strategy int

const (
	// Sequential puts every connection on the first healthy host in Config.Hosts order: a
	// primary with fallbacks. When an earlier host comes back, connections move back to it
	// over RebalancePeriod.
	Sequential Strategy = iota
	// RoundRobin takes the healthy hosts in turn, skipping a host that already holds more than
	// its even share of the pool's connections, so that open connections per host stay within
	// one of even.
	RoundRobin
	// LeastConnections puts a new connection on the healthy host with the fewest of the pool's
	// open connections; ties are broken in turn.
	LeastConnections
)

// String is the strategy's name: sequential, round-robin or least-connections.
func (s Strategy) String() string {
	switch s {
	case Sequential:
		return "sequential"
	case RoundRobin:
		return "round-robin"
	case LeastConnections:
		return "least-connections"
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// Defaults of Config.
const (
	DefaultHostTimeout       = 5 * time.Second
	DefaultProbeInterval     = 250 * time.Millisecond
	DefaultMaxProbeInterval  = time.Second
	DefaultRebalancePeriod   = 30 * time.Second
	DefaultHeartbeatInterval = 500 * time.Millisecond
	DefaultHeartbeatTimeout  = time.Second
)

// Host is one database host.
type Host struct {
	// Name labels the host in Stats, metrics and logs, and must be unique; for MySQLHosts it
	// is the DSN's address (host:port).
	Name string
	// Connector opens connections to the host.
	Connector driver.Connector
}

// MySQLHosts returns one Host per go-sql-driver/mysql DSN, named by the DSN's address.
func MySQLHosts(dsns ...string) ([]Host, error) {
	hosts := make([]Host, 0, len(dsns))
	for i, dsn := range dsns {
		mc, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("cluster: MySQLHosts: DSN %d: %w", i+1, err)
		}
		conn, err := mysql.NewConnector(mc)
		if err != nil {
			return nil, fmt.Errorf("cluster: MySQLHosts: DSN %d: %w", i+1, err)
		}
		hosts = append(hosts, Host{Name: mc.Addr, Connector: conn})
	}
	return hosts, nil
}

// Config configures a Connector. Zero values mean the defaults named in each field.
type Config struct {
	// Hosts are the hosts, in order (the order matters to Sequential). At least one.
	Hosts []Host
	// Strategy picks the host of each new connection. Zero value: Sequential.
	Strategy Strategy
	// Ready checks a new connection before it is handed to the pool, and a probe connection
	// before a down host is taken back; an error counts as the host failing. Zero value: none
	// (a successful dial is enough). Use GaleraReady for MariaDB Galera or Percona XtraDB
	// Cluster: a node that lost quorum still accepts connections and answers pings.
	Ready func(ctx context.Context, conn driver.Conn) error
	// HostTimeout bounds one attempt on one host: its dial plus Ready. A host that takes
	// longer counts as failed, and the next host is tried. Zero value: 5 s.
	HostTimeout time.Duration
	// ProbeInterval is how long after it went down a host is first probed (a dial plus Ready);
	// the wait doubles after each failed probe up to MaxProbeInterval. Both get ±20 % jitter.
	// Zero values: 250 ms and 1 s. A host comes back at most MaxProbeInterval (plus jitter
	// and the probe itself) after it is ready.
	ProbeInterval    time.Duration
	MaxProbeInterval time.Duration
	// RebalancePeriod is the time over which connections move back to a host that came back
	// (for Sequential: to an earlier host). The moves are spread over the period at jittered
	// moments, one connection at a time: an idle one is closed and its replacement is opened
	// on the host the strategy picks; a busy one is closed when it is returned. Zero value:
	// 30 s. Negative: no rebalancing (new connections still follow the strategy).
	RebalancePeriod time.Duration
	// HeartbeatInterval is how often the connector pings each up host over a connection of its
	// own (not one of the pool's), and HeartbeatTimeout how long it waits for the answer. A host
	// that does not answer in time is marked down at once: a host that stopped answering (a
	// frozen process or VM, a partition, a stalled proxy) resets no socket and refuses no dial,
	// so nothing else reports it, and its connections would otherwise be handed out and hang
	// until their callers' deadlines. Detection therefore takes at most about
	// HeartbeatInterval + HeartbeatTimeout. An answer that is an error (the connection was
	// lost) only makes the host suspect: a fresh dial decides, as for HostGone. Zero values:
	// 500 ms and 1 s. A negative HeartbeatInterval turns heartbeats off. HeartbeatTimeout is
	// raised to 10 ms at least.
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// Logger receives the host events. Zero value: slog.Default().
	Logger *slog.Logger
}

// ErrAllHostsDown is matched (errors.Is) by the errors returned while every host is down.
var ErrAllHostsDown = errors.New("cluster: all hosts are down")

// AllHostsDownError says every host is down, with each host's last error.
type AllHostsDownError struct {
	Hosts  []string
	Errors []error
}

// Error names every host and its last error.
func (e *AllHostsDownError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster: all %d hosts are down (", len(e.Hosts))
	for i, h := range e.Hosts {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %v", h, e.Errors[i])
	}
	b.WriteString("); they are probed in the background and used again as soon as one answers")
	return b.String()
}

// Unwrap returns ErrAllHostsDown and the hosts' errors.
func (e *AllHostsDownError) Unwrap() []error { return append([]error{ErrAllHostsDown}, e.Errors...) }

// Connector is a driver.Connector and pool.HostConnector over several hosts. Create it with
// New, give it to one pool.New, and close the pool (which stops the connector's goroutines).
type Connector struct {
	cfg   Config
	hosts []*host
	log   *slog.Logger

	mu       sync.Mutex
	p        *pool.HostPool // the attached pool's, or nil
	poolName string
	attached bool
	detached bool
	allDown  bool
	next     int           // rotation for RoundRobin and LeastConnections
	changed  chan struct{} // closed (and replaced) when a host comes back
	reb      rebalance

	kick   chan struct{} // wakes the monitor
	done   chan struct{}
	ctx    context.Context // the monitor's checks and probes; cancelled by DetachPool
	cancel context.CancelFunc
	wg     sync.WaitGroup

	allDownN atomic.Uint64
}

type host struct {
	name  string
	index int
	conn  driver.Connector

	// Under Connector.mu.
	up        bool
	suspect   bool // a connection reported the server gone; a check is due
	checking  bool // a check or probe is running
	downSince time.Time
	backAt    time.Time // when it last came back
	lastErr   error
	failures  int       // failed probes since it went down
	nextProbe time.Time // when down

	downs      atomic.Uint64 // up → down transitions
	backs      atomic.Uint64 // down → up transitions
	rebalanced atomic.Uint64 // connections moved away by rebalancing
	dialErrors atomic.Uint64 // failed dials, checks and probes
}

// New returns a Connector over cfg.Hosts. Every host starts healthy.
func New(cfg Config) (*Connector, error) {
	if len(cfg.Hosts) == 0 {
		return nil, errors.New("cluster: New: Config.Hosts is empty; give at least one host (see MySQLHosts)")
	}
	switch cfg.Strategy {
	case Sequential, RoundRobin, LeastConnections:
	default:
		return nil, fmt.Errorf("cluster: New: unknown Config.Strategy %d", int(cfg.Strategy))
	}
	if cfg.HostTimeout <= 0 {
		cfg.HostTimeout = DefaultHostTimeout
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = DefaultProbeInterval
	}
	if cfg.MaxProbeInterval <= 0 {
		cfg.MaxProbeInterval = DefaultMaxProbeInterval
	}
	cfg.MaxProbeInterval = max(cfg.MaxProbeInterval, cfg.ProbeInterval)
	if cfg.RebalancePeriod == 0 {
		cfg.RebalancePeriod = DefaultRebalancePeriod
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	cfg.HeartbeatTimeout = max(cfg.HeartbeatTimeout, 10*time.Millisecond)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Connector{cfg: cfg, log: cfg.Logger, changed: make(chan struct{}),
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	seen := map[string]bool{}
	for i, h := range cfg.Hosts {
		switch {
		case h.Connector == nil:
			return nil, fmt.Errorf("cluster: New: host %d (%q) has no Connector", i+1, h.Name)
		case h.Name == "":
			return nil, fmt.Errorf("cluster: New: host %d has no Name", i+1)
		case seen[h.Name]:
			return nil, fmt.Errorf("cluster: New: host name %q appears twice", h.Name)
		}
		seen[h.Name] = true
		c.hosts = append(c.hosts, &host{name: h.Name, index: i, conn: h.Connector, up: true})
	}
	return c, nil
}

// Driver implements driver.Connector with the first host's driver.
func (c *Connector) Driver() driver.Driver { return c.hosts[0].conn.Driver() }

// Connect implements driver.Connector: ConnectHost without the host's name.
func (c *Connector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, _, err := c.ConnectHost(ctx)
	return conn, err
}

// ConnectHost implements pool.HostConnector. It tries the healthy hosts in the strategy's order
// (each within HostTimeout, plus Ready), marking down each one that fails. When every host is
// already down it waits for one to come back (or ctx to end) if a pool is attached, since the
// monitor probes them; without a pool it tries each down host once. An error after trying
// every host matches ErrAllHostsDown.
func (c *Connector) ConnectHost(ctx context.Context) (driver.Conn, string, error) {
	tried := make([]bool, len(c.hosts))
	attempted := false
	for {
		counts := c.counts()
		c.mu.Lock()
		h := c.pickLocked(counts, tried)
		attached, changed := c.attached && !c.detached, c.changed
		c.mu.Unlock()
		if h == nil {
			if attempted || !attached {
				if !attempted {
					// No pool, so no monitor: try the down hosts ourselves, once.
					for _, dh := range c.hosts {
						if conn, err := c.attempt(ctx, dh); err == nil {
							c.markUp(dh)
							return conn, dh.name, nil
						} else if ctx.Err() != nil {
							return nil, "", err
						}
					}
				}
				return nil, "", c.allDownError()
			}
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return nil, "", fmt.Errorf("%w while waiting for a host to come back: %w", c.allDownError(), ctx.Err())
			}
		}
		attempted = true
		tried[h.index] = true
		conn, err := c.attempt(ctx, h)
		if err == nil {
			return conn, h.name, nil
		}
		if ctx.Err() != nil {
			return nil, "", err
		}
		c.markDown(h, err)
	}
}

// attempt dials h and runs Ready, within HostTimeout.
func (c *Connector) attempt(ctx context.Context, h *host) (driver.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HostTimeout)
	defer cancel()
	conn, err := h.conn.Connect(ctx)
	if err != nil {
		h.dialErrors.Add(1)
		return nil, err
	}
	if conn == nil {
		h.dialErrors.Add(1)
		return nil, errors.New("the host's connector returned a nil connection and no error")
	}
	if r := c.cfg.Ready; r != nil {
		if err := r(ctx, conn); err != nil {
			h.dialErrors.Add(1)
			_ = conn.Close()
			return nil, fmt.Errorf("not ready: %w", err)
		}
	}
	return conn, nil
}

// counts returns the pool's open connections per host name (nil without a pool).
func (c *Connector) counts() map[string]int {
	c.mu.Lock()
	p := c.p
	c.mu.Unlock()
	if p == nil {
		return nil
	}
	m := make(map[string]int, len(c.hosts))
	for _, s := range p.HostStats() {
		m[s.Host] = s.Total
	}
	return m
}

// pickLocked returns the healthy, untried host the strategy picks, or nil.
func (c *Connector) pickLocked(counts map[string]int, tried []bool) *host {
	var cands []*host
	total := 0
	for _, h := range c.hosts {
		if h.up && !tried[h.index] {
			cands = append(cands, h)
		}
		if h.up {
			total += counts[h.name]
		}
	}
	if len(cands) == 0 {
		return nil
	}
	n := len(c.hosts)
	switch c.cfg.Strategy {
	case Sequential:
		return cands[0]
	case RoundRobin:
		nUp := 0
		for _, h := range c.hosts {
			if h.up {
				nUp++
			}
		}
		fair := (total + 1 + nUp - 1) / nUp // the even share once this connection is open
		for k := 0; k < n; k++ {
			h := c.hosts[(c.next+k)%n]
			if h.up && !tried[h.index] && counts[h.name] < fair {
				c.next = h.index + 1
				return h
			}
		}
		h := cands[0]
		c.next = h.index + 1
		return h
	default: // LeastConnections
		var best *host
		for k := 0; k < n; k++ {
			h := c.hosts[(c.next+k)%n]
			if h.up && !tried[h.index] && (best == nil || counts[h.name] < counts[best.name]) {
				best = h
			}
		}
		c.next = best.index + 1
		return best
	}
}

func (c *Connector) allDownError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.allDownErrorLocked()
}

func (c *Connector) allDownErrorLocked() *AllHostsDownError {
	e := &AllHostsDownError{}
	for _, h := range c.hosts {
		e.Hosts = append(e.Hosts, h.name)
		err := h.lastErr
		if h.up || err == nil {
			err = errors.New("no error recorded")
		}
		e.Errors = append(e.Errors, err)
	}
	return e
}

// AttachPool implements pool.HostConnector: pool.New calls it. It starts the monitor goroutine,
// which checks suspected hosts, probes down ones and rebalances; the pool's Close stops it.
func (c *Connector) AttachPool(p *pool.HostPool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.attached {
		return fmt.Errorf("cluster: this Connector already serves pool %s; create one Connector per pool", c.poolName)
	}
	c.attached = true
	c.p = p
	c.poolName = p.Name()
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.wg.Add(1)
	go c.monitor()
	if c.cfg.HeartbeatInterval > 0 {
		for _, h := range c.hosts {
			c.wg.Add(1)
			go c.heartbeat(h)
		}
	}
	return nil
}

// DetachPool implements pool.HostConnector: the pool's Close calls it. It stops the monitor
// and waits for running checks.
func (c *Connector) DetachPool() {
	c.mu.Lock()
	if c.detached || !c.attached {
		c.detached = true
		c.mu.Unlock()
		return
	}
	c.detached = true
	c.cancel()
	close(c.done)
	close(c.changed) // wake dials waiting for a host
	c.changed = make(chan struct{})
	c.mu.Unlock()
	c.wg.Wait()
}

// HostGone implements pool.HostConnector: a connection to the host reported the server gone.
// The monitor checks the host at once with a fresh connection; if that fails the host is down.
func (c *Connector) HostGone(name string, err error) {
	h := c.byName(name)
	if h == nil {
		return
	}
	c.mu.Lock()
	if h.up && !h.checking {
		h.suspect = true
		h.lastErr = err
	}
	c.mu.Unlock()
	c.wake()
}

func (c *Connector) byName(name string) *host {
	for _, h := range c.hosts {
		if h.name == name {
			return h
		}
	}
	return nil
}

func (c *Connector) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// markDown takes h out of use: no new connections, its pooled ones evicted, probes scheduled.
func (c *Connector) markDown(h *host, err error) {
	c.mu.Lock()
	h.lastErr = err
	if !h.up {
		c.mu.Unlock()
		return
	}
	now := time.Now()
	h.up, h.suspect = false, false
	h.downSince = now
	h.failures = 0
	h.nextProbe = now.Add(c.jitter(c.cfg.ProbeInterval))
	h.downs.Add(1)
	up := c.upLocked()
	p, name := c.p, c.poolName
	var all *AllHostsDownError
	if up == 0 && !c.allDown {
		c.allDown = true
		c.allDownN.Add(1)
		all = c.allDownErrorLocked()
	}
	c.mu.Unlock()

	c.log.Warn("sqlpool: host down", "pool", name, "host", h.name, "error", err, "hosts_up", up, "hosts", len(c.hosts))
	if all != nil {
		c.log.Error("sqlpool: all hosts down; acquires that find no idle connection fail at once until one comes back",
			"pool", name, "error", all)
		if p != nil {
			p.SetUnavailable(all)
		}
	}
	if p != nil {
		p.EvictHost(h.name, -1)
	}
	c.wake()
}

// markUp takes h back into use and starts rebalancing.
func (c *Connector) markUp(h *host) {
	c.mu.Lock()
	if h.up {
		c.mu.Unlock()
		return
	}
	h.up, h.suspect = true, false
	h.backs.Add(1)
	h.backAt = time.Now()
	downFor := h.backAt.Sub(h.downSince)
	wasAllDown := c.allDown
	c.allDown = false
	p, name := c.p, c.poolName
	close(c.changed)
	c.changed = make(chan struct{})
	up := c.upLocked()
	if c.cfg.RebalancePeriod > 0 && p != nil {
		c.reb.begin(time.Now(), c.cfg.RebalancePeriod)
	}
	c.mu.Unlock()

	if wasAllDown && p != nil {
		p.SetUnavailable(nil)
	}
	c.log.Info("sqlpool: host back", "pool", name, "host", h.name, "down_for", downFor.Round(time.Millisecond),
		"hosts_up", up, "hosts", len(c.hosts))
	if wasAllDown {
		c.log.Info("sqlpool: hosts available again", "pool", name, "host", h.name)
	}
	c.wake()
}

func (c *Connector) upLocked() int {
	n := 0
	for _, h := range c.hosts {
		if h.up {
			n++
		}
	}
	return n
}

// jitter returns d ± 20 %.
func (c *Connector) jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// HostStatus is one host as the Connector sees it, with the pool's figures for it.
type HostStatus struct {
	Name string
	Up   bool
	// DownSince is when the host last went down (zero while up, or if it never did).
	DownSince time.Time
	// BackSince is when the host last came back after being down (zero while down, or if it
	// never came back).
	BackSince time.Time
	// LastError is the error that took the host down, or the last failed probe's.
	LastError  error
	Downs      uint64 // times it went down
	Backs      uint64 // times it came back
	Rebalanced uint64 // connections moved away from it by rebalancing
	DialErrors uint64 // failed dials, Ready checks and probes
	// Conns are the pool's figures for the host (zero before a pool is attached).
	Conns pool.HostStats
}

// Hosts returns the status of every host, in Config.Hosts order.
func (c *Connector) Hosts() []HostStatus {
	var stats []pool.HostStats
	c.mu.Lock()
	p := c.p
	c.mu.Unlock()
	if p != nil {
		stats = p.HostStats()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]HostStatus, len(c.hosts))
	for i, h := range c.hosts {
		s := HostStatus{Name: h.name, Up: h.up, LastError: h.lastErr, Downs: h.downs.Load(),
			Backs: h.backs.Load(), Rebalanced: h.rebalanced.Load(), DialErrors: h.dialErrors.Load()}
		if !h.up {
			s.DownSince = h.downSince
		} else {
			s.BackSince = h.backAt
		}
		j := sort.Search(len(stats), func(j int) bool { return stats[j].Host >= h.name })
		if j < len(stats) && stats[j].Host == h.name {
			s.Conns = stats[j]
		}
		s.Conns.Host = h.name
		out[i] = s
	}
	return out
}

// PoolName returns the name of the attached pool, or "".
func (c *Connector) PoolName() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.poolName
}

// AllHostsDownEvents counts the times every host was down at once.
func (c *Connector) AllHostsDownEvents() uint64 { return c.allDownN.Load() }

// Strategy returns the connector's strategy.
func (c *Connector) Strategy() Strategy { return c.cfg.Strategy }

var _ pool.HostConnector = (*Connector)(nil)
