package spool

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv("SPOOL_CRASH_CHILD"); dir != "" {
		crashChild(dir)
		return
	}
	goleak.VerifyTestMain(m)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func open(t *testing.T, opts Options) (*Spool, []Record) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	var recs []Record
	s, err := Open(opts, func(r Record) {
		r.Payload = append([]byte(nil), r.Payload...)
		recs = append(recs, r)
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, recs
}

func payloads(recs []Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Payload))
	}
	return out
}

// Concurrent appends are group-committed (fewer fsyncs than records) and
// all replayed, in sequence order, by the next Open; done records of full
// segments are trimmed and not replayed again.
func TestAppendReplayTrim(t *testing.T) {
	dir := t.TempDir()
	s, recs := open(t, Options{Dir: dir, SegmentBytes: 1 << 10})
	if len(recs) != 0 {
		t.Fatalf("new spool replayed %d records", len(recs))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	seqs := map[uint64]string{}
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				p := fmt.Sprintf("g%d-%03d", g, i)
				seq, err := s.Append([]byte(p))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seqs[seq] = p
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	s.mu.Lock() // the writer may be starting the next segment
	nsegs := len(s.segs)
	s.mu.Unlock()
	t.Logf("400 appends from 8 goroutines: %d fsyncs, %d bytes, %d segments", st.Fsyncs, st.Bytes, nsegs)
	if st.Appends != 400 || st.Records != 400 || len(seqs) != 400 {
		t.Fatalf("stats %+v, %d distinct seqs; want 400 records", st, len(seqs))
	}
	if st.Fsyncs >= 400 {
		t.Errorf("%d fsyncs for 400 concurrent appends: no group commit", st.Fsyncs)
	}
	if st.Oldest.IsZero() || time.Since(st.Oldest) > time.Minute {
		t.Errorf("oldest unstored %v", st.Oldest)
	}
	s.Close()

	s, recs = open(t, Options{Dir: dir, SegmentBytes: 1 << 10})
	if len(recs) != 400 {
		t.Fatalf("replayed %d records, want 400", len(recs))
	}
	for i, r := range recs {
		if i > 0 && r.Seq <= recs[i-1].Seq {
			t.Fatalf("replay out of order at %d: %d after %d", i, r.Seq, recs[i-1].Seq)
		}
		if seqs[r.Seq] != string(r.Payload) {
			t.Fatalf("record %d: %q, appended as %q", r.Seq, r.Payload, seqs[r.Seq])
		}
	}
	if st := s.Stats(); st.Replayed != 400 || st.Records != 400 {
		t.Fatalf("after replay: %+v", st)
	}
	for _, r := range recs {
		s.Done(r.Seq)
	}
	st = s.Stats()
	if st.Records != 0 || !st.Oldest.IsZero() {
		t.Fatalf("all done: %+v", st)
	}
	// Every replayed segment is trimmed; only the (empty) active one is left.
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(files) != 1 || st.Bytes != 0 {
		t.Fatalf("all done: %d segment files, %d bytes; want 1 empty active segment", len(files), st.Bytes)
	}
	s.Close()
	s, recs = open(t, Options{Dir: dir})
	defer s.Close()
	if len(recs) != 0 {
		t.Fatalf("replayed %d records after all were done", len(recs))
	}
	if seq, err := s.Append([]byte("after")); err != nil || seq <= 400 {
		t.Fatalf("append after reopen: seq %d, %v; want a seq past the old ones", seq, err)
	}
}

// The log is bounded in bytes: an append past MaxBytes is ErrFull at once,
// and room comes back when stored segments are trimmed.
func TestFull(t *testing.T) {
	s, _ := open(t, Options{Dir: t.TempDir(), MaxBytes: 1000, SegmentBytes: 200})
	defer s.Close()
	var seqs []uint64
	var err error
	for {
		var seq uint64
		seq, err = s.Append(make([]byte, 84)) // 100 bytes a record
		if err != nil {
			break
		}
		seqs = append(seqs, seq)
	}
	if !errors.Is(err, ErrFull) || len(seqs) != 10 {
		t.Fatalf("after %d appends of 100 bytes with MaxBytes 1000: %v, want ErrFull after 10", len(seqs), err)
	}
	for _, seq := range seqs {
		s.Done(seq)
	}
	if _, err := s.Append(make([]byte, 84)); err != nil {
		t.Fatalf("append after the stored segments were trimmed: %v (stats %+v)", err, s.Stats())
	}
}

// Two spools never share a directory.
func TestLock(t *testing.T) {
	dir := t.TempDir()
	s, _ := open(t, Options{Dir: dir})
	if _, err := Open(Options{Dir: dir, Logger: quiet}, nil); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	s.Close()
	s2, _ := open(t, Options{Dir: dir})
	s2.Close()
}

// A power cut in the middle of the last write leaves a truncated record:
// Open replays the valid prefix, counts and cuts the tail, and appends
// after it again; a later Open sees the prefix and the new records. Every
// cut point inside the last record is tried.
func TestTruncatedTail(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	s, _ := open(t, Options{Dir: src})
	for i := 0; i < 5; i++ {
		if _, err := s.Append([]byte(fmt.Sprintf("record-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	files, _ := filepath.Glob(filepath.Join(src, "*.log"))
	if len(files) != 1 {
		t.Fatalf("%d segments", len(files))
	}
	full, _ := os.ReadFile(files[0])
	last := headerBytes + len("record-4")
	for cut := 1; cut < last; cut++ {
		dir := filepath.Join(base, fmt.Sprint(cut))
		_ = os.MkdirAll(dir, 0o750)
		_ = os.WriteFile(filepath.Join(dir, filepath.Base(files[0])), full[:len(full)-cut], 0o640)
		s, recs := open(t, Options{Dir: dir})
		st := s.Stats()
		if got := payloads(recs); len(got) != 4 || got[3] != "record-3" {
			t.Fatalf("cut %d bytes: replayed %q, want record-0..3", cut, got)
		}
		if st.CorruptBytes != int64(last-cut) || st.CorruptSegments != 1 {
			t.Fatalf("cut %d bytes: corrupt %d bytes in %d segments, want %d in 1", cut, st.CorruptBytes, st.CorruptSegments, last-cut)
		}
		if _, err := s.Append([]byte("new")); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s, recs = open(t, Options{Dir: dir})
		if got := payloads(recs); len(got) != 5 || got[4] != "new" || s.Stats().CorruptBytes != 0 {
			t.Fatalf("cut %d bytes, reopened: %q, corrupt %d", cut, got, s.Stats().CorruptBytes)
		}
		s.Close()
	}
}

// A damaged byte in the middle of the log ends its segment there: the
// records before it are replayed, the rest of the segment is counted as
// corrupt, and later segments are still replayed.
func TestCorruptByte(t *testing.T) {
	dir := t.TempDir()
	s, _ := open(t, Options{Dir: dir, SegmentBytes: 100})
	for i := 0; i < 12; i++ { // 28 bytes each: 4 per segment
		if _, err := s.Append([]byte(fmt.Sprintf("rec-%08d", i))); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	sort.Strings(files)
	b, _ := os.ReadFile(files[0])
	b[28+20] ^= 0xff // in the payload of the second record
	_ = os.WriteFile(files[0], b, 0o640)
	s, recs := open(t, Options{Dir: dir, SegmentBytes: 100})
	defer s.Close()
	got := payloads(recs)
	if len(got) != 9 || got[0] != "rec-00000000" || got[1] != "rec-00000004" {
		t.Fatalf("replayed %q; want rec 0 and recs 4..11", got)
	}
	if st := s.Stats(); st.CorruptBytes != 3*28 || st.CorruptSegments != 1 {
		t.Fatalf("corrupt %d bytes in %d segments, want 84 in 1", st.CorruptBytes, st.CorruptSegments)
	}
}

// crashChild appends numbered records from 8 goroutines forever and prints
// "ack N" once each Append has returned; the parent kills it with SIGKILL.
func crashChild(dir string) {
	s, err := Open(Options{Dir: dir, SegmentBytes: 64 << 10, Logger: quiet}, nil)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				p := fmt.Sprintf("%d-%d-%s", g, i, strings.Repeat("x", 200))
				if _, err := s.Append([]byte(p)); err != nil {
					fmt.Println("append:", err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Fprintf(out, "ack %s\n", p[:strings.LastIndexByte(p, '-')])
				out.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// A process killed with SIGKILL in the middle of a stream of appends loses
// no record whose Append had returned: the next Open replays every one,
// once. Run three times.
func TestCrashSIGKILL(t *testing.T) {
	for run := 0; run < 3; run++ {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "SPOOL_CRASH_CHILD="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked := map[string]bool{}
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "ack ") {
				t.Fatalf("child: %s", line)
			}
			acked[strings.TrimPrefix(line, "ack ")] = true
			if len(acked) == 1000+run*700 {
				_ = cmd.Process.Signal(syscall.SIGKILL)
				break
			}
		}
		for sc.Scan() { // acks already written before the kill
			if line := sc.Text(); strings.HasPrefix(line, "ack ") {
				acked[strings.TrimPrefix(line, "ack ")] = true
			}
		}
		_ = cmd.Wait()
		s, recs := open(t, Options{Dir: dir, SegmentBytes: 64 << 10})
		seen := map[string]int{}
		for _, r := range recs {
			p := string(r.Payload)
			seen[p[:strings.LastIndexByte(p, '-')]]++
		}
		missing := 0
		for k := range acked {
			if seen[k] != 1 {
				missing++
			}
		}
		t.Logf("run %d: %d appends acknowledged before SIGKILL, %d replayed (the rest were written, not yet acknowledged); corrupt tail %d bytes",
			run, len(acked), len(recs), s.Stats().CorruptBytes)
		if missing > 0 {
			t.Errorf("run %d: %d of %d acknowledged records missing or duplicated after SIGKILL", run, missing, len(acked))
		}
		s.Close()
	}
}

// A log whose bound is smaller than a segment is still trimmed: once the
// active segment's records are all done it is replaced and deleted, and
// the room comes back.
func TestTrimBelowSegmentSize(t *testing.T) {
	s, _ := open(t, Options{Dir: t.TempDir(), MaxBytes: 1000})
	defer s.Close()
	var seqs []uint64
	for {
		seq, err := s.Append(make([]byte, 84))
		if err != nil {
			if !errors.Is(err, ErrFull) {
				t.Fatal(err)
			}
			break
		}
		seqs = append(seqs, seq)
	}
	for _, seq := range seqs {
		s.Done(seq)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Bytes != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("all %d records done, the log still holds %d bytes", len(seqs), s.Stats().Bytes)
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := s.Append(make([]byte, 84)); err != nil {
		t.Fatalf("append after the trim: %v", err)
	}
}
