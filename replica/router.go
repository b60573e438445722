package replica

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Mode says which reads wait for which commits.
type Mode int

const (
	// PerToken: a read with a Token (WithToken, WithKey) sees that Token's commits and never
	// an older state than the Token's earlier reads; a read without one waits for nothing.
	// A commit through the writer with a Token costs one extra round trip (reading its
	// position); one without costs nothing extra.
	PerToken Mode = iota
	// None: reads go to any usable replica and never wait; Tokens are ignored, and commits
	// cost nothing extra.
	None
	// PoolWide: every read through the reader sees every commit made through the writer
	// before the read began, as well as its Token's guarantees when it has one. Every commit
	// costs one extra round trip.
	PoolWide
)

// String is the mode's name.
func (m Mode) String() string {
	switch m {
	case None:
		return "none"
	case PerToken:
		return "per-token"
	case PoolWide:
		return "pool-wide"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Defaults of Config.
const (
	DefaultWaitTimeout    = time.Second
	DefaultMaxReplicaLag  = 10 * time.Second
	DefaultPollInterval   = 100 * time.Millisecond
	DefaultConnectTimeout = time.Second
	DefaultMaxKeys        = 100000
)

// Replica is one replica server.
type Replica struct {
	// Name labels the replica in Stats and logs (e.g. its host:port); unique.
	Name string
	// Connector opens (borrows) connections to the replica, usually a *pool.Pool; the router
	// borrows one per read and returns it (Close) when the read is done.
	Connector driver.Connector
	// Up, when set, says whether the replica's host is healthy, e.g. for a pool over a
	// cluster.Connector: func() bool { return c.Hosts()[0].Up } (its heartbeat and probes then
	// take the replica out and back in). It is asked at each poll, not on each read. Zero
	// value: only the router's own position polls decide (a failed poll or a read whose
	// connection failed takes the replica out until the next successful poll).
	Up func() bool
}

// Config configures a Router. Zero values mean the defaults named in each field.
type Config struct {
	// Name labels the router in logs. Zero value: "replica".
	Name string
	// Primary opens (borrows) connections to the primary, usually a *pool.Pool. Required.
	Primary driver.Connector
	// Replicas are the read replicas; none is allowed (every read goes to the primary).
	Replicas []Replica
	// Flavor is the database's replication: MariaDB or PostgreSQL. Required.
	Flavor Flavor
	// Mode says which reads wait for which commits. Zero value: PerToken.
	Mode Mode
	// RouteReadOnly, when true, sends the writer's read-only transactions (BeginTx with
	// sql.TxOptions{ReadOnly: true}) to a replica, as a read through the reader with the same
	// context would go, when the transaction is the first call of the borrow (not on a
	// sql.Conn already used for something else). Zero value: false (everything on the writer
	// goes to the primary).
	RouteReadOnly bool
	// WaitTimeout bounds how long a read waits for a replica to reach its Token before it
	// goes to the primary. Zero value: 1 s. Negative: never wait (go to the primary at once).
	WaitTimeout time.Duration
	// MaxReplicaLag: a replica further behind the primary (by the time since the primary
	// reached the oldest commit the replica has not applied) gets no reads. Zero value: 10 s.
	// Negative: no limit.
	MaxReplicaLag time.Duration
	// PollInterval is how often each server's position is read in the background (one
	// statement on a borrowed connection). It bounds how stale the cached positions are, and
	// how soon a replica that came back gets reads again. Zero value: 100 ms.
	PollInterval time.Duration
	// ConnectTimeout bounds a background poll (at least 5 × PollInterval); a server whose
	// poll has not succeeded for that long plus PollInterval gets no reads. A read's borrow of a
	// replica connection is bounded by that replica pool's AcquireTimeout (a pool over a
	// cluster.Connector fails at once while its host is down); when it fails the read tries
	// the next replica, then the primary. Zero value: 1 s.
	ConnectTimeout time.Duration
	// MaxKeys bounds the Tokens kept for WithKey. Zero value: 100,000.
	MaxKeys int
	// Logger receives replica down/back events. Zero value: slog.Default().
	Logger *slog.Logger
}

// Router sends reads to replicas and writes to the primary, with read-your-writes. Create it
// with New; Writer and Reader return its two *sql.DB. Close it before closing the pools.
type Router struct {
	cfg     Config
	primary *node
	nodes   []*node
	t0      time.Time
	writer  *sql.DB
	reader  *sql.DB
	global  Token // PoolWide: every commit; always: the newest commit seen
	hist    history
	rr      atomic.Uint64

	keys struct {
		sync.Mutex
		m     map[string]*Token
		floor Position
	}

	noReplica    atomic.Uint64 // reads sent to the primary: no usable replica
	waitTimeouts atomic.Uint64 // reads sent to the primary: the wait timed out
	sticky       atomic.Uint64 // reads sent to the primary: bounded by an earlier primary read
	primaryReads atomic.Uint64
	commits      atomic.Uint64
	commitErrs   atomic.Uint64

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// node is the primary or one replica.
type node struct {
	name    string
	c       driver.Connector
	up      func() bool
	primary bool
	state   atomic.Pointer[nodeState]
	down    atomic.Bool // logged as down

	reads, waits, waitNanos, waitTimeouts, errs atomic.Uint64
}

// nodeState is one poll's result.
type nodeState struct {
	pos      Position
	polledAt int64 // Router.now when the poll began
	lag      time.Duration
	down     bool // Replica.Up said false at the poll
	err      error
}

// New returns a Router and starts its background polls (one goroutine per server).
func New(cfg Config) (*Router, error) {
	if cfg.Primary == nil {
		return nil, errors.New("replica: New: Config.Primary is nil; give the primary's pool")
	}
	if cfg.Flavor == nil {
		return nil, errors.New("replica: New: Config.Flavor is nil; use replica.MariaDB or replica.PostgreSQL")
	}
	switch cfg.Mode {
	case None, PerToken, PoolWide:
	default:
		return nil, fmt.Errorf("replica: New: unknown Config.Mode %d", int(cfg.Mode))
	}
	if cfg.Name == "" {
		cfg.Name = "replica"
	}
	if cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = DefaultWaitTimeout
	}
	if cfg.MaxReplicaLag == 0 {
		cfg.MaxReplicaLag = DefaultMaxReplicaLag
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Router{cfg: cfg, t0: time.Now()}
	r.global.f = cfg.Flavor
	r.keys.m = make(map[string]*Token)
	r.primary = &node{name: "primary", c: cfg.Primary, primary: true}
	seen := map[string]bool{}
	for i, rp := range cfg.Replicas {
		switch {
		case rp.Connector == nil:
			return nil, fmt.Errorf("replica: New: replica %d (%q) has no Connector", i+1, rp.Name)
		case rp.Name == "":
			return nil, fmt.Errorf("replica: New: replica %d has no Name", i+1)
		case seen[rp.Name]:
			return nil, fmt.Errorf("replica: New: replica name %q appears twice", rp.Name)
		}
		seen[rp.Name] = true
		r.nodes = append(r.nodes, &node{name: rp.Name, c: rp.Connector, up: rp.Up})
	}
	r.writer = sql.OpenDB(&connector{r: r, writer: true})
	r.reader = sql.OpenDB(&connector{r: r})
	for _, db := range []*sql.DB{r.writer, r.reader} {
		// A connection of these DBs holds a server connection only during a borrow, so keeping
		// many of them idle costs nothing.
		db.SetMaxIdleConns(1024)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	for _, n := range append([]*node{r.primary}, r.nodes...) {
		r.wg.Add(1)
		go r.poll(ctx, n)
	}
	return r, nil
}

// Writer returns the *sql.DB of writes: everything on it goes to the primary, except read-only
// transactions when Config.RouteReadOnly is set. In modes PerToken and PoolWide each commit
// (Tx.Commit, or an Exec outside a transaction) reads its position once more and records it
// in the context's Token.
func (r *Router) Writer() *sql.DB { return r.writer }

// Reader returns the *sql.DB of reads: each borrow (a query, a transaction, a sql.Conn) goes
// to a usable replica that has reached the context's Token (waiting up to WaitTimeout), in
// turn, or to the primary when none is usable.
func (r *Router) Reader() *sql.DB { return r.reader }

// Close closes the two DBs and stops the polls. It does not close the pools.
func (r *Router) Close() error {
	r.cancel()
	r.wg.Wait()
	return errors.Join(r.reader.Close(), r.writer.Close())
}

func (r *Router) now() int64 { return int64(time.Since(r.t0)) }

// poll reads n's position every PollInterval until ctx ends.
func (r *Router) poll(ctx context.Context, n *node) {
	defer r.wg.Done()
	t := time.NewTicker(r.cfg.PollInterval)
	defer t.Stop()
	for {
		r.pollOnce(ctx, n)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *Router) pollOnce(ctx context.Context, n *node) {
	pctx, cancel := context.WithTimeout(ctx, max(r.cfg.ConnectTimeout, 5*r.cfg.PollInterval))
	defer cancel()
	// polledAt is when the poll began: the position it reads is at least the server's state
	// at that moment, which is what resolving a Token's last read needs (Token.need); the
	// moment it returned would be too late by the statement's round trip.
	now := r.now()
	pos, err := r.position(pctx, n)
	if ctx.Err() != nil {
		return
	}
	st := &nodeState{pos: pos, polledAt: now, err: err, down: n.up != nil && !n.up()}
	if err != nil {
		n.errs.Add(1)
		if old := n.state.Load(); old != nil {
			st.pos = old.pos
		}
	} else if n.primary {
		r.hist.add(pos, now)
	} else {
		st.lag = r.hist.lag(pos, now)
	}
	n.state.Store(st)
	r.logHealth(n, st)
}

func (r *Router) position(ctx context.Context, n *node) (Position, error) {
	dc, err := n.c.Connect(ctx)
	if err != nil {
		return nil, err
	}
	defer dc.Close()
	if n.primary {
		return r.cfg.Flavor.PrimaryPosition(ctx, dc)
	}
	return r.cfg.Flavor.ReplicaPosition(ctx, dc)
}

func (r *Router) logHealth(n *node, st *nodeState) {
	if n.primary {
		return
	}
	ok := r.usableState(n, st, r.now())
	if !ok && !n.down.Swap(true) {
		r.cfg.Logger.Warn("sqlpool: replica out of rotation", "router", r.cfg.Name, "replica", n.name,
			"error", st.err, "lag", st.lag)
	} else if ok && n.down.Swap(false) {
		r.cfg.Logger.Info("sqlpool: replica back in rotation", "router", r.cfg.Name, "replica", n.name, "lag", st.lag)
	}
}

// failed takes n out of rotation until its next successful poll.
func (r *Router) failed(n *node, err error) {
	n.errs.Add(1)
	if n.primary {
		return
	}
	old := n.state.Load()
	st := &nodeState{polledAt: r.now(), err: err}
	if old != nil {
		st.pos, st.lag, st.down = old.pos, old.lag, old.down
	}
	n.state.Store(st)
	r.logHealth(n, st)
}

// usable reports whether a replica may get reads now.
func (r *Router) usable(n *node, now int64) bool { return r.usableState(n, n.state.Load(), now) }

func (r *Router) usableState(n *node, st *nodeState, now int64) bool {
	if st == nil || st.err != nil {
		return false
	}
	if st.down {
		return false
	}
	// A poll that stopped answering (a frozen server) leaves the cache to age.
	if time.Duration(now-st.polledAt) > max(r.cfg.ConnectTimeout, 5*r.cfg.PollInterval)+r.cfg.PollInterval {
		return false
	}
	return r.cfg.MaxReplicaLag < 0 || st.lag <= r.cfg.MaxReplicaLag
}

// committed records a commit's position (nil: unknown) in tok and the router.
func (r *Router) committed(tok *Token, p Position) {
	now := r.now()
	r.commits.Add(1)
	if p == nil {
		r.commitErrs.Add(1)
	}
	if tok != nil {
		tok.committed(p, r.primary, now)
	}
	if p != nil {
		r.global.committed(p, r.primary, now)
		r.hist.add(p, now)
	} else if r.cfg.Mode == PoolWide {
		r.global.committed(nil, r.primary, now)
	}
}

// history is the primary's positions over time, for replica lag.
type history struct {
	mu      sync.Mutex
	entries []histEntry // oldest first
}

type histEntry struct {
	pos Position
	at  int64
}

const historyMax = 4096

func (h *history) add(p Position, now int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.entries); n > 0 {
		last := h.entries[n-1].pos
		if covers(last, p) {
			return
		}
		p = merge(last, p)
	}
	if len(h.entries) >= historyMax {
		h.entries = append(h.entries[:0], h.entries[len(h.entries)-historyMax/2:]...)
	}
	h.entries = append(h.entries, histEntry{p, now})
}

// lag returns how long ago the primary first reached a position p does not cover (0 when p
// covers the newest known).
func (h *history) lag(p Position, now int64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.entries)
	for i := n - 1; i >= 0; i-- {
		if covers(p, h.entries[i].pos) {
			if i == n-1 {
				return 0
			}
			return time.Duration(now - h.entries[i+1].at)
		}
	}
	if n == 0 {
		return 0
	}
	return time.Duration(now - h.entries[0].at)
}
