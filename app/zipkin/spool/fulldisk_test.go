package spool

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// On a full disk (a 256 KiB tmpfs; the test needs root to mount it and
// skips otherwise) appends fail with the write error, nothing torn is
// left behind, every record whose Append returned nil is replayed, and
// appends work again once stored segments are trimmed.
func TestFullDisk(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	s, _ := open(t, Options{Dir: dir, SegmentBytes: 32 << 10})
	payload := make([]byte, 1000)
	var ok []uint64
	var err error
	for i := 0; i < 1000; i++ {
		var seq uint64
		if seq, err = s.Append(payload); err != nil {
			break
		}
		ok = append(ok, seq)
	}
	if err == nil || errors.Is(err, ErrFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("after %d appends on a 256 KiB disk: %v, want ENOSPC", len(ok), err)
	}
	t.Logf("%d appends of 1 KB fitted; then %v", len(ok), err)
	for _, seq := range ok {
		s.Done(seq)
	}
	var again []uint64
	for i := 0; i < 20; i++ {
		seq, err := s.Append(payload)
		if err != nil {
			t.Fatalf("append %d after the stored segments were trimmed: %v", i, err)
		}
		again = append(again, seq)
	}
	s.Close()
	s, recs := open(t, Options{Dir: dir, SegmentBytes: 32 << 10})
	defer s.Close()
	st := s.Stats()
	got := map[uint64]bool{}
	for _, r := range recs {
		got[r.Seq] = true
	}
	for _, seq := range again {
		if !got[seq] {
			t.Errorf("record %d appended after the disk had room again is not replayed", seq)
		}
	}
	if st.CorruptBytes != 0 {
		t.Errorf("a full disk left %d corrupt bytes", st.CorruptBytes)
	}
	_ = os.Remove(dir)
}
