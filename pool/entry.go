package pool

import (
	"database/sql/driver"
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
	stateRemoved               // closed or being closed
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

	// handouts counts the times the connection was handed to a borrower (Connect, or a
	// checkout from a database/sql idle list); summed by Stats, folded into Pool.handouts when the entry is closed. Per
	// entry, so that no cache line is shared between borrowers.
	handouts atomic.Uint64

	// Owned by the goroutine that holds the connection.
	stmts stmtCache
	sess  SessionTracker // the Dialect's; nil only before the session is initialised
	// cacheFirst is the tracker's SessionCaps.CacheFirst, or nil.
	cacheFirst func() bool
	fatal      error // first fatal error seen while in use
	// discard is why IsValid refused the connection; the Close that database/sql sends next
	// closes it with this reason.
	discard CloseReason
	leak    *leakTask
}

func (e *entry) expired(now int64) bool { return e.expiresAt != 0 && now >= e.expiresAt }

func (e *entry) stateName() string { return stateNames[e.state.Load()] }

func durNanos(d time.Duration) int64 { return int64(d) }
