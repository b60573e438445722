package spool

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/testutil"
)

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// The active segment is zero-filled ahead of its records, so that later
// groups overwrite allocated blocks instead of growing the file (whose
// fdatasync would wait for a journal commit); Close cuts the zeros, and a
// segment left with its zeros by a killed process replays without
// corruption, while a damaged byte in the zeros is still corruption.
func TestPreallocatedTail(t *testing.T) {
	dir := t.TempDir()
	s, _ := open(t, Options{Dir: dir})
	payload := make([]byte, 1000)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	if _, err := s.Append(payload); err != nil {
		t.Fatal(err)
	}
	files := segmentFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("%d segments, want 1", len(files))
	}
	seg := files[0]
	full := int64(headerBytes+len(payload)) + preallocBytes
	testutil.Eventually(t, 10*time.Second, "the active segment zero-filled 1 MiB past its record", func() bool {
		return fileSize(t, seg) == full
	})
	const n = 200 // 1016 bytes each: about 200 KB, inside the zeros
	for i := 1; i < n; i++ {
		if _, err := s.Append(payload); err != nil {
			t.Fatal(err)
		}
		if got := fileSize(t, seg); got != full {
			t.Fatalf("append %d grew the preallocated segment to %d bytes", i, got)
		}
	}
	records := int64(n * (headerBytes + len(payload)))
	if b := s.Stats().Bytes; b != records {
		t.Fatalf("Stats.Bytes %d, want the records' %d (zeros not counted)", b, records)
	}

	// What a killed process leaves: the records and the zeros.
	killed, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got := fileSize(t, seg); got != records {
		t.Fatalf("after Close the segment holds %d bytes, want the records' %d", got, records)
	}

	for _, damage := range []bool{false, true} {
		d := t.TempDir()
		b := append([]byte(nil), killed...)
		if damage {
			b[records+4096] = 1
		}
		if err := os.WriteFile(filepath.Join(d, filepath.Base(seg)), b, 0o640); err != nil {
			t.Fatal(err)
		}
		s, recs := open(t, Options{Dir: d})
		st := s.Stats()
		s.Close()
		if len(recs) != n {
			t.Fatalf("damaged=%v: replayed %d records, want %d", damage, len(recs), n)
		}
		want := int64(0)
		if damage {
			want = int64(len(b)) - records
		}
		if st.CorruptBytes != want {
			t.Fatalf("damaged=%v: %d corrupt bytes, want %d", damage, st.CorruptBytes, want)
		}
		if got := fileSize(t, filepath.Join(d, filepath.Base(seg))); got != records {
			t.Fatalf("damaged=%v: the replayed segment holds %d bytes, want the records' %d", damage, got, records)
		}
	}
}

// Group commit waits for no batch window: one appender's Appends each go
// to disk at once. 200 sequential appends (NoSync, so that only the
// spool's own path is timed) take well under 2 s; a window of 10 ms per
// group would take longer. The bound is generous for a loaded machine
// and -race.
func TestLoneAppendNotDelayed(t *testing.T) {
	s, _ := open(t, Options{Dir: t.TempDir(), NoSync: true})
	defer s.Close()
	start := time.Now()
	for i := 0; i < 200; i++ {
		if _, err := s.Append([]byte("lone")); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("200 sequential appends took %v: each waited for a batch window", d)
	}
	if st := s.Stats(); st.Fsyncs != 200 {
		t.Fatalf("%d group commits for 200 sequential appends, want one each", st.Fsyncs)
	}
}
