package spool

import (
	"testing"
	"time"
)

// Every group commit's fdatasync is counted once, in the bucket of its
// duration; with NoSync none is.
func TestFsyncCounts(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		s, _ := open(t, Options{Dir: t.TempDir(), NoSync: noSync})
		for i := 0; i < 20; i++ {
			if _, err := s.Append([]byte("timed")); err != nil {
				t.Fatal(err)
			}
		}
		st := s.Stats()
		s.Close()
		var n int64
		for _, c := range st.FsyncCounts {
			n += c
		}
		switch {
		case noSync && (n != 0 || st.FsyncTotal != 0):
			t.Fatalf("NoSync: %d fdatasyncs counted (%v), want none", n, st.FsyncTotal)
		case !noSync && (n != st.Fsyncs || n != 20 || st.FsyncTotal <= 0):
			t.Fatalf("%d fdatasyncs counted (%v in all) for %d group commits of 20 sequential appends, want 20", n, st.FsyncTotal, st.Fsyncs)
		}
	}
}

// A duration equal to a bound is counted in that bound's bucket; one past
// the last bound in the overflow bucket.
func TestCountFsyncBuckets(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{
		{time.Microsecond, 0},
		{100 * time.Microsecond, 0},
		{100*time.Microsecond + 1, 1},
		{time.Millisecond, 7},
		{1100 * time.Microsecond, 8},
		{10 * time.Second, len(FsyncBounds) - 1},
		{11 * time.Second, len(FsyncBounds)},
	} {
		var st Stats
		st.countFsync(c.d)
		if st.FsyncCounts[c.want] != 1 || st.FsyncTotal != c.d {
			t.Errorf("countFsync(%v): counts %v, want bucket %d", c.d, st.FsyncCounts, c.want)
		}
	}
	for i := 1; i < len(FsyncBounds); i++ {
		if FsyncBounds[i] <= FsyncBounds[i-1] {
			t.Fatalf("FsyncBounds not increasing at %d: %v", i, FsyncBounds)
		}
	}
}
