package spool

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// heldSync is a group fdatasync held by a test until it sends the
// fdatasync's result on release.
type heldSync struct {
	job     uint64
	f       *os.File
	release chan error
}

// held is the test's side of hooks whose group fdatasyncs are held.
type held struct {
	calls  chan heldSync // a group's fdatasync started
	synced chan uint64   // its result was taken
	done   chan struct{}
	once   sync.Once
}

// free lets every fdatasync held, and every later one, return an error at
// once, so that a test that failed can close its spool.
func (h *held) free() { h.once.Do(func() { close(h.done) }) }

var errTestOver = errors.New("test over")

// holdSyncs returns hooks whose group fdatasyncs are held (sent on
// h.calls) until released, and report on h.synced once each result was
// taken. A released fdatasync fails as a real one would when its file was
// closed under it.
func holdSyncs(slots int) (*testHooks, *held) {
	h := &held{calls: make(chan heldSync, 64), synced: make(chan uint64, 64), done: make(chan struct{})}
	return &testHooks{
		slots: slots,
		sync: func(f *os.File, job uint64) error {
			c := heldSync{job: job, f: f, release: make(chan error)}
			select {
			case h.calls <- c:
			case <-h.done:
				return errTestOver
			}
			select {
			case err := <-c.release:
				if _, serr := f.Stat(); serr != nil {
					return serr // an fdatasync on a closed file: EBADF
				}
				return err
			case <-h.done:
				return errTestOver
			}
		},
		synced: func(job uint64) {
			select {
			case h.synced <- job:
			case <-h.done:
			}
		},
	}, h
}

// openHeld opens a spool in dir whose group fdatasyncs (slots of them at
// once) are held by the test; the cleanup frees them and closes it.
func openHeld(t *testing.T, dir string, slots int) (*Spool, *held) {
	t.Helper()
	hooks, h := holdSyncs(slots)
	s, _ := open(t, Options{Dir: dir, hooks: hooks})
	t.Cleanup(func() { h.free(); s.Close() })
	return s, h
}

const waitFor = 10 * time.Second

func nextSync(t *testing.T, calls chan heldSync, what string) heldSync {
	t.Helper()
	select {
	case c := <-calls:
		return c
	case <-time.After(waitFor):
		t.Fatalf("no fdatasync started within %v: %s", waitFor, what)
		return heldSync{}
	}
}

func waitSynced(t *testing.T, synced chan uint64, job uint64) {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case j := <-synced:
			if j == job {
				return
			}
		case <-deadline:
			t.Fatalf("the result of group %d's fdatasync was not taken within %v", job, waitFor)
		}
	}
}

type appendResult struct {
	payload string
	seq     uint64
	err     error
}

func appendAsync(s *Spool, p string) chan appendResult {
	ch := make(chan appendResult, 1)
	go func() {
		seq, err := s.Append([]byte(p))
		ch <- appendResult{p, seq, err}
	}()
	return ch
}

func result(t *testing.T, ch chan appendResult) appendResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitFor):
		t.Fatalf("an Append did not return within %v", waitFor)
		return appendResult{}
	}
}

func notAnswered(t *testing.T, s *Spool, what string, chs ...chan appendResult) {
	t.Helper()
	if n := s.Stats().Appends; n != 0 {
		t.Fatalf("%s: %d records answered", what, n)
	}
	for _, ch := range chs {
		select {
		case r := <-ch:
			t.Fatalf("%s: Append(%q) returned (%d, %v)", what, r.payload, r.seq, r.err)
		default:
		}
	}
}

// A group is written and its fdatasync started while the previous
// group's fdatasync still runs, on an open file description of its own.
// Groups are answered in order; a group whose fdatasync returned nil
// answers every group written before it, even those whose own fdatasyncs
// still run (they are durable: see complete); an earlier group's own
// fdatasync returning nil answers nothing after it.
func TestSyncsOverlap(t *testing.T) {
	s, h := openHeld(t, t.TempDir(), 3)
	calls, synced := h.calls, h.synced

	a := appendAsync(s, "a")
	ca := nextSync(t, calls, "the first group")
	b := appendAsync(s, "b")
	cb := nextSync(t, calls, "the second group's fdatasync, while the first one's is held: group commits do not overlap")
	c := appendAsync(s, "c")
	cc := nextSync(t, calls, "the third group's, while two are held")

	s.mu.Lock()
	writing := s.segs[len(s.segs)-1].f
	s.mu.Unlock()
	fds := map[uintptr]string{writing.Fd(): "the segment's writing description"}
	for i, h := range []heldSync{ca, cb, cc} {
		if prev, ok := fds[h.f.Fd()]; ok {
			t.Fatalf("group %d's fdatasync runs on %s (fd %d): concurrent fdatasyncs must not share an open file description", i, prev, h.f.Fd())
		}
		fds[h.f.Fd()] = fmt.Sprintf("group %d's", i)
	}

	// The second returns first: it answers the first and itself, not the third.
	cb.release <- nil
	waitSynced(t, synced, cb.job)
	var seqs []uint64
	for _, ch := range []chan appendResult{a, b} {
		r := result(t, ch)
		if r.err != nil {
			t.Fatalf("Append(%q): %v", r.payload, r.err)
		}
		seqs = append(seqs, r.seq)
	}
	if seqs[0] >= seqs[1] {
		t.Fatalf("sequence numbers %v, want increasing in the order written", seqs)
	}
	select {
	case r := <-c:
		t.Fatalf("Append(c) returned (%d, %v) while its fdatasync is held and no later one returned", r.seq, r.err)
	default:
	}

	// The first group's fdatasync still holds its slot: one slot is free
	// for a fourth group, and the first's own result answers nothing more.
	d := appendAsync(s, "d")
	cd := nextSync(t, calls, "a fourth group, with a slot free")
	ca.release <- nil
	waitSynced(t, synced, ca.job)
	if n := s.Stats().Appends; n != 2 {
		t.Fatalf("%d records answered, want 2 (the third and fourth groups are held)", n)
	}
	cd.release <- nil
	for _, ch := range []chan appendResult{c, d} {
		r := result(t, ch)
		if r.err != nil || r.seq <= seqs[len(seqs)-1] {
			t.Fatalf("Append(%q): %d, %v", r.payload, r.seq, r.err)
		}
		seqs = append(seqs, r.seq)
	}
	if seqs[2] >= seqs[3] {
		t.Fatalf("sequence numbers %v, want increasing in the order written", seqs)
	}
	cc.release <- nil
	waitSynced(t, synced, cc.job)
	if st := s.Stats(); st.Fsyncs != 4 || st.Appends != 4 || st.Records != 4 {
		t.Fatalf("stats %+v, want 4 group commits of 4 records", st)
	}
}

// An earlier group answered by a later one's fdatasync keeps its answer
// when its own fdatasync then fails: the error fails the groups not yet
// answered, the segment is cut back to the last group answered (which
// stays), and the next Open replays every record answered nil.
func TestErrorAfterEarlyAnswer(t *testing.T) {
	dir := t.TempDir()
	s, h := openHeld(t, dir, 3)
	calls, synced := h.calls, h.synced

	first := appendAsync(s, "first")
	cFirst := nextSync(t, calls, "first")
	second := appendAsync(s, "second")
	cSecond := nextSync(t, calls, "second, while first is held")
	cSecond.release <- nil
	r1, r2 := result(t, first), result(t, second)
	if r1.err != nil || r2.err != nil {
		t.Fatalf("Append: %v, %v", r1.err, r2.err)
	}
	third := appendAsync(s, "third")
	cThird := nextSync(t, calls, "third, while first is held")
	cFirst.release <- syscall.EIO
	waitSynced(t, synced, cFirst.job)
	cThird.release <- nil
	if r := result(t, third); !errors.Is(r.err, syscall.EIO) {
		t.Fatalf("Append(third) = (%d, %v), want the first group's EIO (it was not answered when the error came)", r.seq, r.err)
	}
	after := appendAsync(s, "after")
	nextSync(t, calls, "after").release <- nil
	r4 := result(t, after)
	if r4.err != nil {
		t.Fatal(r4.err)
	}
	s.Close()
	s2, recs := open(t, Options{Dir: dir})
	defer s2.Close()
	if got := strings.Join(payloads(recs), ","); got != "first,second,after" {
		t.Fatalf("replayed %q, want every record answered nil: first,second,after", got)
	}
	if recs[0].Seq != r1.seq || recs[1].Seq != r2.seq || recs[2].Seq != r4.seq {
		t.Fatalf("replayed seqs %d, %d, %d; answered %d, %d, %d", recs[0].Seq, recs[1].Seq, recs[2].Seq, r1.seq, r2.seq, r4.seq)
	}
}

// An fdatasync error of one group fails that group and every group of the
// segment not yet answered, earlier or later, whatever their own
// fdatasyncs return; the segment is cut back to the last group answered
// nil, appends go on in a new segment, and the next Open replays exactly
// the records answered nil.
func TestSyncErrorFailsUnansweredGroups(t *testing.T) {
	dir := t.TempDir()
	s, h := openHeld(t, dir, 3)
	calls, synced := h.calls, h.synced

	ok1 := appendAsync(s, "ok-1")
	nextSync(t, calls, "ok-1").release <- nil
	r1 := result(t, ok1)
	if r1.err != nil {
		t.Fatal(r1.err)
	}

	// bad fails while the group before it is held and two after it run.
	before := appendAsync(s, "before")
	cBefore := nextSync(t, calls, "before")
	bad := appendAsync(s, "bad")
	cBad := nextSync(t, calls, "bad, while before is held")
	later := appendAsync(s, "later")
	cLater := nextSync(t, calls, "later, while before and bad are held")

	cBad.release <- syscall.EIO
	waitSynced(t, synced, cBad.job)
	if n := s.Stats().Appends; n != 1 {
		t.Fatalf("%d records answered, want 1 (ok-1)", n)
	}
	for _, ch := range []chan appendResult{before, bad, later} {
		select {
		case r := <-ch:
			t.Fatalf("Append(%q) returned (%v) before the group ahead of it", r.payload, r.err)
		default:
		}
	}
	cLater.release <- nil
	waitSynced(t, synced, cLater.job)
	cBefore.release <- nil
	for _, ch := range []chan appendResult{before, bad, later} {
		r := result(t, ch)
		if !errors.Is(r.err, syscall.EIO) {
			t.Fatalf("Append(%q) = (%d, %v), want the fdatasync's EIO", r.payload, r.seq, r.err)
		}
	}

	// No slot holds a group any more: the next append goes to a new
	// segment once the failed one is cut back.
	after := appendAsync(s, "after")
	nextSync(t, calls, "after").release <- nil
	r2 := result(t, after)
	if r2.err != nil || r2.seq <= r1.seq {
		t.Fatalf("Append(after): %d, %v; want a sequence number past %d", r2.seq, r2.err, r1.seq)
	}
	want := int64(2*headerBytes + len("ok-1") + len("after"))
	st := s.Stats()
	s.mu.Lock()
	reserved, nsegs := s.reserved, len(s.segs)
	s.mu.Unlock()
	if st.Appends != 2 || st.Records != 2 || st.Fsyncs != 5 || st.Bytes != want || reserved != 0 {
		t.Fatalf("stats %+v, reserved %d; want 2 records of %d bytes in 5 group commits, nothing reserved", st, want, reserved)
	}
	if nsegs != 2 {
		t.Fatalf("%d segments, want the cut one and a new one", nsegs)
	}
	s.Close()
	files := segmentFiles(t, dir)
	if len(files) != 2 || fileSize(t, files[0]) != int64(headerBytes+len("ok-1")) {
		t.Fatalf("segments %v; want the first cut back to ok-1", files)
	}

	s2, recs := open(t, Options{Dir: dir})
	defer s2.Close()
	if got := strings.Join(payloads(recs), ","); got != "ok-1,after" {
		t.Fatalf("replayed %q, want only the records answered nil: ok-1,after", got)
	}
	if recs[0].Seq != r1.seq || recs[1].Seq != r2.seq {
		t.Fatalf("replayed seqs %d, %d; answered %d, %d", recs[0].Seq, recs[1].Seq, r1.seq, r2.seq)
	}
	if st := s2.Stats(); st.CorruptBytes != 0 {
		t.Fatalf("%d corrupt bytes after a failed fdatasync", st.CorruptBytes)
	}
}

// Close waits for the fdatasyncs in flight before it closes the files.
func TestCloseWaitsForSyncs(t *testing.T) {
	dir := t.TempDir()
	s, h := openHeld(t, dir, 2)
	a := appendAsync(s, "a")
	ca := nextSync(t, h.calls, "a")
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	// Nothing happens while Close rightly waits: give a wrong one time to
	// return and close the files.
	select {
	case <-closed:
		t.Fatal("Close returned while an fdatasync was held")
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := ca.f.Stat(); err != nil {
		t.Fatalf("the held fdatasync's file: %v (closed under it)", err)
	}
	ca.release <- nil
	if r := result(t, a); r.err != nil {
		t.Fatal(r.err)
	}
	<-closed
	s2, recs := open(t, Options{Dir: dir})
	defer s2.Close()
	if len(recs) != 1 {
		t.Fatalf("replayed %d records, want 1", len(recs))
	}
}

// Under concurrent appenders, with fdatasyncs returning out of order and
// segments rotating, groups are answered in order, each only once its own
// fdatasync or a later group's returned; no file is closed under an
// fdatasync still running; every record answered nil is replayed, in the
// order of its sequence number.
func TestOrderUnderConcurrency(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	returned := map[uint64]bool{}
	var answered []uint64
	var bad []string
	maxHeld := 0
	calls := make(chan heldSync)
	hooks := &testHooks{
		slots: 3,
		sync: func(f *os.File, job uint64) error {
			c := heldSync{job: job, f: f, release: make(chan error)}
			calls <- c
			err := <-c.release
			mu.Lock()
			if _, serr := f.Stat(); serr != nil {
				bad = append(bad, fmt.Sprintf("group %d's fdatasync: its file was closed under it (%v)", job, serr))
			}
			returned[job] = true
			mu.Unlock()
			return err
		},
		answered: func(job uint64, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				bad = append(bad, fmt.Sprintf("group %d answered %v", job, err))
			}
			if n := len(answered); n > 0 && job != answered[n-1]+1 {
				bad = append(bad, fmt.Sprintf("group %d answered after group %d", job, answered[n-1]))
			}
			// Durable: its own fdatasync or a later group's returned.
			durable := false
			for j := range returned {
				durable = durable || j >= job
			}
			if !durable {
				bad = append(bad, fmt.Sprintf("group %d answered before its fdatasync or a later one returned", job))
			}
			answered = append(answered, job)
		},
	}
	// The releaser holds up to three fdatasyncs (every slot) and lets them
	// go in a random order; a lone one goes after a millisecond.
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		var held []heldSync
		release := func() {
			rand.Shuffle(len(held), func(i, j int) { held[i], held[j] = held[j], held[i] })
			for _, h := range held {
				h.release <- nil
			}
			held = held[:0]
		}
		for {
			select {
			case c := <-calls:
				held = append(held, c)
				maxHeld = max(maxHeld, len(held))
				if len(held) == 3 {
					release()
				}
			case <-time.After(time.Millisecond):
				release()
			case <-stop:
				return
			}
		}
	}()

	s, _ := open(t, Options{Dir: dir, SegmentBytes: 4 << 10, hooks: hooks})
	var wg sync.WaitGroup
	seqs := make([][]uint64, 16)
	want := map[uint64]string{}
	var wantMu sync.Mutex
	for g := range seqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				p := fmt.Sprintf("g%02d-%03d", g, i)
				seq, err := s.Append([]byte(p))
				if err != nil {
					t.Error(err)
					return
				}
				seqs[g] = append(seqs[g], seq)
				wantMu.Lock()
				want[seq] = p
				wantMu.Unlock()
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	s.Close()
	close(stop)
	rwg.Wait()
	t.Logf("640 appends from 16 goroutines: %d group commits, up to %d fdatasyncs held at once", st.Fsyncs, maxHeld)
	for _, b := range bad {
		t.Error(b)
	}
	for g, l := range seqs {
		for i := 1; i < len(l); i++ {
			if l[i] <= l[i-1] {
				t.Fatalf("appender %d got seq %d after %d", g, l[i], l[i-1])
			}
		}
	}
	if len(want) != 640 || st.Appends != 640 || int64(len(answered)) != st.Fsyncs {
		t.Fatalf("%d distinct seqs, %d appends, %d groups answered of %d; want 640 and every group", len(want), st.Appends, len(answered), st.Fsyncs)
	}
	s, recs := open(t, Options{Dir: dir, SegmentBytes: 4 << 10})
	defer s.Close()
	if len(recs) != 640 {
		t.Fatalf("replayed %d records, want 640", len(recs))
	}
	for i, r := range recs {
		if i > 0 && r.Seq <= recs[i-1].Seq {
			t.Fatalf("replay out of order at %d: %d after %d", i, r.Seq, recs[i-1].Seq)
		}
		if want[r.Seq] != string(r.Payload) {
			t.Fatalf("record %d replayed as %q, appended as %q", r.Seq, r.Payload, want[r.Seq])
		}
	}
}

// Each segment's sync-slot descriptions are closed when it is sealed:
// after many rotations only the active segment is open, and after Close
// none.
func TestSlotFilesClosed(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	openSegs := func() map[string]int {
		fds, _ := os.ReadDir("/proc/self/fd")
		n := map[string]int{}
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(l, dir+"/") && strings.HasSuffix(l, ".log") {
				n[filepath.Base(l)]++
			}
		}
		return n
	}
	s, _ := open(t, Options{Dir: dir, SegmentBytes: 200})
	// 100 bytes each: a new segment every second one; the last one is
	// alone in the active segment, so that no rotation is due.
	for i := 0; i < 41; i++ {
		if _, err := s.Append(make([]byte, 84)); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	active := filepath.Base(s.segs[len(s.segs)-1].path)
	s.mu.Unlock()
	if got := openSegs(); len(got) != 1 || got[active] != 1+syncSlots {
		t.Fatalf("open segment files %v; want only the active %s, %d times (writing and one per sync slot)", got, active, 1+syncSlots)
	}
	s.Close()
	if got := openSegs(); len(got) != 0 {
		t.Fatalf("after Close, open segment files %v", got)
	}
}

// A generator against the replay: concurrent appenders while fdatasyncs
// return in a random order and one in eight fails, over several seeds.
// Whatever the order, the next Open replays exactly the records answered
// nil, each under the sequence number it was answered with, in order, and
// none answered with an error; no file is closed under a running
// fdatasync.
func TestRandomSyncFailuresReplayWhatWasAnswered(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 23))
			dir := t.TempDir()
			var mu sync.Mutex
			var bad []string
			calls := make(chan heldSync)
			hooks := &testHooks{slots: 3, sync: func(f *os.File, job uint64) error {
				c := heldSync{job: job, f: f, release: make(chan error)}
				calls <- c
				err := <-c.release
				if _, serr := f.Stat(); serr != nil {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("group %d's fdatasync: its file was closed under it (%v)", job, serr))
					mu.Unlock()
				}
				return err
			}}
			stop := make(chan struct{})
			var rwg sync.WaitGroup
			rwg.Add(1)
			go func() {
				defer rwg.Done()
				var held []heldSync
				release := func() {
					rng.Shuffle(len(held), func(i, j int) { held[i], held[j] = held[j], held[i] })
					for _, h := range held {
						var err error
						if rng.IntN(8) == 0 {
							err = syscall.EIO
						}
						h.release <- err
					}
					held = held[:0]
				}
				for {
					select {
					case c := <-calls:
						held = append(held, c)
						if len(held) == 1+rng.IntN(3) {
							release()
						}
					case <-time.After(time.Millisecond):
						release()
					case <-stop:
						return
					}
				}
			}()
			s, _ := open(t, Options{Dir: dir, SegmentBytes: 2 << 10, hooks: hooks})
			var wg sync.WaitGroup
			var amu sync.Mutex
			okSeq := map[uint64]string{}
			failed := map[string]bool{}
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 40; i++ {
						p := fmt.Sprintf("g%d-%02d", g, i)
						seq, err := s.Append([]byte(p))
						amu.Lock()
						if err == nil {
							if prev, dup := okSeq[seq]; dup {
								t.Errorf("seq %d answered to %q and %q", seq, prev, p)
							}
							okSeq[seq] = p
						} else {
							failed[p] = true
						}
						amu.Unlock()
					}
				}()
			}
			wg.Wait()
			s.Close()
			close(stop)
			rwg.Wait()
			for _, b := range bad {
				t.Error(b)
			}
			s2, recs := open(t, Options{Dir: dir, SegmentBytes: 2 << 10})
			defer s2.Close()
			for i, r := range recs {
				if i > 0 && r.Seq <= recs[i-1].Seq {
					t.Fatalf("replay out of order at %d: %d after %d", i, r.Seq, recs[i-1].Seq)
				}
				if want, ok := okSeq[r.Seq]; !ok || want != string(r.Payload) {
					t.Fatalf("replayed %q as %d; answered nil under that number: %q (%v; answered an error: %v)", r.Payload, r.Seq, want, ok, failed[string(r.Payload)])
				}
			}
			if len(recs) != len(okSeq) {
				t.Fatalf("replayed %d records, %d were answered nil (%d answered an error)", len(recs), len(okSeq), len(failed))
			}
			if len(failed) == 0 || len(okSeq) == 0 {
				t.Fatalf("%d answered nil, %d an error: the generator must make both", len(okSeq), len(failed))
			}
			t.Logf("%d answered nil and replayed, %d answered an error", len(okSeq), len(failed))
		})
	}
}
