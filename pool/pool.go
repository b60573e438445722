// Package pool is a HikariCP-style connection pool behind database/sql; with mysqldialect (or
// pgdialect) imported, metrics and retry, a service does
//
//	p, err := pool.New(connector, pool.Config{Name: "main", Trace: m.Trace()}) // m: metrics.New
//	db := p.OpenDB() // for the code; retry.Tx(ctx, db, nil, retry.Policy{}, fn) for transactions
//
// Borrowers wait first come, first served (AcquireTimeout, MaxWaiters); a clean borrow and
// return sends nothing to the server. See ARCHITECTURE.md.
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

// Pool is a connection pool, safe for concurrent use. Create one with New; Close it.
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
	// login is set while the server refuses the pool's login (login.go), or nil.
	login    atomic.Pointer[loginState]
	redialCh chan struct{} // Redial: ends the creator's wait after a refused login
	redials  atomic.Uint64 // Redial calls: a dial refused after one began answers no Redial
	// cancel is the server-side cancel state (cancel.go); nil when ServerCancelTimeout is off.
	cancel *canceller
	// outage is what the pool logs and reports while it cannot open connections (outage.go).
	outage outageState
	// ovl is the overload-control state (overload.go).
	ovl overload

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
	Name       string
	MaxConns   int
	Total      int // physical connections open, Cancelling included
	Active     int // in use by a borrower, Cancelling included
	Idle       int // idle in the pool, or parked in a database/sql idle list
	Waiting    int // goroutines waiting in Connect
	Cancelling int // closed, but their cancelled statement may still run (ServerCancelTimeout)

	Acquires           uint64        // hand-outs (Connect, or a checkout from database/sql's idle list)
	Timeouts           uint64        // acquires that reached their deadline
	Exhausted          uint64        // acquires refused with ErrPoolExhausted
	Created            uint64        // physical connections opened
	Closed             uint64        // physical connections closed
	Validations        uint64        // liveness probes run on acquire (bypass window passed)
	ProbeFailures      uint64        // probes that found a dead connection
	ReleasePlans       uint64        // releases that had to run statements (rollback or reset)
	LeakedStatements   uint64        // statements a borrower left open, closed on release
	StatementCacheFull uint64        // errors 1461 that emptied a connection's statement cache
	Congested          bool          // overload control (docs/operations.md): congested now
	Limit              int           // connections allowed in circulation (the adaptive limit)
	LimitBaseline      time.Duration // the adaptive limit's minimum latency
	LimitChanges       uint64        // times the adaptive limit moved, engaged or let go
	Shed               uint64        // acquires refused with ErrOverloaded
	LastError          error         // of the last failed open or probe; nil after a success
	DownSince          time.Time     // attempts to open a connection fail since then; zero while they succeed
	Tenants            []TenantStats // per Config.Tenants key, sorted, then "" (the others); nil without
}

// String formats the counts on one line, for logs.
func (s Stats) String() string {
	return fmt.Sprintf("%s: total=%d active=%d idle=%d waiting=%d acquires=%d timeouts=%d created=%d closed=%d",
		s.Name, s.Total, s.Active, s.Idle, s.Waiting, s.Acquires, s.Timeouts, s.Created, s.Closed)
}

// New returns a pool that opens connections with c. Unless InitializationFailTimeout is
// negative, it fails when it cannot open a first connection within it.
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
		redialCh:  make(chan struct{}, 1),
	}
	p.live.init(rc, cfg)
	p.ovl.init(rc)
	if p.store.ten, err = newTenants(rc.Tenants); err != nil {
		return nil, err
	}
	p.clk.init(&p.cfg, cfg.testClock != nil)
	p.store.nanotime = p.nanotime
	p.refreshClock()
	p.dialCtx, p.dialStop = context.WithCancel(context.Background())
	if sc, ok := p.dialect.(ServerCancel); rc.ServerCancelTimeout > 0 && ok {
		p.cancel = &canceller{impl: sc}
	}

	p.resolveAddr()
	if err := p.attachHosts(); err != nil {
		p.dialStop()
		return nil, err
	}
	p.attachTrace()
	if rc.InitializationFailTimeout > 0 {
		if err := p.checkFailFast(); err != nil {
			p.dialStop()
			p.detachHosts()
			p.detachTrace()
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
				if ev := p.cfg.Trace; ev != nil && ev.Created != nil {
					ev.Created(p.cfg.Name, time.Duration(p.nanotime()-dialStart))
				}
				p.store.put(e)
			} else {
				_ = e.conn.Close()
			}
			return nil
		}
		if errors.Is(err, ErrHook) || time.Since(start)+time.Second > p.cfg.InitializationFailTimeout {
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

// Config returns the pool's configuration with defaults applied and the setters' changes.
func (p *Pool) Config() Config { return p.liveOverlay(p.cfg) }

// Driver implements driver.Connector; the driver cannot open connections by name.
func (p *Pool) Driver() driver.Driver { return poolDriver{p} }

type poolDriver struct{ p *Pool }

func (d poolDriver) Open(string) (driver.Conn, error) {
	return nil, fmt.Errorf("sqlpool: %s: a pool's driver cannot open connections by name; use sql.OpenDB(pool) or pool.OpenDB()", d.p.cfg.Name)
}

// Connect implements driver.Connector: it acquires a connection, waiting first come, first served
// until ctx ends or AcquireTimeout passes. Errors: ErrClosed, ErrPoolExhausted,
// *AcquireTimeoutError, ctx's error wrapped, or one matching ErrUnavailable.
func (p *Pool) Connect(ctx context.Context) (driver.Conn, error) {
	e, err := p.acquire(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &conn{p: p, e: e}, nil
}

// Stats returns a snapshot of the pool.
func (p *Pool) Stats() Stats {
	_, waiting := p.store.counts()
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
		DownSince:          p.downSince(),
	}
	p.reg.mu.Lock()
	s.Cancelling = p.cancelling()
	for _, e := range p.reg.entries() {
		s.Acquires += e.handouts.Load()
		switch e.state.Load() {
		case stateRemoved: // being closed: counted only while Cancelling
			continue
		case stateIdle, stateLent:
			s.Idle++
		}
		s.Total++
	}
	s.Total += s.Cancelling
	s.Acquires += p.handouts.Load()
	p.reg.mu.Unlock()
	s.Active = s.Total - s.Idle
	p.fillOverloadStats(&s)
	s.Tenants = p.tenantStats()
	return s
}

// SoftEvict closes idle connections now and marks the others for closing at their return or
// checkout; the creator replaces them.
func (p *Pool) SoftEvict() {
	for _, e := range p.reg.entries() {
		e.evict.Store(true)
	}
	for _, e := range p.store.takeIf(func(*entry, int) bool { return true }) {
		p.closeEntry(e, CloseEvicted)
	}
	p.signalCreator()
}

// Suspend makes new acquires wait until Resume (each still ends at its deadline).
func (p *Pool) Suspend() {
	p.suspendMu.Lock()
	if !p.suspended.Load() {
		p.resumeCh = make(chan struct{})
		p.suspended.Store(true)
	}
	p.suspendMu.Unlock()
}

// Resume lets acquires held by Suspend go on.
func (p *Pool) Resume() {
	p.suspendMu.Lock()
	if p.suspended.Load() {
		p.suspended.Store(false)
		close(p.resumeCh)
	}
	p.suspendMu.Unlock()
	p.signalCreator()
}

// Close fails new acquires with ErrClosed, closes idle connections, and waits up to CloseTimeout
// for those in use; it returns an error naming those still out. Close the DBs from OpenDB first. A
// second Close returns nil.
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
	p.detachTrace()

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
	if e.tc != nil {
		p.untenant(e)
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
	if ev := p.cfg.Trace; ev != nil && ev.Closed != nil {
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

// OpenDB returns a *sql.DB over the pool; its idle connections stay the pool's. Do not call
// SetMaxIdleConns or SetMaxOpenConns on it. Closing the DB does not close the pool; close the DB
// first, then the pool.
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
