package pool

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// store holds the idle connections and the goroutines waiting for one (a FIFO queue).
//
// The idle set is not a list: a connection is idle when its entry's state is stateIdle, and
// every entry is in the registry snapshot (all). A borrower takes one by compare-and-swap of
// the state from idle to inUse, so a connection can be taken once only, whoever finds it.
// Finding one cheaply is the point of the design (HikariCP's ConcurrentBag, with Go's per-P
// sync.Pool in the place of Java's thread-local lists):
//
//   - Fast path: a release with no one waiting marks the entry idle and puts a hint (the entry
//     pointer) into hints, a sync.Pool. sync.Pool keeps a private slot and a LIFO chain per P
//     (the scheduler's processor a goroutine runs on), so the borrower that runs next on the
//     same P gets the connection released last on that P — LIFO reuse — by touching only its
//     own P's memory and the entry itself, whose cache line that P wrote last. Nothing shared
//     by all cores is written: no mutex, no shared counter. Other Ps' chains are stolen from
//     only when the own P has none (sync.Pool's getSlow).
//   - A hint is only a hint: the entry may have been taken meanwhile by someone who found it
//     another way, or closed. The CAS decides; a stale hint is dropped. sync.Pool may also
//     drop hints (every GC clears it; under -race it drops a quarter of Puts on purpose), so
//     a borrower that finds no hint scans the registry for an idle entry. Every idle entry is
//     always found by the scan: hints only make the common case cheap.
//   - The waiters' queue stays under mu, as before: a release that sees waiting > 0 goes to
//     the slow path (putSlow) and serves them in arrival order.
//
// Why not per-P stacks of our own: Go exposes no P id to user code without go:linkname, and
// sync.Pool is the runtime's per-P structure behind a public API. Why not a lock-free Treiber
// stack (Vitess smartconnpool): its head is one word every borrower and returner CASes, the
// very cache line this design avoids sharing, and it needs a 128-bit CAS against ABA.
//
// Races that must not strand a connection, and why they cannot:
//
//   - A release that sees no waiter vs a borrower that is about to queue: the releaser
//     publishes (state idle) before it reads waiting again; the borrower increments waiting
//     before it scans (under mu). Go's atomics are sequentially consistent, so either the
//     releaser sees the waiter and takes the slow path (which needs mu, so it comes after the
//     borrower's scan-and-queue, and wakes it), or the borrower's scan sees the idle entry.
//   - The same with Close: Close sets closed before it scans and reserves the idle entries; a
//     releaser re-reads closed after publishing and takes its entry back (CAS) to close it.
//
// Fairness with barging: a slow-path release marks the connection idle and wakes the first
// waiter, but does not hand the connection to it. A goroutine that is running right now may
// take the connection first (barging); puddle#46 measured that a strict hand-off to a parked
// goroutine costs a third of the throughput, because the connection sits unused until the
// scheduler runs the waiter. A waiter that wakes and finds nothing idle goes back to its place
// by arrival, marked barged; the next release hands a connection directly to a barged waiter,
// so a waiter loses at most one race and the queue stays first come, first served. Once the
// first waiter has waited handOffAge (1 ms), releases hand connections over directly: the pool
// is saturated, and fairness, not a microsecond of hand-off, decides the tail.
//
// mu is held for a few instructions (and a scan of at most MaxConns atomic loads on the slow
// path): no I/O, allocation or syscall.
type store struct {
	mu         sync.Mutex
	head, tail *waiter
	nwait      int    // waiters queued
	tickets    uint64 // arrival order: the last ticket given to a waiter
	closed     bool
	nanotime   func() int64 // the pool's exact clock (Pool.nanotime); nil in unit tests of the store

	_ [64]byte // keep the read-mostly words below off the cache line mu's writers dirty

	// waiting counts goroutines inside wait, from before their first scan until they return:
	// while it is not zero, releases take the slow path. Written only on the slow path.
	waiting atomic.Int32
	// isClosed mirrors closed for the lock-free paths.
	isClosed atomic.Bool
	// all is the registry snapshot: every entry the pool has registered and not closed,
	// copied on write (a connection opens or closes), read by scans.
	all atomic.Pointer[[]*entry]
	// hints holds *entry values of connections released idle: see above.
	hints sync.Pool
}

// waiter is one goroutine waiting for a connection.
type waiter struct {
	// ch receives a connection handed off to this waiter, or nil to say "a connection was
	// made idle for you, or the pool closed: look again". Buffered (1), and written only by
	// the goroutine that unlinked the waiter, under store.mu.
	ch         chan *entry
	prev, next *waiter
	queued     bool
	barged     bool
	// ticket is the acquire's arrival number: the queue is kept in ticket order, so a waiter
	// that comes back (it lost a race, or the connection it got failed validation) goes back
	// to its place by original arrival, not to the tail.
	ticket uint64
	// since is when the acquire began to wait (the pool's exact clock): see handOffAge.
	since int64
}

var waiterPool = sync.Pool{New: func() any { return &waiter{ch: make(chan *entry, 1)} }}

// get takes an idle connection, or returns nil: the last one released on this P if its hint is
// still good, else any idle one the scan finds.
func (s *store) get() *entry {
	for {
		x := s.hints.Get()
		if x == nil {
			break
		}
		if e := x.(*entry); e.state.CompareAndSwap(stateIdle, stateInUse) {
			return e
		}
		// Stale: taken by a scan, or closed. Drop it and look at the next.
	}
	return s.scan()
}

// scan takes the first idle entry of the registry, or returns nil.
func (s *store) scan() *entry {
	all := s.all.Load()
	if all == nil {
		return nil
	}
	for _, e := range *all {
		if e.state.Load() == stateIdle && e.state.CompareAndSwap(stateIdle, stateInUse) {
			return e
		}
	}
	return nil
}

// anyIdle reports whether some entry is idle.
func (s *store) anyIdle() bool { return s.count(stateIdle) > 0 }

// count returns how many entries are in state st (a snapshot; entries move meanwhile).
func (s *store) count(st int32) int {
	all := s.all.Load()
	if all == nil {
		return 0
	}
	n := 0
	for _, e := range *all {
		if e.state.Load() == st {
			n++
		}
	}
	return n
}

// add and remove keep the registry snapshot; the caller holds Pool.regMu.
func (s *store) add(e *entry) {
	var next []*entry
	if cur := s.all.Load(); cur != nil {
		next = make([]*entry, len(*cur), len(*cur)+1)
		copy(next, *cur)
	}
	next = append(next, e)
	s.all.Store(&next)
}

func (s *store) remove(e *entry) {
	cur := s.all.Load()
	if cur == nil {
		return
	}
	i := slices.Index(*cur, e)
	if i < 0 {
		return
	}
	next := make([]*entry, 0, len(*cur)-1)
	next = append(next, (*cur)[:i]...)
	next = append(next, (*cur)[i+1:]...)
	s.all.Store(&next)
}

// put makes e, which the caller owns, idle, or hands it to a waiter that already lost one race.
// It reports false, and does nothing, when the store is closed; the caller then closes e.
func (s *store) put(e *entry) bool {
	if s.waiting.Load() != 0 || s.isClosed.Load() {
		return s.putSlow(e)
	}
	e.state.Store(stateIdle)
	s.hints.Put(e)
	// Publish, then look again (see the type's comment): a goroutine that began to wait, or a
	// Close that began, after the first look may have scanned before e was idle.
	if s.waiting.Load() != 0 || s.isClosed.Load() {
		if e.state.CompareAndSwap(stateIdle, stateInUse) {
			return s.putSlow(e)
		}
		// Someone took it already (a scan, or Close): nothing left to do.
	}
	return true
}

// putSlow is put when goroutines wait or the store is closed.
func (s *store) putSlow(e *entry) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	if w := s.head; w != nil && (w.barged || s.aged(w)) {
		s.unlinkLocked(w)
		e.state.Store(stateInUse)
		w.ch <- e
		s.mu.Unlock()
		return true
	}
	e.state.Store(stateIdle)
	s.wakeLocked()
	s.mu.Unlock()
	return true
}

// handOffAge is how long the first waiter may have waited before a release hands it the
// connection directly instead of letting a running goroutine barge (see the type's comment).
// Below it the pool is only momentarily busy, and barging keeps throughput (puddle#46); above
// it the pool is saturated — waits last as long as borrowers hold connections — and a barging
// returner would take a second turn before every waiter's first, doubling some waits. The
// hand-off may leave the connection unused until the scheduler runs the waiter (microseconds
// when the releaser blocks or another P steals it), which is small against such waits.
const handOffAge = int64(time.Millisecond)

// aged reports whether w has waited at least handOffAge.
func (s *store) aged(w *waiter) bool {
	return s.nanotime != nil && w.since != 0 && s.nanotime()-w.since >= handOffAge
}

// wakeLocked tells the first waiter, if any, that a connection is idle.
func (s *store) wakeLocked() {
	if w := s.head; w != nil {
		s.unlinkLocked(w)
		w.ch <- nil
	}
}

func (s *store) pushBackLocked(w *waiter) {
	w.queued = true
	w.prev, w.next = s.tail, nil
	if s.tail != nil {
		s.tail.next = w
	} else {
		s.head = w
	}
	s.tail = w
	s.nwait++
}

// requeueLocked puts back a waiter that already waited (ticket set) at its place by arrival
// order. It walks from the head: a returning waiter is among the oldest.
func (s *store) requeueLocked(w *waiter) {
	var after *waiter // the waiter w goes behind; nil: w becomes the head
	for n := s.head; n != nil && n.ticket < w.ticket; n = n.next {
		after = n
	}
	if after == s.tail {
		s.pushBackLocked(w)
		return
	}
	w.queued = true
	w.prev = after
	if after != nil {
		w.next = after.next
		after.next = w
	} else {
		w.next = s.head
		s.head = w
	}
	w.next.prev = w
	s.nwait++
}

func (s *store) unlinkLocked(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		s.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		s.tail = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
	s.nwait--
}

// takeIf takes out of circulation, oldest return first, every idle entry for which pick
// returns true, marking each reserved, and returns them. pick sees the number of idle entries
// that would remain. To read an entry's fields safely it reserves every idle entry first and
// gives back (put) those not picked; a borrower arriving meanwhile waits for them.
func (s *store) takeIf(pick func(e *entry, remaining int) bool) []*entry {
	all := s.all.Load()
	if all == nil {
		return nil
	}
	var cand []*entry
	for _, e := range *all {
		if e.state.CompareAndSwap(stateIdle, stateReserved) {
			cand = append(cand, e)
		}
	}
	slices.SortStableFunc(cand, func(a, b *entry) int {
		switch {
		case a.lastReturned < b.lastReturned:
			return -1
		case a.lastReturned > b.lastReturned:
			return 1
		}
		return 0
	})
	var taken []*entry
	remaining := len(cand)
	for _, e := range cand {
		if pick(e, remaining) {
			taken = append(taken, e)
			remaining--
		}
	}
	for _, e := range cand {
		if !slices.Contains(taken, e) && !s.put(e) {
			taken = append(taken, e) // closed meanwhile: the caller closes it
		}
	}
	return taken
}

// close marks the store closed, wakes every waiter and returns the idle entries, reserved,
// which the caller closes.
func (s *store) close() []*entry {
	s.mu.Lock()
	s.closed = true
	s.isClosed.Store(true)
	for s.head != nil {
		s.wakeLocked()
	}
	s.mu.Unlock()
	var idle []*entry
	if all := s.all.Load(); all != nil {
		for _, e := range *all {
			if e.state.CompareAndSwap(stateIdle, stateReserved) {
				idle = append(idle, e)
			}
		}
	}
	return idle
}

// counts returns the idle and waiting counts.
func (s *store) counts() (idle, waiting int) {
	s.mu.Lock()
	waiting = s.nwait
	s.mu.Unlock()
	return s.count(stateIdle), waiting
}
