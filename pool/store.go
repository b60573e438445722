package pool

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// store holds the idle connections and the goroutines waiting for one.
//
// The idle connections are a LIFO stack: the most recently returned connection is handed out
// first, so a hot subset stays warm and the rest can age out (IdleTimeout). The waiters are a
// FIFO queue by arrival. One mutex guards both; it is held for a few instructions (no I/O or
// syscall; put's append allocates only while the stack grows to its largest size), except in
// takeIf, which housekeeping and evictions call.
//
// With p.OpenDB() most borrows never reach the store: database/sql keeps returned connections
// in its own idle list and hands them out again after conn.ResetSession, and takes them back
// after conn.IsValid. The store serves Connect (sql.OpenDB(p) and database/sql's misses), the
// connections the creator opens, the ones IsValid routes to waiters and the ones brought back
// from database/sql's lists (lend.go).
//
// Fairness with barging: a release pushes the connection onto the stack and wakes the first
// waiter, but does not hand the connection to it. A goroutine that is running right now may
// take the connection first (barging); puddle#46 measured that a strict hand-off to a parked
// goroutine costs a third of the throughput, because the connection sits unused until the
// scheduler runs the waiter. A waiter that wakes and finds the stack empty goes back to its
// place by arrival, marked barged; the next release hands a connection directly to a barged
// waiter, so a waiter loses at most one race and the queue stays first come, first served.
// Once the first waiter has waited handOffAge (1 ms), releases hand connections over
// directly: the pool is saturated, and fairness, not a microsecond of hand-off, decides the
// tail.
type store struct {
	mu         sync.Mutex
	idle       []*entry // LIFO: the most recently returned last
	head, tail *waiter
	nwait      int    // waiters queued
	tickets    uint64 // arrival order: the last ticket given to a waiter
	closed     bool
	nanotime   func() int64 // the pool's exact clock (Pool.nanotime); nil in unit tests of the store

	// Overload control (overload.go). lifo: the pool is congested, a connection goes to the
	// newest waiter, and shedNs is how long a waiter may have waited before a put sheds it.
	// lastPut: congestion needs connections that come back.
	// benched are idle connections the adaptive limit keeps out of circulation; nbenched
	// counts them.
	lifo     bool
	shedNs   int64
	lastPut  int64 // when a connection last came back while someone waited (nanotime)
	benched  []*entry
	nbenched atomic.Int32

	// ten is fair waiting between tenants (tenant.go); nil: one FIFO queue.
	ten *tenants

	// waiting counts goroutines inside wait, from before they first look at the stack until
	// they return. conn.IsValid reads it to route returns to the pool instead of parking
	// them in database/sql (lend.go).
	waiting atomic.Int32
}

// waiter is one goroutine waiting for a connection.
type waiter struct {
	// ch receives a connection handed off to this waiter, or nil to say "a connection was
	// pushed on the stack for you, or the pool closed: look again". Buffered (1), and written
	// only by the goroutine that unlinked the waiter, under store.mu.
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
	// tc is the waiter's tenant class, linked by tprev/tnext into its queue (tenant.go); nil
	// without tenants.
	tc           *tenantClass
	tprev, tnext *waiter
}

var waiterPool = sync.Pool{New: func() any { return &waiter{ch: make(chan *entry, 1)} }}

// get pops the most recently returned idle connection, or returns nil.
func (s *store) get() *entry {
	s.mu.Lock()
	e := s.popLocked()
	s.mu.Unlock()
	return e
}

// popLocked is get with s.mu held.
func (s *store) popLocked() *entry {
	n := len(s.idle)
	if n == 0 {
		return nil
	}
	e := s.idle[n-1]
	s.idle[n-1] = nil
	s.idle = s.idle[:n-1]
	e.state.Store(stateInUse)
	return e
}

// put makes e, which the caller owns, idle, or hands it to a waiter that already lost one race
// or has waited handOffAge. It reports false, and does nothing, when the store is closed; the
// caller then closes e.
func (s *store) put(e *entry) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	if s.head != nil && s.nanotime != nil {
		s.lastPut = s.nanotime()
	}
	if s.ten != nil { // fair waiting between tenants (tenant.go)
		untenant(e)
		if s.lifo {
			s.shedOldLocked()
		}
		if !s.fairPutLocked(e) {
			e.state.Store(stateIdle)
			s.idle = append(s.idle, e)
		}
		s.mu.Unlock()
		return true
	}
	if s.lifo {
		s.shedOldLocked()
		if w := s.tail; w != nil {
			s.unlinkLocked(w)
			e.state.Store(stateInUse)
			w.ch <- e
			s.mu.Unlock()
			return true
		}
	}
	if w := s.head; w != nil && (w.barged || s.aged(w)) {
		s.unlinkLocked(w)
		e.state.Store(stateInUse)
		w.ch <- e
		s.mu.Unlock()
		return true
	}
	e.state.Store(stateIdle)
	s.idle = append(s.idle, e)
	s.wakeLocked()
	s.mu.Unlock()
	return true
}

// shedOldLocked sheds, while the pool is congested, the waiters at the head that waited longer
// than shedNs (they get shedSignal).
func (s *store) shedOldLocked() {
	if s.nanotime == nil || s.shedNs <= 0 {
		return
	}
	now := s.lastPut
	for w := s.head; w != nil && w.since != 0 && now-w.since > s.shedNs && w != s.tail; {
		next := w.next
		if s.sheddableLocked(w.tc, 0) { // with tenants, only the largest demand's (tenant.go)
			s.unlinkLocked(w)
			w.ch <- shedSignal
		}
		w = next
	}
}

// bench sets e, which the caller owns and has cleaned, aside as idle out of circulation (the
// adaptive limit); false when the store is closed.
func (s *store) bench(e *entry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.head != nil && s.nanotime != nil {
		// A connection came back while someone waits: set aside by the limit, it is still no
		// stall (overload.go's returnMemory). Without this stamp, a limit engaged while many
		// connections run (the database's own overload) saw only benches for as long as the
		// excess took to come back, took that for a stall and let go, again and again.
		s.lastPut = s.nanotime()
	}
	e.state.Store(stateIdle)
	s.benched = append(s.benched, e)
	s.nbenched.Add(1)
	return true
}

// unbench takes the most recently benched connection (state inUse: the caller parks it), or nil.
func (s *store) unbench() *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.benched)
	if n == 0 {
		return nil
	}
	e := s.benched[n-1]
	s.benched[n-1] = nil
	s.benched = s.benched[:n-1]
	s.nbenched.Add(-1)
	e.state.Store(stateReserved)
	return e
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
	return s.nanotime != nil && w.since != 0 && s.lastPut-w.since >= handOffAge
}

// wakeLocked tells the first waiter, if any, that a connection is on the stack.
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
	if w.tc != nil {
		s.linkClassLocked(w)
	}
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
	if w.tc != nil {
		s.linkClassLocked(w)
	}
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
	if w.tc != nil {
		s.unlinkClassLocked(w)
	}
}

// takeIf takes off the stack, oldest return first, every idle entry for which pick returns
// true, marking each reserved, and returns them. pick sees the number of idle entries that
// would remain; it runs under s.mu and must not block.
func (s *store) takeIf(pick func(e *entry, remaining int) bool) []*entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.idle) == 0 && len(s.benched) == 0 {
		return nil
	}
	// The stack is in return order except for connections put back without a new return
	// stamp (a keepalive probe): visit by lastReturned. Benched connections are idle too.
	cand := slices.Concat(s.idle, s.benched)
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
			e.state.Store(stateReserved)
			taken = append(taken, e)
			remaining--
		}
	}
	if len(taken) == 0 {
		return nil
	}
	kept := s.idle[:0]
	for _, e := range s.idle {
		if e.state.Load() == stateIdle {
			kept = append(kept, e)
		}
	}
	clear(s.idle[len(kept):])
	s.idle = kept
	if len(s.benched) > 0 {
		keptB := s.benched[:0]
		for _, e := range s.benched {
			if e.state.Load() == stateIdle {
				keptB = append(keptB, e)
			}
		}
		clear(s.benched[len(keptB):])
		s.benched = keptB
		s.nbenched.Store(int32(len(keptB)))
	}
	return taken
}

// close marks the store closed, wakes every waiter and returns the idle entries, reserved,
// which the caller closes.
func (s *store) close() []*entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for s.head != nil {
		s.wakeLocked()
	}
	idle := append(s.idle, s.benched...)
	s.idle, s.benched = nil, nil
	s.nbenched.Store(0)
	for _, e := range idle {
		e.state.Store(stateReserved)
	}
	return idle
}

// counts returns the idle and waiting counts.
func (s *store) counts() (idle, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.idle), s.nwait
}
