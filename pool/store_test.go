package pool

import (
	"slices"
	"testing"
)

func storeEntries(s *store, n int) []*entry {
	es := make([]*entry, n)
	for i := range es {
		es[i] = &entry{id: uint64(i + 1)}
		es[i].state.Store(stateInUse)
	}
	return es
}

// The idle connections are a stack: the most recently returned one is handed out first.
func TestStoreIsLIFO(t *testing.T) {
	var s store
	es := storeEntries(&s, 3)
	for _, e := range es {
		if !s.put(e) {
			t.Fatal("put on an open store reported closed")
		}
		if st := e.state.Load(); st != stateIdle {
			t.Fatalf("conn %d is %s after put; want idle", e.id, stateNames[st])
		}
	}
	if idle, waiting := s.counts(); idle != 3 || waiting != 0 {
		t.Fatalf("counts = %d idle, %d waiting; want 3, 0", idle, waiting)
	}
	for i := len(es) - 1; i >= 0; i-- {
		e := s.get()
		if e != es[i] {
			t.Fatalf("get = %v; want conn %d (the last returned)", e, es[i].id)
		}
		if st := e.state.Load(); st != stateInUse {
			t.Fatalf("conn %d is %s after get; want inUse", e.id, stateNames[st])
		}
	}
	if e := s.get(); e != nil {
		t.Fatalf("get on an empty stack = conn %d", e.id)
	}
}

// takeIf visits idle connections oldest return first, tells pick how many would remain, marks
// what it takes reserved and leaves the rest on the stack in their order.
func TestStoreTakeIfOldestFirst(t *testing.T) {
	var s store
	es := storeEntries(&s, 4)
	// Returned in stack order 1, 2, 3, 4, but 2 was put back (keepalive) with an old stamp.
	for i, ts := range []int64{20, 5, 30, 40} {
		es[i].lastReturned = ts
		s.put(es[i])
	}
	var seen []uint64
	var rem []int
	taken := s.takeIf(func(e *entry, remaining int) bool {
		seen = append(seen, e.id)
		rem = append(rem, remaining)
		return e.id == 2 || e.id == 3
	})
	if want := []uint64{2, 1, 3, 4}; !slices.Equal(seen, want) {
		t.Fatalf("pick saw %v; want %v (by lastReturned)", seen, want)
	}
	if want := []int{4, 3, 3, 2}; !slices.Equal(rem, want) {
		t.Fatalf("pick saw remaining %v; want %v", rem, want)
	}
	if len(taken) != 2 || taken[0] != es[1] || taken[1] != es[2] {
		t.Fatalf("takeIf took %v; want conns 2 and 3", taken)
	}
	for _, e := range taken {
		if st := e.state.Load(); st != stateReserved {
			t.Fatalf("taken conn %d is %s; want reserved", e.id, stateNames[st])
		}
	}
	if idle, _ := s.counts(); idle != 2 {
		t.Fatalf("%d idle after takeIf; want 2", idle)
	}
	if e := s.get(); e != es[3] {
		t.Fatalf("get = %v; want conn 4 (top of the stack)", e)
	}
	if e := s.get(); e != es[0] {
		t.Fatalf("get = %v; want conn 1", e)
	}
}

// A closed store refuses returns, hands its idle connections to the closer, reserved, and
// wakes its waiters.
func TestStoreClose(t *testing.T) {
	var s store
	es := storeEntries(&s, 2)
	s.put(es[0])
	w := &waiter{ch: make(chan *entry, 1)}
	s.mu.Lock()
	s.pushBackLocked(w)
	s.mu.Unlock()
	idle := s.close()
	if len(idle) != 1 || idle[0] != es[0] || es[0].state.Load() != stateReserved {
		t.Fatalf("close returned %v; want conn 1, reserved", idle)
	}
	if v := <-w.ch; v != nil {
		t.Fatalf("a waiter woken by close got conn %d; want nil (look again)", v.id)
	}
	if s.put(es[1]) {
		t.Fatal("put on a closed store reported success")
	}
	if e := s.get(); e != nil {
		t.Fatalf("get on a closed store = conn %d", e.id)
	}
}

// A release hands the connection directly to a first waiter that has waited handOffAge, even
// one that never lost a race.
func TestStoreHandsOffToAgedWaiter(t *testing.T) {
	now := int64(1)
	s := store{nanotime: func() int64 { return now }}
	es := storeEntries(&s, 1)
	w := &waiter{ch: make(chan *entry, 1), since: 1}
	s.mu.Lock()
	s.pushBackLocked(w)
	s.mu.Unlock()
	now += handOffAge
	s.put(es[0])
	if e := s.get(); e != nil {
		t.Fatal("a running goroutine took the connection from a waiter that waited handOffAge")
	}
	if v := <-w.ch; v != es[0] || v.state.Load() != stateInUse {
		t.Fatalf("the aged waiter got %v; want conn 1 in use", v)
	}
}

// The registry is the one count of connections: an entry counts against MaxConns (open) from
// register until closeDone, while closing too, but is neither live nor idle once removed.
func TestRegistryCounts(t *testing.T) {
	var r registry
	es := make([]*entry, 4)
	r.mu.Lock()
	for i := range es {
		es[i] = &entry{id: uint64(i + 1)}
		r.addLocked(es[i])
	}
	r.mu.Unlock()
	es[0].state.Store(stateIdle)
	es[1].state.Store(stateLent)
	es[2].state.Store(stateInUse)
	es[3].state.Store(stateRemoved) // closeEntry ran; closeDone has not
	if got := r.open(); got != 4 {
		t.Fatalf("open = %d; want 4 (a closing connection still counts against MaxConns)", got)
	}
	if got := r.live(); got != 3 {
		t.Fatalf("live = %d; want 3", got)
	}
	if got := r.idle(); got != 2 {
		t.Fatalf("idle = %d; want 2 (on the stack, and parked in database/sql)", got)
	}
	if got := r.count(stateLent); got != 1 {
		t.Fatalf("count(lent) = %d; want 1", got)
	}
	snap := r.entries()
	r.mu.Lock()
	if !r.removeLocked(es[3]) || r.removeLocked(es[3]) {
		t.Fatal("removeLocked: want true once, then false")
	}
	r.mu.Unlock()
	if got := r.open(); got != 3 || len(snap) != 4 || !slices.Contains(snap, es[3]) {
		t.Fatalf("after closeDone's remove: open = %d, old snapshot %d entries; want 3, and the snapshot unchanged", got, len(snap))
	}
}
