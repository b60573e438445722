package metrics

import (
	"sync/atomic"
	"time"
)

// windowSlots is how many slots a windowMax rotates through, Micrometer's default bufferLength
// for TimeWindowMax.
const windowSlots = 3

// windowMax is the largest value recorded over a rolling window, lock-free on the recording
// side: Micrometer's TimeWindowMax, which backs the _max gauge of every Micrometer timer.
//
// record raises every slot to v by compare-and-swap (after warm-up a record is three atomic
// loads on one cache line and no store). The reported slot is the oldest; a rotation resets it
// to 0 and makes the next slot the reported one. Unlike Micrometer, recording never rotates
// (that would need a clock read on the hot path): a reader rotates, under Metrics.readMu, at
// most once per read and only when window/3 has passed since the previous rotation. A value is
// therefore reported for at least two rotations (2/3 of the window: 80 s by default) and
// dropped at the third; rotations are at least window/3 apart, later when reads are sparse, so
// a slow scraper sees a value longer, never shorter.
type windowMax struct {
	slots [windowSlots]atomic.Int64 // nanoseconds

	// Read side, guarded by Metrics.readMu.
	cur        int
	lastRotate time.Time
}

// record raises the window's maximum to d.
func (w *windowMax) record(d time.Duration) {
	v := int64(d)
	for i := range w.slots {
		s := &w.slots[i]
		for {
			old := s.Load()
			if v <= old || s.CompareAndSwap(old, v) {
				break
			}
		}
	}
}

// read rotates the window if window/3 has passed since the last rotation and returns its
// maximum. The caller holds Metrics.readMu.
func (w *windowMax) read(now time.Time, window time.Duration) time.Duration {
	if w.lastRotate.IsZero() {
		w.lastRotate = now // never read before: everything recorded so far is in the window
	} else if now.Sub(w.lastRotate) >= window/windowSlots {
		w.slots[w.cur].Store(0)
		w.cur = (w.cur + 1) % windowSlots
		w.lastRotate = now
	}
	return time.Duration(w.slots[w.cur].Load())
}
