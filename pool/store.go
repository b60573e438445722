package pool

import (
	"sync"
)

// store holds the idle connections (a LIFO stack: the most recently returned connection is
// handed out first, so a hot subset stays warm and the rest can age out) and the goroutines
// waiting for one (a FIFO queue).
//
// Fairness with barging: a release pushes the connection onto the stack and wakes the first
// waiter, but does not hand the connection to it. A goroutine that is running right now may
// take the connection first (barging); puddle#46 measured that a strict hand-off to a parked
// goroutine costs a third of the throughput, because the connection sits unused until the
// scheduler runs the waiter. A waiter that wakes and finds the stack empty goes back to the
// head of the queue, marked barged; the next release hands a connection directly to a barged
// waiter, so a waiter loses at most one race and the queue stays first come, first served.
//
// One mutex guards both. It is held for a few instructions: no I/O, allocation or syscall.
type store struct {
	mu         sync.Mutex
	idle       []*entry
	head, tail *waiter
	nwait      int    // waiters queued
	tickets    uint64 // arrival order: the last ticket given to a waiter
	closed     bool
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
}

var waiterPool = sync.Pool{New: func() any { return &waiter{ch: make(chan *entry, 1)} }}

// get pops the most recently returned idle connection, or returns nil.
func (s *store) get() *entry {
	s.mu.Lock()
	e := s.popLocked()
	s.mu.Unlock()
	return e
}

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

// put makes e idle, or hands it to a waiter that already lost one race. It reports false, and
// does nothing, when the store is closed; the caller then closes e.
func (s *store) put(e *entry) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	if w := s.head; w != nil && w.barged {
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

// takeIf removes from the stack, oldest first, every idle entry for which pick returns true,
// marking each reserved. pick sees the number of idle entries that would remain.
func (s *store) takeIf(pick func(e *entry, remaining int) bool) []*entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	var taken []*entry
	kept := s.idle[:0]
	remaining := len(s.idle)
	for _, e := range s.idle {
		if pick(e, remaining) {
			e.state.Store(stateReserved)
			taken = append(taken, e)
			remaining--
			continue
		}
		kept = append(kept, e)
	}
	for i := len(kept); i < len(s.idle); i++ {
		s.idle[i] = nil
	}
	s.idle = kept
	return taken
}

// close marks the store closed, wakes every waiter and returns the idle entries, which the
// caller closes.
func (s *store) close() []*entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for s.head != nil {
		s.wakeLocked()
	}
	idle := s.idle
	s.idle = nil
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
