// Package spool is a durable, bounded, append-only log of accepted span
// requests on local disk: the span server answers a POST 202 only once its
// spans are in the log, replays what the log holds at start, and trims it
// once the spans are stored.
//
// # Format
//
// The log is a directory of segment files named by the sequence number of
// their first record (00000000000000000001.log, …) and a LOCK file. A
// record is
//
//	length  uint32, little endian: bytes of time and payload
//	crc     uint32, little endian: CRC-32C of time and payload
//	time    int64, little endian: when it was appended, Unix nanoseconds
//	payload
//
// Appends are group-committed, and group commits overlap. One goroutine,
// the writer, takes every record waiting (without waiting for more: a lone
// Append is written at once), gives them their place at the end of the
// active segment and writes them with one write; the fdatasync that makes
// the group durable then runs on a goroutine of its own, so that the next
// group is written and its fdatasync started while up to syncSlots (3)
// earlier ones are still running. A request that arrives just after a
// group's fdatasync started therefore waits for its own group's
// fdatasync, not for that one's first.
//
// Groups are answered in order: a group's Appends return nil only when
// its own fdatasync, or that of a group written after it, returned nil
// and every earlier group was answered nil. (The later group's fdatasync
// covers the whole file: the earlier group's pages too.) A record is
// therefore on disk when Append returns, whatever happens to the process
// afterwards (SIGKILL, OOM kill); a power cut can cut only records whose
// Append had not returned.
//
// Each concurrent fdatasync runs on an open file description of its own:
// the active segment is opened once more (write-only) per sync slot, and a
// slot takes a group only once its previous fdatasync has returned, before
// the group is written. Linux reports a writeback error once per open file
// description (errseq_t), to the first fsync on it after the error, so an
// fdatasync on a shared description could return nil after another one
// had taken the error of this group's pages; on a description of its own
// it sees every error since that slot's previous fdatasync, which covers
// every write of its group.
//
// A failed write or fdatasync fails its group and every group of the
// segment not yet answered (none of them is answered nil, whatever its own
// fdatasync returns); the writer writes nothing more to the segment, waits
// for the fdatasyncs still running, cuts the segment back to the end of
// the last group answered nil (so that later records never follow a torn
// or lost one) and goes on in a new segment. When the cut fails the failed
// records stay (they are counted, and replayed by the next Open, at least
// once) and a new segment is required; when that fails too, Append
// refuses every record from then on. When only the new segment fails the
// cut segment is written on, on descriptions opened again.
//
// # Preallocation
//
// The active segment is zero-filled ahead of its records, up to
// preallocBytes (1 MiB, or SegmentBytes when smaller) at a time, while no
// Append waits: the writer writes the zeros and an fdatasync on the
// segment's writing description (not a sync slot's) makes them durable
// alongside the groups' fdatasyncs. A group of records then overwrites
// blocks that are already allocated and the fdatasync that makes it
// durable writes only those blocks and flushes the disk's cache: the
// file's size and block map do not change, so on a journaling file system
// (ext4, XFS) it waits for no journal commit, which on a disk shared with
// a database is what an fsync of an appended file mostly waits for. When
// the zero-fill fails (a full disk) the segment is appended to instead.
// The zero tail is cut when a segment is sealed or the spool closed, and
// a zero tail found by Open (a killed process) is the end of the records,
// not corruption.
//
// # Replay and corruption
//
// Open reads every segment in order and hands each valid record to the
// replay function. A record whose length runs past the end of its segment
// or whose checksum does not match (a power cut in the middle of a write,
// a damaged disk) ends that segment: the rest of the segment is counted as
// corrupt (Stats.CorruptBytes, Stats.CorruptSegments), logged, and
// truncated away, and the next segment is read on. Records after a corrupt
// one in the same segment are lost; they were appended after it and
// answered after it.
//
// # Trimming and bounds
//
// Done marks a record stored. A segment that is no longer written to and
// whose records are all done is deleted; the segment being written to is
// closed and a new one started when it reaches Options.SegmentBytes, or
// when all its records are done and it holds a sixteenth of SegmentBytes
// or the log is over half its bound. The writer waits for the segment's
// running fdatasyncs before it closes it.
// The bytes of the records in all segments are bounded by
// Options.MaxBytes: an Append that would go past it returns ErrFull at
// once (the server answers 503 with Retry-After). The active segment's
// preallocated zeros (at most preallocBytes) come on top.
//
// # One server per directory
//
// Open takes an exclusive flock(2) on DIR/LOCK and fails with ErrLocked
// when another process (or another Spool) holds it; the lock goes with the
// process, so a killed server never leaves a stale lock.
package spool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults of Options.
const (
	DefaultMaxBytes     = 1 << 30
	DefaultSegmentBytes = 16 << 20
	// MaxRecordBytes bounds one record's payload.
	MaxRecordBytes = 64 << 20
	// preallocBytes is how far ahead of its records the active segment is
	// zero-filled (at most SegmentBytes).
	preallocBytes = 1 << 20
	// syncSlots is how many group fdatasyncs may run at once, each on an
	// open file description of its own.
	syncSlots = 3
	// maxGroup bounds the records of one group.
	maxGroup = 4096
)

// ErrFull is returned by Append when the record would take the log past
// Options.MaxBytes.
var ErrFull = errors.New("spool: full")

// ErrLocked is returned by Open when another process holds the directory.
var ErrLocked = errors.New("spool: directory in use by another process")

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("spool: closed")

const headerBytes = 16 // length, crc, time

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Options configure a Spool. Dir is required; the zero value of every
// other field is its default.
type Options struct {
	// Dir is the directory of the log; it is created when missing.
	Dir string
	// MaxBytes bounds the bytes of all segments. Zero value: 1 GiB.
	MaxBytes int64
	// SegmentBytes is the size past which a new segment is started. Zero
	// value: 16 MiB.
	SegmentBytes int64
	// Logger receives corruption and trimming problems. Zero value:
	// slog.Default().
	Logger *slog.Logger
	// NoSync skips fdatasync and preallocation (for tests of the format
	// only). Zero value: every group of appends is made durable before its
	// Appends return.
	NoSync bool

	// hooks are set by this package's tests only. Zero value: none.
	hooks *testHooks
}

// testHooks let tests hold, fail and watch group fdatasyncs.
type testHooks struct {
	// slots replaces syncSlots when positive.
	slots int
	// sync replaces the fdatasync of group job on f.
	sync func(f *os.File, job uint64) error
	// synced is called (without the lock) once the result of group job's
	// fdatasync has been taken and the groups it completed answered.
	synced func(job uint64)
	// answered is called, with mu held, as group job is answered.
	answered func(job uint64, err error)
}

// Stats are the spool's gauges and counters.
type Stats struct {
	Bytes           int64     // bytes of the records in all segments (the active segment's preallocated zeros not counted)
	Records         int64     // records appended or replayed and not yet done
	Replayed        int64     // records replayed by Open
	CorruptBytes    int64     // bytes cut from corrupt or truncated segment tails by Open
	CorruptSegments int64     // segments that had such a tail
	Oldest          time.Time // append time of the oldest record not yet done; zero when none
	Fsyncs          int64     // group commits (one fdatasync each)
	Appends         int64     // records appended since Open
	// FsyncCounts counts the groups' fdatasyncs by how long each took:
	// FsyncCounts[i] those that took at most FsyncBounds[i] and longer than
	// FsyncBounds[i-1]; the last element those longer than every bound.
	// With Options.NoSync there are none.
	FsyncCounts [len(fsyncBoundsUs) + 1]int64
	// FsyncTotal is the time of all the fdatasyncs counted in FsyncCounts.
	FsyncTotal time.Duration
}

// fsyncBoundsUs are FsyncBounds in microseconds: 1, 1.5, 2, 3, 4, 5 and 7
// times each power of ten from 0.1 ms to 1 s, then 10 s. The steps are
// fine enough to read a disk's flush time under load to within a third.
var fsyncBoundsUs = [...]int64{
	100, 150, 200, 300, 400, 500, 700,
	1e3, 1.5e3, 2e3, 3e3, 4e3, 5e3, 7e3,
	10e3, 15e3, 20e3, 30e3, 40e3, 50e3, 70e3,
	100e3, 150e3, 200e3, 300e3, 400e3, 500e3, 700e3,
	1e6, 1.5e6, 2e6, 3e6, 4e6, 5e6, 7e6,
	10e6,
}

// FsyncBounds are the upper bounds of the buckets of Stats.FsyncCounts.
var FsyncBounds = func() []time.Duration {
	b := make([]time.Duration, len(fsyncBoundsUs))
	for i, us := range fsyncBoundsUs {
		b[i] = time.Duration(us) * time.Microsecond
	}
	return b
}()

// countFsync adds an fdatasync that took d to st.
func (st *Stats) countFsync(d time.Duration) {
	i, _ := slices.BinarySearch(FsyncBounds, d)
	st.FsyncCounts[i]++
	st.FsyncTotal += d
}

// Spool is an open log. It is safe for concurrent use.
type Spool struct {
	opts  Options
	log   *slog.Logger
	lock  *os.File
	slots int // sync slots: group fdatasyncs that may run at once

	mu       sync.Mutex
	segs     []*segment // in order; the last is the active one
	bytes    int64
	next     uint64                // sequence number of the next record answered nil
	pending  map[uint64]pendingRec // records not yet done
	low      uint64                // no record below low is pending
	closed   bool
	broken   error // set when the log cannot be written safely any more
	stats    Stats
	reserved int64 // bytes of records queued for the writer or in flight, not yet answered

	// The group commits in flight, all in the active segment: the writer
	// waits for them before it starts a new one.
	inflight   []*group // written and not yet answered, in order
	busy       []bool   // sync slot i has a group whose fdatasync has not returned
	zeroing    bool     // a zero-fill is being written or made durable
	failErr    error    // a write or fdatasync of the active segment failed: nothing more of it is answered nil
	failRecs   int64    // records of the groups failed since, written to the active segment
	wantRotate bool     // the active segment's records were all done (Done asked for a new segment)
	jobs       uint64   // groups written

	sendMu  sync.RWMutex // held for reading around a send on queue, for writing by Close
	queue   chan *appendReq
	rotate  chan struct{}  // asks the writer to start a new segment (the active one is all done)
	wake    chan struct{}  // wakes the writer: an fdatasync returned
	flushWG sync.WaitGroup // the writer
	syncWG  sync.WaitGroup // the fdatasync goroutines
}

type segment struct {
	first   uint64 // sequence number of its first record (its name)
	path    string
	f       *os.File   // open for writing: the active segment only
	syncF   []*os.File // one more open file description per sync slot: the active segment only (none with NoSync)
	size    int64      // bytes of its records (answered nil)
	end     int64      // bytes written: size plus the groups in flight or failed
	alloc   int64      // bytes of the file: end plus the zero-filled tail (active segment)
	noAlloc bool       // a zero-fill or a group failed: append to this segment from now on
	records int        // records in it
	done    int        // of those, done
}

// group is one group commit: records written with one write and made
// durable with one fdatasync.
type group struct {
	id     uint64
	seg    *segment
	reqs   []*appendReq
	size   int64         // bytes of its records
	slot   int           // its sync slot
	synced bool          // its write and fdatasync have returned
	took   time.Duration // how long its fdatasync took; zero when none ran
	// durable: a later group's fdatasync returned nil (see complete), so
	// it may be answered before its own fdatasync returns.
	durable bool
}

type pendingRec struct {
	seg *segment
	at  int64 // append time, Unix nanoseconds
}

type appendReq struct {
	payload []byte
	at      int64
	seq     uint64
	err     error
	done    chan struct{}
}

// Record is a replayed record.
type Record struct {
	Seq     uint64
	Time    time.Time
	Payload []byte
}

// Open opens (or creates) the log in opts.Dir, takes its lock, and calls
// replay with every valid record in order (before Open returns; replay
// must not call Append). The records replayed are pending: call Done for
// each once stored. Replay is at least once: a record marked done in a
// segment that still had pending records is replayed again (the span
// store's writes are idempotent).
func Open(opts Options, replay func(Record)) (*Spool, error) {
	if opts.Dir == "" {
		return nil, errors.New("spool: Options.Dir is empty")
	}
	if opts.MaxBytes == 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.SegmentBytes == 0 {
		opts.SegmentBytes = DefaultSegmentBytes
	}
	if opts.MaxBytes < 0 || opts.SegmentBytes < 0 {
		return nil, errors.New("spool: MaxBytes and SegmentBytes must not be negative (0 is the default)")
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.Default()
	}
	slots := syncSlots
	if opts.hooks != nil && opts.hooks.slots > 0 {
		slots = opts.hooks.slots
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(opts.Dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s (another zipkin-mysql uses it; give each server its own -spool-dir)", ErrLocked, opts.Dir)
		}
		return nil, fmt.Errorf("spool: lock %s: %w", opts.Dir, err)
	}
	s := &Spool{opts: opts, log: lg, lock: lock, slots: slots, busy: make([]bool, slots),
		pending: map[uint64]pendingRec{}, next: 1, low: 1,
		queue: make(chan *appendReq, 4096), rotate: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
	if err := s.load(replay); err != nil {
		s.closeFiles()
		return nil, err
	}
	s.flushWG.Add(1)
	go s.flusher()
	return s, nil
}

// load reads the segments, replays their records and opens a new active
// segment.
func (s *Spool) load(replay func(Record)) error {
	entries, err := os.ReadDir(s.opts.Dir)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	var firsts []uint64
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".log") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(name, ".log"), 10, 64)
		if err != nil {
			continue
		}
		firsts = append(firsts, n)
	}
	sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
	for _, first := range firsts {
		if first > s.next {
			s.next = first
		}
		seg := &segment{first: first, path: s.segPath(first)}
		if err := s.readSegment(seg, replay); err != nil {
			return err
		}
		if seg.records == 0 {
			_ = os.Remove(seg.path)
			continue
		}
		s.segs = append(s.segs, seg)
		s.bytes += seg.size
	}
	s.low = s.next
	for seq := range s.pending {
		s.low = min(s.low, seq)
	}
	return s.startSegment()
}

// readSegment replays the valid records of seg, cutting a corrupt tail.
func (s *Spool) readSegment(seg *segment, replay func(Record)) error {
	b, err := os.ReadFile(seg.path)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	off := 0
	seq := seg.first
	for off < len(b) {
		if len(b)-off < headerBytes {
			break
		}
		n := int(binary.LittleEndian.Uint32(b[off:]))
		sum := binary.LittleEndian.Uint32(b[off+4:])
		if n < 8 || n-8 > MaxRecordBytes || off+8+n > len(b) || crc32.Checksum(b[off+8:off+8+n], castagnoli) != sum {
			break
		}
		at := int64(binary.LittleEndian.Uint64(b[off+8:]))
		payload := b[off+16 : off+8+n]
		s.pending[seq] = pendingRec{seg: seg, at: at}
		seg.records++
		s.stats.Replayed++
		if replay != nil {
			replay(Record{Seq: seq, Time: time.Unix(0, at), Payload: payload})
		}
		seq++
		off += 8 + n
	}
	if off < len(b) && allZero(b[off:]) {
		// The zero-filled tail of a segment that was active when its
		// process died: the end of its records, not corruption.
		if err := os.Truncate(seg.path, int64(off)); err != nil {
			return fmt.Errorf("spool: cutting the preallocated tail of %s: %w", seg.path, err)
		}
	} else if off < len(b) {
		s.stats.CorruptBytes += int64(len(b) - off)
		s.stats.CorruptSegments++
		s.log.Error("spool: corrupt or truncated tail cut; the records in it are lost",
			"segment", seg.path, "valid_records", seg.records, "valid_bytes", off, "cut_bytes", len(b)-off)
		if err := os.Truncate(seg.path, int64(off)); err != nil {
			return fmt.Errorf("spool: cutting the corrupt tail of %s: %w", seg.path, err)
		}
	}
	seg.size = int64(off)
	seg.end, seg.alloc = seg.size, seg.size
	if seq > s.next {
		s.next = seq
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func (s *Spool) segPath(first uint64) string {
	return filepath.Join(s.opts.Dir, fmt.Sprintf("%020d.log", first))
}

// startSegment seals the active segment (if any) and creates a new one
// starting at s.next. Called with mu held and no fdatasync running (or
// before the writer starts). When the new segment cannot be created, the
// active one stays active.
func (s *Spool) startSegment() error {
	seg := &segment{first: s.next, path: s.segPath(s.next)}
	if n := len(s.segs); n > 0 && s.segs[n-1].first == seg.first {
		return nil // the active segment has no record yet: it starts at s.next already
	}
	// Not O_APPEND: records are written at the segment's end, inside its
	// zero-filled tail.
	f, err := os.OpenFile(seg.path, os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	seg.f = f
	if seg.syncF, err = s.openSlots(seg.path); err != nil {
		_ = f.Close()
		return err
	}
	if n := len(s.segs); n > 0 && s.segs[n-1].f != nil {
		s.seal(s.segs[n-1])
	}
	if !s.opts.NoSync {
		if d, err := os.Open(s.opts.Dir); err == nil { // the new name is durable too
			_ = d.Sync()
			d.Close()
		}
	}
	s.segs = append(s.segs, seg)
	s.trimLocked()
	return nil
}

// openSlots opens path once per sync slot, each a new open file
// description with its own writeback error cursor (none with NoSync).
func (s *Spool) openSlots(path string) ([]*os.File, error) {
	if s.opts.NoSync {
		return nil, nil
	}
	fs := make([]*os.File, s.slots)
	for i := range fs {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			closeAll(fs)
			return nil, fmt.Errorf("spool: %w", err)
		}
		fs[i] = f
	}
	return fs, nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			_ = f.Close()
		}
	}
}

// seal cuts the zero-filled tail of the active segment seg and closes its
// files. Called with no fdatasync of seg running. A tail that cannot be
// cut stays (Open reads it as the end of the records).
func (s *Spool) seal(seg *segment) {
	if seg.alloc > seg.size {
		if err := seg.f.Truncate(seg.size); err != nil {
			s.log.Warn("spool: cannot cut the preallocated tail of a sealed segment; it stays until the segment is deleted",
				"segment", seg.path, "err", err)
		}
		seg.alloc = seg.size
	}
	_ = seg.f.Close()
	seg.f = nil
	closeAll(seg.syncF)
	seg.syncF = nil
}

// preallocate zero-fills the active segment up to preallocBytes past its
// records (SegmentBytes at most), when fewer than half of that are left,
// and starts the fdatasync that makes the zeros durable on the segment's
// writing description (a sync slot's error cursor is left to its groups).
// It runs on the writer while no Append waits, after a group was written
// or a new segment asked for; it reports false when it has to be tried
// again later (the previous zero-fill's fdatasync still runs). A failed
// write (a full disk) cuts the partial fill; it, or a failed fdatasync,
// leaves the segment to be appended to.
func (s *Spool) preallocate(zeros []byte) bool {
	s.mu.Lock()
	seg := s.segs[len(s.segs)-1]
	chunk := min(int64(preallocBytes), s.opts.SegmentBytes)
	from := max(seg.alloc, seg.end)
	to := min(seg.end+chunk, max(s.opts.SegmentBytes, seg.end))
	if s.opts.NoSync || seg.noAlloc || seg.f == nil || s.failErr != nil || from-seg.end >= chunk/2 || to <= from {
		s.mu.Unlock()
		return true
	}
	if s.zeroing {
		s.mu.Unlock()
		return false
	}
	s.zeroing = true
	s.mu.Unlock()
	var err error
	for off := from; off < to && err == nil; {
		n := min(int64(len(zeros)), to-off)
		_, err = seg.f.WriteAt(zeros[:n], off)
		off += n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.zeroing = false
		seg.noAlloc = true
		// from is past every group written: cutting there leaves them.
		if terr := seg.f.Truncate(from); terr != nil {
			// The zeros past from stay; Open reads them as the end of the
			// records, and the records written over them are whole.
			seg.alloc = to
			s.log.Warn("spool: cannot cut a failed preallocation", "segment", seg.path, "err", terr)
			return true
		}
		s.log.Warn("spool: cannot preallocate the active segment; appending to it instead (each group then waits for a journal commit)",
			"segment", seg.path, "err", err)
		return true
	}
	seg.alloc = to
	s.syncWG.Add(1)
	go func() {
		defer s.syncWG.Done()
		err := fdatasync(seg.f)
		s.mu.Lock()
		s.zeroing = false
		if err != nil {
			// Groups may be written over the zeros already: they stay.
			// A group whose own pages failed learns it from its own
			// fdatasync (each sync slot sees every error since its last).
			seg.noAlloc = true
			s.log.Warn("spool: cannot make the preallocation of the active segment durable; appending to it instead (each group then waits for a journal commit)",
				"segment", seg.path, "err", err)
		}
		s.mu.Unlock()
		s.poke()
	}()
	return true
}

// fdatasync makes f's data durable, and its size when that changed.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

// Append writes payload as one record and returns once it is durable (or
// the write failed). It returns ErrFull at once when the record would take
// the log past MaxBytes.
func (s *Spool) Append(payload []byte) (uint64, error) {
	if len(payload) > MaxRecordBytes {
		return 0, fmt.Errorf("spool: record of %d bytes is larger than %d", len(payload), MaxRecordBytes)
	}
	size := int64(headerBytes + len(payload))
	s.sendMu.RLock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.sendMu.RUnlock()
		return 0, ErrClosed
	}
	if s.broken != nil {
		err := s.broken
		s.mu.Unlock()
		s.sendMu.RUnlock()
		return 0, err
	}
	if s.bytes+s.reserved+size > s.opts.MaxBytes {
		s.mu.Unlock()
		s.sendMu.RUnlock()
		return 0, ErrFull
	}
	s.reserved += size
	s.mu.Unlock()
	r := &appendReq{payload: payload, at: time.Now().UnixNano(), done: make(chan struct{})}
	s.queue <- r
	s.sendMu.RUnlock()
	<-r.done
	return r.seq, r.err
}

// flusher is the writer: it takes every append waiting, writes them with
// one write at the end of the active segment, and starts the group's
// fdatasync on a free sync slot, while up to s.slots earlier ones run.
func (s *Spool) flusher() {
	defer s.flushWG.Done()
	var buf []byte
	zeros := make([]byte, 64<<10)
	allocDue := false // a group was written or a rotation asked for since the last zero-fill check
	for {
		s.mu.Lock()
		s.segmentReadyLocked()
		s.mu.Unlock()
		if allocDue && len(s.queue) == 0 {
			allocDue = !s.preallocate(zeros)
		}
		var r *appendReq
		select {
		case <-s.rotate:
			s.mu.Lock()
			s.wantRotate = true
			s.mu.Unlock()
			allocDue = true
			continue
		case <-s.wake:
			continue
		case rr, ok := <-s.queue:
			if !ok {
				s.drain()
				return
			}
			r = rr
		}
		// The slot is taken before the group is gathered (so that what
		// arrives while every slot is busy joins it) and before it is
		// written (so that the slot's fdatasync sees every error of it).
		slot := s.acquire()
		reqs := []*appendReq{r}
	more:
		for len(reqs) < maxGroup {
			select {
			case r2, ok := <-s.queue:
				if !ok {
					break more
				}
				reqs = append(reqs, r2)
			default:
				break more
			}
		}
		if slot < 0 {
			s.refuse(reqs)
			continue
		}
		buf = buf[:0]
		for _, r := range reqs {
			var h [headerBytes]byte
			binary.LittleEndian.PutUint32(h[0:], uint32(8+len(r.payload)))
			binary.LittleEndian.PutUint64(h[8:], uint64(r.at))
			c := crc32.Update(0, castagnoli, h[8:16])
			c = crc32.Update(c, castagnoli, r.payload)
			binary.LittleEndian.PutUint32(h[4:], c)
			buf = append(buf, h[:]...)
			buf = append(buf, r.payload...)
		}
		s.mu.Lock()
		seg := s.segs[len(s.segs)-1]
		g := &group{id: s.jobs, seg: seg, reqs: reqs, size: int64(len(buf)), slot: slot}
		s.jobs++
		off := seg.end
		seg.end += g.size
		seg.alloc = max(seg.alloc, seg.end)
		s.inflight = append(s.inflight, g)
		var f *os.File
		if seg.syncF != nil {
			f = seg.syncF[slot]
		}
		s.mu.Unlock()
		// The writer alone writes the active segment and moves its end.
		_, err := seg.f.WriteAt(buf, off)
		if err != nil || f == nil {
			s.complete(g, err, false)
			allocDue = true
			continue
		}
		s.syncWG.Add(1)
		go s.syncGroup(g, f)
		allocDue = true
	}
}

// acquire waits until a group may be written to the active segment and
// takes a free sync slot for it. It returns -1 when the spool is broken.
func (s *Spool) acquire() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.broken != nil {
			return -1
		}
		if s.segmentReadyLocked() {
			for i, b := range s.busy {
				if !b {
					s.busy[i] = true
					return i
				}
			}
		}
		s.mu.Unlock()
		<-s.wake
		s.mu.Lock()
	}
}

// refuse answers reqs with the error that broke the spool.
func (s *Spool) refuse(reqs []*appendReq) {
	s.mu.Lock()
	err := s.broken
	for _, r := range reqs {
		s.reserved -= int64(headerBytes + len(r.payload))
	}
	s.mu.Unlock()
	for _, r := range reqs {
		r.err = err
		close(r.done)
	}
}

// segmentReadyLocked makes the active segment fit for the next group once
// no fdatasync of it runs: it cuts a failed segment back and goes on in a
// new one, and starts a new segment when the active one is full or all
// done (Done asked). It reports false while that waits for fdatasyncs.
// Called by the writer with mu held.
func (s *Spool) segmentReadyLocked() bool {
	seg := s.segs[len(s.segs)-1]
	if s.wantRotate && (len(s.inflight) > 0 || seg.records == 0 || seg.done < seg.records) {
		s.wantRotate = false // records came since: no longer all done
	}
	if s.failErr == nil && seg.end < s.opts.SegmentBytes && !s.wantRotate {
		return true
	}
	if len(s.inflight) > 0 || s.zeroing || s.syncingLocked() {
		return false
	}
	switch {
	case s.failErr != nil:
		s.recoverLocked(false)
	case seg.end >= s.opts.SegmentBytes:
		if err := s.startSegment(); err != nil {
			s.log.Error("spool: cannot start a new segment", "err", err)
		}
	default:
		if err := s.startSegment(); err != nil {
			s.log.Warn("spool: cannot start a new segment; the stored one stays until the next", "err", err)
		}
	}
	s.wantRotate = false
	return true
}

// syncGroup makes group g durable with an fdatasync on f, its slot's open
// file description.
func (s *Spool) syncGroup(g *group, f *os.File) {
	defer s.syncWG.Done()
	var err error
	t0 := time.Now()
	if h := s.opts.hooks; h != nil && h.sync != nil {
		err = h.sync(f, g.id)
	} else {
		err = fdatasync(f)
	}
	g.took = time.Since(t0)
	s.complete(g, err, true)
}

// complete takes the result of group g's write and, when synced, its
// fdatasync; it frees g's slot and answers every group now durable, in
// order.
//
// A group is durable once its own fdatasync or that of a later group of
// the segment returned nil. A later group was written after it, so that
// fdatasync, called after that write, flushed or waited for every page of
// the earlier group too (it covers the whole file, whatever description
// it is called on) and reported any writeback error of the file since its
// own description's last fdatasync; an error before that was reported
// then and failed every group after it. So a group is not kept waiting
// behind a slower fdatasync of an earlier one.
func (s *Spool) complete(g *group, err error, synced bool) {
	s.mu.Lock()
	s.busy[g.slot] = false
	g.synced = true
	if g.took > 0 {
		s.stats.countFsync(g.took)
	}
	if err != nil && s.failErr == nil {
		s.failErr = fmt.Errorf("spool: write: %w", err)
	}
	if synced && err == nil && s.failErr == nil {
		for _, h := range s.inflight {
			if h.id > g.id {
				break
			}
			h.durable = true
		}
	}
	// Answer the oldest groups that are durable or whose fdatasyncs
	// returned: nil only while no write or fdatasync of the segment has
	// failed.
	for len(s.inflight) > 0 && (s.inflight[0].synced || s.inflight[0].durable) {
		h := s.inflight[0]
		s.inflight[0] = nil
		s.inflight = s.inflight[1:]
		s.stats.Fsyncs++
		s.reserved -= h.size
		ferr := s.failErr
		if ferr == nil {
			seg := h.seg
			for _, r := range h.reqs {
				r.seq = s.next
				s.next++
				s.pending[r.seq] = pendingRec{seg: seg, at: r.at}
				seg.records++
			}
			seg.size += h.size
			s.bytes += h.size
			s.stats.Appends += int64(len(h.reqs))
		} else {
			s.failRecs += int64(len(h.reqs))
		}
		if hk := s.opts.hooks; hk != nil && hk.answered != nil {
			hk.answered(h.id, ferr)
		}
		// Closed with mu held, so that no later group's answer is seen first.
		for _, r := range h.reqs {
			r.err = ferr
			close(r.done)
		}
	}
	s.mu.Unlock()
	s.poke()
	if hk := s.opts.hooks; hk != nil && hk.synced != nil {
		hk.synced(g.id)
	}
}

// syncingLocked reports whether a group's write or fdatasync has not
// returned yet: the group may be answered already (durable), but its
// fdatasync still runs on the segment's files.
func (s *Spool) syncingLocked() bool {
	for _, b := range s.busy {
		if b {
			return true
		}
	}
	return false
}

// poke wakes the writer.
func (s *Spool) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// recoverLocked cuts the active segment, whose write or fdatasync failed,
// back to the end of its last group answered nil, and goes on in a new
// segment (unless closing). Called by the writer with mu held and no
// fdatasync running.
func (s *Spool) recoverLocked(closing bool) {
	seg := s.segs[len(s.segs)-1]
	err, recs := s.failErr, s.failRecs
	s.failErr, s.failRecs = nil, 0
	seg.noAlloc = true
	cut := seg.end - seg.size
	terr := seg.f.Truncate(seg.size)
	if terr == nil {
		seg.end, seg.alloc = seg.size, seg.size
	} else {
		// The failed records stay (the next Open replays them, at least
		// once): counted until the segment is trimmed, and their sequence
		// numbers skipped, so that the next segment's do not repeat them.
		seg.size = seg.end
		s.bytes += cut
		s.next += uint64(recs)
	}
	s.log.Warn("spool: a write or fdatasync failed; its appends and those after it got the error",
		"segment", seg.path, "failed_records", recs, "err", err, "cut_bytes", cut, "cut_err", terr)
	if closing {
		return
	}
	var serr error
	if seg.first != s.next {
		serr = s.startSegment()
		if serr == nil {
			return
		}
	}
	// The same segment goes on (it has no record, or no new segment could
	// be created): on new open file descriptions, whose error cursors start
	// after the failure.
	if terr == nil {
		fs, oerr := s.openSlots(seg.path)
		if oerr == nil {
			closeAll(seg.syncF)
			seg.syncF = fs
			return
		}
		serr = errors.Join(serr, oerr)
	}
	s.broken = fmt.Errorf("spool: after a failed write (%v) neither cutting it (%v) nor a new segment (%v) worked", err, terr, serr)
	s.log.Error(s.broken.Error())
}

// drain waits for the fdatasyncs still running, then cuts a failed
// segment back. The writer's last act.
func (s *Spool) drain() {
	s.mu.Lock()
	for len(s.inflight) > 0 || s.zeroing || s.syncingLocked() {
		s.mu.Unlock()
		<-s.wake
		s.mu.Lock()
	}
	if s.failErr != nil {
		s.recoverLocked(true)
	}
	s.mu.Unlock()
	s.syncWG.Wait()
}

// Done marks record seq stored; the segments whose records are all done
// are deleted (except the active one). Done of an unknown or already done
// record does nothing.
func (s *Spool) Done(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pending[seq]
	if !ok {
		return
	}
	delete(s.pending, seq)
	p.seg.done++
	if seq == s.low {
		for s.low < s.next {
			if _, ok := s.pending[s.low]; ok {
				break
			}
			s.low++
		}
	}
	if p.seg.done == p.seg.records {
		s.trimLocked()
		// The active segment is all done: once it holds a sixteenth of a
		// segment, or the log is over half its bound, have the flusher start
		// a new one, so that this one can go (else a log smaller than a
		// segment would never be trimmed).
		if p.seg == s.segs[len(s.segs)-1] && (p.seg.size >= s.opts.SegmentBytes/16 || s.bytes > s.opts.MaxBytes/2) {
			select {
			case s.rotate <- struct{}{}:
			default:
			}
		}
	}
}

// trimLocked deletes sealed segments whose records are all done.
func (s *Spool) trimLocked() {
	kept := s.segs[:0]
	for i, seg := range s.segs {
		if i < len(s.segs)-1 && seg.done == seg.records && seg.f == nil {
			if err := os.Remove(seg.path); err != nil && !errors.Is(err, os.ErrNotExist) {
				s.log.Warn("spool: cannot delete a stored segment", "segment", seg.path, "err", err)
				kept = append(kept, seg)
				continue
			}
			s.bytes -= seg.size
			continue
		}
		kept = append(kept, seg)
	}
	for i := len(kept); i < len(s.segs); i++ {
		s.segs[i] = nil
	}
	s.segs = kept
}

// Stats returns the spool's gauges and counters.
func (s *Spool) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Bytes = s.bytes
	st.Records = int64(len(s.pending))
	if p, ok := s.pending[s.low]; ok {
		st.Oldest = time.Unix(0, p.at)
	}
	return st
}

// Close stops accepting appends, waits for the appends in flight and
// their fdatasyncs, closes the files and releases the lock. Records not
// done stay in the log for the next Open.
func (s *Spool) Close() error {
	s.sendMu.Lock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.sendMu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.queue) // no Append is between its check of closed and its send
	s.sendMu.Unlock()
	s.flushWG.Wait()
	s.closeFiles()
	return nil
}

func (s *Spool) closeFiles() {
	s.mu.Lock()
	for _, seg := range s.segs {
		if seg.f != nil {
			s.seal(seg)
		}
	}
	s.mu.Unlock()
	if s.lock != nil {
		_ = syscall.Flock(int(s.lock.Fd()), syscall.LOCK_UN)
		_ = s.lock.Close()
		s.lock = nil
	}
}
