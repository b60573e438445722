package pool

import (
	"context"
	"database/sql/driver"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Entry states. Every physical connection has exactly one, changed with atomic stores under
// store.mu (idle ↔ inUse) or compare-and-swap elsewhere (inUse ↔ lent, anything → removed).
const (
	stateIdle     int32 = iota // on the idle stack
	stateInUse                 // handed out by Connect, or checked out of database/sql's idle list
	stateLent                  // parked in a database/sql idle list; counts as idle
	stateReserved              // taken off the stack by the housekeeper or Close
	stateRemoved               // being closed (closeEntry), or its cancelled statement ending (cancel.go)
)

var stateNames = [...]string{"idle", "inUse", "lent", "reserved", "removed"}

// entry is the registry's record of one physical connection.
type entry struct {
	conn      driver.Conn
	validator driver.Validator       // conn's, or nil; asserted once, not on every release
	resetter  driver.SessionResetter // conn's, or nil (none, or SessionCaps.SkipDriverReset); asserted once, not on every hand-out
	live      func() bool            // the session tracker's SessionCaps.Alive, or nil; asked once
	id        uint64
	host      *hostState // the host the connection reached (HostConnector), or nil
	// sessionID is the server's id of the session (CONNECTION_ID()), recorded at dial with
	// server-side cancel on; 0: unknown, no cancel (cancel.go).
	sessionID int64
	// interrupted is set when a driver call failed with its context's error: closing the
	// connection then also stops its statement on the server (cancel.go).
	interrupted atomic.Bool

	state atomic.Int32
	// evict marks the connection for closing at its next acquire or release (SoftEvict,
	// MaxLifetime of a connection in use, Close).
	evict atomic.Bool

	// Times in nanoseconds on the pool's clock (Pool.nanotime).
	createdAt    int64
	expiresAt    int64 // 0: never
	keepaliveGap int64 // jittered KeepaliveTime; 0: off
	// lastReturned is stamped at every release; IdleTimeout counts from it.
	lastReturned int64
	// lastAlive is the last time the connection was known good: created, returned, or probed.
	// AliveBypassWindow counts from it.
	//
	// Both are plain fields: only the goroutine that owns the entry writes them, before the
	// store mutex hands it on, and others read them under that mutex (the housekeeper) or after
	// taking the entry from the store.
	lastAlive int64
	// handedOutExact is the exact time (Pool.nanotime) of the last hand-out that asked
	// sessionAlive, kept only for a connection whose tracker has SessionCaps.Alive; 0: none yet.
	handedOutExact int64
	// borrowedAt is stamped at every acquire (coarse clock); read by the owner and by leak
	// reports. usageStart is the exact time of the acquire, kept only when Trace is set.
	borrowedAt int64
	usageStart int64
	// limiter bounds a statement's time on the server (statementDeadline, deadline.go); nil:
	// none.
	limiter func(query string, limit time.Duration) string
	// sampledAt is the exact time of a hand-out timed for the overload estimate; 0: not timed
	// (overload.go).
	sampledAt int64
	// tc is the tenant class this connection is counted against while taken (tenant.go).
	tc *tenantClass

	// handouts counts the times the connection was handed to a borrower (Connect, or a
	// checkout from a database/sql idle list); summed by Stats, folded into Pool.handouts when
	// the entry leaves the registry. Per entry, so that no cache line is shared between borrowers.
	handouts atomic.Uint64

	// Owned by the goroutine that holds the connection.
	stmts stmtCache
	sess  SessionTracker // the Dialect's; nil only before the session is initialised
	// cacheFirst is the tracker's SessionCaps.CacheFirst, or nil.
	cacheFirst func() bool
	// before is the tracker's SessionCaps.Before, or nil.
	before func(ctx context.Context, query string, args []driver.NamedValue, result bool) error
	fatal  error // first fatal error seen while in use
	// discard is why IsValid refused the connection; the Close that database/sql sends next
	// closes it with this reason.
	discard CloseReason
	leak    *leakTask
}

func (e *entry) expired(now int64) bool { return e.expiresAt != 0 && now >= e.expiresAt }

func (e *entry) stateName() string { return stateNames[e.state.Load()] }

func durNanos(d time.Duration) int64 { return int64(d) }

// registry is the one record of the pool's physical connections, and so the one source of every
// count: an entry joins it when its connection is opened (register) and leaves it only when the
// connection no longer counts against MaxConns (closeDone) — after closeEntry closed it, or after
// its cancelled statement ended on the server (cancel.go); meanwhile it is in state removed.
// The list is copied on write, so the hot path reads counts with one atomic load and no lock:
//
//	open()            every connection that counts against MaxConns (the creator, resize, wait)
//	count(state)      by state (lent: lend.go, housekeeping)
//	idle()            on the stack or parked in database/sql (Stats, the creator)
//	live()            the ones not being closed (resize's exact decisions, under mu)
//
// Stats, SoftEvict, housekeeping, hostStats, evictHost and Close walk entries().
type registry struct {
	// mu serializes the writers; it also guards Pool.seq, Pool.hosts and the hosts' counters.
	mu   sync.Mutex
	list atomic.Pointer[[]*entry]
}

// entries is a snapshot of the registry (shared: do not modify).
func (r *registry) entries() []*entry {
	if l := r.list.Load(); l != nil {
		return *l
	}
	return nil
}

// open counts the connections that count against MaxConns: open, or closing.
func (r *registry) open() int { return len(r.entries()) }

// count returns how many entries are in state st (a snapshot; entries move meanwhile).
func (r *registry) count(st int32) int {
	n := 0
	for _, e := range r.entries() {
		if e.state.Load() == st {
			n++
		}
	}
	return n
}

// idle counts the idle entries: on the stack, or parked in database/sql.
func (r *registry) idle() int {
	n := 0
	for _, e := range r.entries() {
		if st := e.state.Load(); st == stateIdle || st == stateLent {
			n++
		}
	}
	return n
}

// live counts the entries not being closed; exact when the caller excludes closeEntry (it
// holds Pool's live.shrinkMu, under which resize closes connections).
func (r *registry) live() int { return len(r.entries()) - r.count(stateRemoved) }

// addLocked and removeLocked copy the list with e added or removed; the caller holds mu.
// removeLocked reports whether e was there.
func (r *registry) addLocked(e *entry) {
	cur := r.entries()
	next := make([]*entry, len(cur), len(cur)+1)
	copy(next, cur)
	next = append(next, e)
	r.list.Store(&next)
}

func (r *registry) removeLocked(e *entry) bool {
	cur := r.entries()
	i := slices.Index(cur, e)
	if i < 0 {
		return false
	}
	next := make([]*entry, 0, len(cur)-1)
	next = append(next, cur[:i]...)
	next = append(next, cur[i+1:]...)
	r.list.Store(&next)
	return true
}
