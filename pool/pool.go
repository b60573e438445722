// Package pool is a HikariCP-style connection pool behind database/sql.
//
// A *Pool opens physical connections with any driver.Connector (New) and is itself a
// driver.Connector. database/sql goes in front of it in one of two ways, which differ in where
// a borrow (db.Conn, db.QueryContext, db.BeginTx, …) is served:
//
//   - p.OpenDB() returns a *sql.DB that keeps up to MaxConns of the pool's connections in its
//     own idle list. A borrow takes a connection from that list when there is one, as plain
//     database/sql does; the pool sees it only through the driver connection's ResetSession,
//     where it runs its acquire checks (marked, MaxLifetime, the bypass window and probe, the
//     driver's liveness check), and sees the return through IsValid, where it runs the release
//     plan. Only when the list is empty does database/sql call Connect, an acquire from the
//     pool. While a goroutine waits in the pool, returned connections go to it instead of the
//     idle list and connections already parked there are brought back, so waiting is first
//     come, first served, bounded by AcquireTimeout and MaxWaiters. This is the way to use
//     the pool; see OpenDB.
//   - sql.OpenDB(p) uses the pool as a plain driver.Connector: every connection database/sql
//     asks for is an acquire (Connect) and every one it closes is a release. database/sql still
//     keeps idle connections of its own (two by default): a borrow it serves from them takes
//     the ResetSession path above, but the pool cannot bring them back for a waiter or for
//     housekeeping. After db.SetMaxIdleConns(0) it keeps none, and every borrow is an acquire.
//     Closing that DB closes the pool.
//
// Either way a connection parked in database/sql's idle list still belongs to the pool: Stats
// counts it as idle, and SoftEvict, MaxLifetime and Close mark it so that database/sql's next
// checkout or drop of it closes it. The DBs from p.OpenDB() also give parked connections back
// for housekeeping (IdleTimeout, KeepaliveTime) and to waiters.
//
// What the pool adds to database/sql: validation on acquire for connections idle longer than
// AliveBypassWindow, a release that rolls back and resets only what the borrower left behind
// (the Dialect's tracker: package txstate for MySQL, pgdialect for PostgreSQL), eviction of
// connections that saw a fatal error (the Dialect's Classify: package validate for MySQL), FIFO
// waiting bounded by AcquireTimeout and MaxWaiters, one creator goroutine with backoff,
// MinIdleConns, IdleTimeout, MaxLifetime with jitter, KeepaliveTime, leak detection, SoftEvict,
// Suspend/Resume and a bounded Close. A clean borrow/return cycle sends nothing to the server.
// See docs/ARCHITECTURE.md for the design and its invariants.
package pool

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"
)

// Pool is a connection pool. Its methods are safe for concurrent use. Create one with New and
// release it with Close.
type Pool struct {
	cfg       Config
	connector driver.Connector
	dialect   Dialect // Config.Dialect, or chosen from the connector (dialect.go)
	clk       clock

	store store
	// live holds the settings that can change at runtime (resize.go).
	live liveConfig

	// reg is every physical connection, and the source of every count (entry.go).
	reg registry
	seq uint64 // the last entry id given; under reg.mu

	closed atomic.Bool
	// housekeeping is set while a housekeeping pass runs, so that passes never overlap.
	housekeeping atomic.Bool
	done         chan struct{} // closed by Close
	dialCtx      context.Context
	dialStop     context.CancelFunc
	wg           sync.WaitGroup
	createCh     chan struct{} // wakes the creator
	returnedC    chan struct{} // signalled on every close of an entry while closing

	// dbs are the DBs OpenDB returned, for bringing back the connections parked in their idle
	// lists (lend.go). Weak: a DB the user dropped is not kept alive by the pool.
	dbMu    sync.Mutex
	dbs     []openedDB
	flushMu sync.Mutex // one bring-back at a time

	suspendMu sync.Mutex
	suspended atomic.Bool
	resumeCh  chan struct{}
	// suspendWaiting counts acquires blocked by Suspend; they count as waiting (Stats.Waiting,
	// MaxWaiters). Changed under suspendMu on the way in.
	suspendWaiting atomic.Int32

	// goneAt is when a connection last reported that the whole server went away; idle
	// connections last known alive before it are probed on their next acquire.
	goneAt atomic.Int64

	lastErr atomic.Pointer[errBox]
	// deadOnArrival counts connections that failed their first probe before they were ever
	// handed out, since the last probe that passed or first hand-out: while it is above zero the
	// creator backs off before each dial, as after a failed dial.
	deadOnArrival atomic.Int32

	// hosts is the per-host state when the connector is a HostConnector (hosts.go); under reg.mu.
	hosts map[string]*hostState
	// unavailable is the fail-fast error set by SetUnavailable, or nil.
	unavailable atomic.Pointer[errBox]
	// cancel is the server-side cancel state (cancel.go); nil when ServerCancelTimeout is off.
	cancel *canceller

	timeouts      atomic.Uint64
	created       atomic.Uint64
	closedN       atomic.Uint64
	handouts      atomic.Uint64 // hand-outs of entries that left the registry (entry.handouts folded in); under reg.mu
	exhausted     atomic.Uint64
	validations   atomic.Uint64
	probeFailed   atomic.Uint64
	releasePlans  atomic.Uint64
	leakedStmts   atomic.Uint64
	flushes       atomic.Uint64 // bring-backs of connections parked in DBs (lend.go)
	stmtCacheFull atomic.Uint64
}

type errBox struct{ err error }

// Stats is a snapshot of a pool's state and cumulative counters.
type Stats struct {
	Name     string
	MaxConns int
	Total    int // physical connections open
	Active   int // in use by a borrower
	Idle     int // idle in the pool, or parked in a database/sql idle list
	Waiting  int // goroutines waiting in Connect
	// Cancelling counts closed connections whose cancelled statement the pool is waiting to
	// see end on the server (Config.ServerCancelTimeout); they are in Total and Active, so
	// that MaxConns bounds the server threads running the pool's statements.
	Cancelling int

	// Acquires counts connections handed out: by Connect, or checked out of a database/sql idle
	// list (ResetSession). A connection taken from the stack and then closed (failed probe,
	// expired, evicted) is not counted.
	Acquires      uint64
	Timeouts      uint64 // acquires that reached their deadline
	Exhausted     uint64 // acquires refused with ErrPoolExhausted
	Created       uint64 // physical connections opened
	Closed        uint64 // physical connections closed
	Validations   uint64 // liveness probes run on acquire (bypass window passed)
	ProbeFailures uint64 // probes that found a dead connection
	ReleasePlans  uint64 // releases that had to run statements (rollback or reset)
	// LeakedStatements counts statements a borrower left open, closed by the pool on release.
	LeakedStatements uint64
	// StatementCacheFull counts ER_MAX_PREPARED_STMT_COUNT_REACHED (1461) errors that made a
	// connection empty its statement cache.
	StatementCacheFull uint64
	// LastError is the error of the pool's last attempt to open or validate a connection when
	// that attempt failed, or nil: it is cleared when a connection is opened, or passes a probe
	// (on acquire or keepalive), as HikariCP does.
	LastError error
}

func (s Stats) String() string {
	return fmt.Sprintf("%s: total=%d active=%d idle=%d waiting=%d acquires=%d timeouts=%d created=%d closed=%d",
		s.Name, s.Total, s.Active, s.Idle, s.Waiting, s.Acquires, s.Timeouts, s.Created, s.Closed)
}

// New returns a pool that opens connections with c. It validates cfg (see Config), starts the
// creator and housekeeper goroutines and, unless InitializationFailTimeout is negative, opens a
// first connection and fails if it cannot within InitializationFailTimeout.
func New(c driver.Connector, cfg Config) (*Pool, error) {
	if c == nil {
		return nil, errors.New("sqlpool: New: the driver.Connector is nil; pass mysql.NewConnector(cfg) or another connector")
	}
	rc, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	d, err := chooseDialect(c, cfg.Dialect)
	if err != nil {
		return nil, err
	}
	p := &Pool{
		cfg:       rc,
		connector: c,
		dialect:   d,
		done:      make(chan struct{}),
		createCh:  make(chan struct{}, 1),
		returnedC: make(chan struct{}, 1),
	}
	p.live.init(rc, cfg)
	p.clk.init(&p.cfg, cfg.testClock != nil)
	p.store.nanotime = p.nanotime
	p.refreshClock()
	p.dialCtx, p.dialStop = context.WithCancel(context.Background())
	if sc := serverCancelOf(p.dialect); rc.ServerCancelTimeout > 0 && sc != nil {
		p.cancel = &canceller{impl: sc}
	}

	if err := p.attachHosts(); err != nil {
		p.dialStop()
		return nil, err
	}
	if rc.InitializationFailTimeout > 0 {
		if err := p.checkFailFast(); err != nil {
			p.dialStop()
			p.detachHosts()
			return nil, err
		}
	}
	p.wg.Add(2)
	go p.creator()
	go p.housekeeper()
	p.signalCreator()
	return p, nil
}

// checkFailFast opens the first connection, retrying until InitializationFailTimeout.
func (p *Pool) checkFailFast() error {
	start := time.Now()
	for {
		dialStart := p.nanotime()
		e, err := p.dial()
		if err == nil {
			p.clearLastError()
			if p.minIdleConns() > 0 {
				p.register(e)
				if ev := p.cfg.Events; ev != nil {
					ev.Created(p.cfg.Name, time.Duration(p.nanotime()-dialStart))
				}
				p.store.put(e)
			} else {
				_ = e.conn.Close()
			}
			return nil
		}
		var ie *initError
		if errors.As(err, &ie) || time.Since(start)+time.Second > p.cfg.InitializationFailTimeout {
			return fmt.Errorf("sqlpool: %s: New: cannot open a first connection (InitializationFailTimeout %v; set it negative to start without one): %w",
				p.cfg.Name, p.cfg.InitializationFailTimeout, err)
		}
		select {
		case <-time.After(time.Second):
		case <-p.dialCtx.Done():
			return err
		}
	}
}

// Config returns the pool's configuration with defaults and fix-ups applied, and the current
// values of the settings changed since New (SetMaxConns and the other setters in resize.go).
func (p *Pool) Config() Config { return p.liveOverlay(p.cfg) }

// Driver implements driver.Connector. The driver it returns cannot open connections by name;
// it exists because database/sql asks for one.
func (p *Pool) Driver() driver.Driver { return poolDriver{p} }

type poolDriver struct{ p *Pool }

func (d poolDriver) Open(string) (driver.Conn, error) {
	return nil, fmt.Errorf("sqlpool: %s: a pool's driver cannot open connections by name; use sql.OpenDB(pool) or pool.OpenDB()", d.p.cfg.Name)
}

// Connect implements driver.Connector: it acquires a connection and returns a proxy whose
// Close gives it back to the pool. database/sql calls it when its own idle list has no
// connection for a borrow: through sql.OpenDB(p) for every connection it opens, through
// p.OpenDB() only on a miss (see the package doc). The acquire takes an idle connection from
// the pool (probing it first when it was idle longer than AliveBypassWindow) or waits for one,
// first come, first served, until the earlier of ctx's end and AcquireTimeout. It returns
// ErrClosed after Close; ErrPoolExhausted at once when MaxWaiters goroutines already wait; an
// *AcquireTimeoutError (matching ErrAcquireTimeout) when AcquireTimeout or ctx's deadline ends
// the wait; ctx's error, wrapped, when ctx is cancelled; an error matching ErrUnavailable
// instead of a wait while a HostConnector reports every host down; never driver.ErrBadConn.
func (p *Pool) Connect(ctx context.Context) (driver.Conn, error) {
	e, err := p.acquire(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &conn{p: p, e: e}, nil
}

// Stats returns a snapshot of the pool. It takes the pool's locks briefly; it is meant for
// metrics scrapes and logs, not for hot paths.
func (p *Pool) Stats() Stats {
	idle, waiting := p.store.counts()
	s := Stats{
		Name:               p.cfg.Name,
		MaxConns:           p.maxConns(),
		Waiting:            waiting + int(p.suspendWaiting.Load()),
		Timeouts:           p.timeouts.Load(),
		Exhausted:          p.exhausted.Load(),
		Created:            p.created.Load(),
		Closed:             p.closedN.Load(),
		Validations:        p.validations.Load(),
		ProbeFailures:      p.probeFailed.Load(),
		ReleasePlans:       p.releasePlans.Load(),
		LeakedStatements:   p.leakedStmts.Load(),
		StatementCacheFull: p.stmtCacheFull.Load(),
		LastError:          p.lastError(),
	}
	p.reg.mu.Lock()
	s.Cancelling = p.cancelling()
	lent := 0
	for _, e := range p.reg.entries() {
		s.Acquires += e.handouts.Load()
		switch e.state.Load() {
		case stateRemoved: // being closed: counted only while Cancelling
			continue
		case stateLent:
			lent++
		}
		s.Total++
	}
	s.Total += s.Cancelling
	s.Acquires += p.handouts.Load()
	p.reg.mu.Unlock()
	s.Idle = min(idle+lent, s.Total-s.Cancelling)
	s.Active = s.Total - s.Idle
	return s
}

// SoftEvict marks every connection for closing: idle ones are closed now, ones in use (or
// parked in database/sql) when they are next returned or checked out. The creator replaces them.
func (p *Pool) SoftEvict() {
	for _, e := range p.reg.entries() {
		e.evict.Store(true)
	}
	for _, e := range p.store.takeIf(func(*entry, int) bool { return true }) {
		p.closeEntry(e, CloseEvicted)
	}
	p.signalCreator()
}

// Suspend makes new acquires wait until Resume; each still ends at its deadline. Connections
// already handed out are not affected. Suspend on a suspended pool does nothing.
func (p *Pool) Suspend() {
	p.suspendMu.Lock()
	if !p.suspended.Load() {
		p.resumeCh = make(chan struct{})
		p.suspended.Store(true)
	}
	p.suspendMu.Unlock()
}

// Resume lets acquires waiting because of Suspend go on. Resume on a pool that is not
// suspended does nothing.
func (p *Pool) Resume() {
	p.suspendMu.Lock()
	if p.suspended.Load() {
		p.suspended.Store(false)
		close(p.resumeCh)
	}
	p.suspendMu.Unlock()
	p.signalCreator()
}

// Close closes the pool: new acquires fail with ErrClosed at once, waiters are woken with
// ErrClosed, idle connections are closed, and Close waits up to CloseTimeout for connections in
// use, closing each as it comes back. It returns an error naming the connections still out
// after that; they are closed when returned. Connections parked in the idle list of a DB from
// OpenDB are brought back and closed; those parked in a DB from sql.OpenDB(p) are marked and
// closed when that DB drops or checks them out: close the DBs before the pool. Close stops every goroutine the pool started. A second Close returns nil.
func (p *Pool) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(p.done)
	p.dialStop()
	p.suspendMu.Lock()
	if p.suspended.Load() {
		p.suspended.Store(false)
		close(p.resumeCh)
	}
	p.suspendMu.Unlock()

	for _, e := range p.store.close() {
		p.closeEntry(e, ClosePoolClosed)
	}
	// Connections parked in the DBs from OpenDB are brought back and closed (lend.go); the
	// DBs keep no idle connections from now on.
	p.flushDBs(false)
	// Connections parked in a DB the pool does not know (sql.OpenDB(p) with idle connections)
	// are only marked: database/sql may still be closing statements on them, so they are
	// closed when database/sql drops them or checks them out (close the DB first), and Close
	// does not wait for them.
	for _, e := range p.reg.entries() {
		e.evict.Store(true)
	}
	p.wg.Wait()
	p.stopCanceller()
	p.detachHosts()

	deadline := time.NewTimer(p.cfg.CloseTimeout)
	defer deadline.Stop()
	for p.outstanding() > 0 {
		select {
		case <-p.returnedC:
		case <-deadline.C:
			return p.stillOutError()
		}
	}
	return nil
}

// outstanding counts the connections Close waits for: in use (not parked in database/sql), or
// still being closed.
func (p *Pool) outstanding() int { return p.reg.open() - p.reg.count(stateLent) }

func (p *Pool) stillOutError() error {
	var out []string
	now := p.nanotime()
	for _, e := range p.reg.entries() {
		if st := e.state.Load(); st == stateLent || st == stateRemoved {
			continue
		}
		out = append(out, fmt.Sprintf("conn %d (%s, opened %v ago)", e.id, e.stateName(),
			time.Duration(now-e.createdAt).Round(time.Millisecond)))
	}
	sort.Strings(out)
	return fmt.Errorf("sqlpool: %s: closed with %d connection(s) still in use after CloseTimeout %v: %s; each is closed when returned",
		p.cfg.Name, len(out), p.cfg.CloseTimeout, strings.Join(out, ", "))
}

// wakeCloser tells a waiting Close to count the connections still out again.
func (p *Pool) wakeCloser() {
	select {
	case p.returnedC <- struct{}{}:
	default:
	}
}

func (p *Pool) signalCreator() {
	select {
	case p.createCh <- struct{}{}:
	default:
	}
}

func (p *Pool) setLastError(err error) { p.lastErr.Store(&errBox{err}) }

// clearLastError forgets the last connection error after a connection was opened or passed a
// probe: the pool is no longer failing, so a later timeout means it is busy.
func (p *Pool) clearLastError() {
	if p.lastErr.Load() != nil {
		p.lastErr.Store(nil)
	}
}

func (p *Pool) lastError() error {
	if b := p.lastErr.Load(); b != nil {
		return b.err
	}
	return nil
}

// register adds a new entry to the registry.
func (p *Pool) register(e *entry) {
	p.reg.mu.Lock()
	p.seq++
	e.id = p.seq
	p.reg.addLocked(e)
	e.hostOpenedLocked()
	p.reg.mu.Unlock()
	p.created.Add(1)
}

// closeEntry closes e's connection; e stays in the registry, in state removed, until closeDone.
// The caller owns e (it is in use, reserved or lent to the caller), so no one else can hand it
// out.
func (p *Pool) closeEntry(e *entry, reason CloseReason) {
	if e.state.Swap(stateRemoved) == stateRemoved {
		return
	}
	if e.leak != nil {
		e.leak.stop(p, e)
		e.leak = nil
	}
	p.reg.mu.Lock()
	ok := slices.Contains(p.reg.entries(), e)
	if ok {
		e.hostClosedLocked()
	}
	p.reg.mu.Unlock()
	if !ok {
		return
	}
	err := e.conn.Close()
	if p.serverCancel(e, reason, err) {
		return // counted until its statement has ended on the server (cancel.go)
	}
	p.closeDone(e, reason, err)
}

// closeDone finishes closeEntry once e no longer counts against MaxConns: e leaves the registry.
func (p *Pool) closeDone(e *entry, reason CloseReason, err error) {
	p.reg.mu.Lock()
	p.reg.removeLocked(e)
	p.handouts.Add(e.handouts.Load())
	p.reg.mu.Unlock()
	p.closedN.Add(1)
	if ev := p.cfg.Events; ev != nil {
		ev.Closed(p.cfg.Name, reason)
	}
	p.cfg.Logger.Debug("sqlpool: connection closed", "pool", p.cfg.Name, "conn", e.id, "reason", string(reason),
		"fatal_error", e.fatal, "close_error", err)
	if p.closed.Load() {
		p.wakeCloser()
		return
	}
	p.signalCreator()
}

// lifetime returns the jittered expiry and keepalive gap for a connection created at now.
func (p *Pool) lifetime(now int64) (expiresAt, keepaliveGap int64) {
	if lt := durNanos(p.maxLifetime()); lt > 0 {
		expiresAt = now + lt - rand.Int64N(lt/40+1)
	}
	if ka := durNanos(p.cfg.KeepaliveTime); ka > 0 {
		keepaliveGap = ka - rand.Int64N(ka/10+1)
	}
	return
}

// OpenDB returns a *sql.DB over the pool: database/sql's speed when connections are free, the
// pool's fairness when they are not.
//
// database/sql keeps up to MaxConns idle connections in its own list (SetMaxIdleConns(MaxConns),
// no MaxOpen), and a borrow through the DB takes one from that list when there is one, at what
// a borrow costs in plain database/sql. The pool checks each such checkout in the driver
// connection's ResetSession (marked, MaxLifetime, the bypass window and probe, the driver's
// liveness check; a connection that fails is closed and database/sql tries the next) and cleans
// each return in IsValid (the release plan). Only a borrow that finds the list empty calls
// Connect, an acquire from the pool. While any goroutine waits in the pool, a returned
// connection is not parked but given to the pool's first waiter, and connections parked before
// the wait began are brought back; so waiting is first come, first served, bounded by
// AcquireTimeout and MaxWaiters, as for every other Connect. Housekeeping (IdleTimeout,
// KeepaliveTime, MaxLifetime, MinIdleConns) and Close reach parked connections by bringing them
// back the same way.
//
// The DB's idle setting belongs to the pool: do not change it with SetMaxIdleConns, or call
// SetMaxOpenConns (database/sql would then queue borrowers itself, in random order and without
// AcquireTimeout or MaxWaiters; the pool logs a warning). Closing the returned DB does not close
// the pool (unlike sql.OpenDB(p), which closes the pool with the DB); close both, DB first.
// See docs/ARCHITECTURE.md.
func (p *Pool) OpenDB() *sql.DB {
	db := sql.OpenDB(connector{p})
	db.SetMaxOpenConns(0)
	db.SetMaxIdleConns(p.maxConns())
	p.dbMu.Lock()
	live := p.dbs[:0]
	for _, d := range p.dbs {
		if d.db.Value() != nil {
			live = append(live, d)
		}
	}
	p.dbs = append(live, openedDB{db: weak.Make(db)})
	p.dbMu.Unlock()
	return db
}

// connector is the pool without io.Closer, so that closing the DB leaves the pool open.
type connector struct{ p *Pool }

func (c connector) Connect(ctx context.Context) (driver.Conn, error) { return c.p.Connect(ctx) }
func (c connector) Driver() driver.Driver                            { return c.p.Driver() }
