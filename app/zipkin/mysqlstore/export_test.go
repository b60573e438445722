package mysqlstore

// SetAfterBatch makes r call f after each batch it commits.
func SetAfterBatch(r *Retention, f func()) { r.afterBatch = f }

// HoldWriteSlots takes every write slot of s (Options.ConcurrentWrites, at
// most 64) as running writes would, and returns a function that hands them
// back one by one as those writes finish; queued reports the Accept calls
// waiting meanwhile.
func HoldWriteSlots(s *Store, n int) (release func(), queued func() int) {
	g := &s.groups
	g.mu.Lock()
	g.running += n
	g.mu.Unlock()
	release = func() {
		for range n {
			g.next()
		}
	}
	queued = func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		k := 0
		for _, grp := range g.queue {
			k += grp.calls
		}
		return k
	}
	return release, queued
}
