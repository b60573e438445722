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
// Appends are group-committed: one goroutine takes every record waiting
// (without waiting for more: a lone Append is written at once), writes
// them with one write and makes them durable with one fdatasync, then
// answers each Append. A record is therefore on disk when Append returns,
// whatever happens to the process afterwards (SIGKILL, OOM kill); a power
// cut can cut only records whose Append had not returned.
//
// # Preallocation
//
// The active segment is zero-filled (and made durable) ahead of its
// records, up to preallocBytes (1 MiB, or SegmentBytes when smaller) at a
// time, while no Append waits, so that a group of records overwrites
// blocks that are already allocated and the fdatasync that makes it
// durable writes only those blocks and flushes the disk's cache: the file's
// size and block map do not change, so on a journaling file system (ext4,
// XFS) it waits for no journal commit, which on a disk shared with a
// database is what an fsync of an appended file mostly waits for. When the
// zero-fill fails (a full disk) the segment is appended to instead. The
// zero tail is cut when a segment is sealed or the spool closed, and a
// zero tail found by Open (a killed process) is the end of the records,
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
// closed and a new one started when all its records are done and it holds
// a sixteenth of Options.SegmentBytes or the log is over half its bound.
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
}

// Spool is an open log. It is safe for concurrent use.
type Spool struct {
	opts Options
	log  *slog.Logger
	lock *os.File

	mu       sync.Mutex
	segs     []*segment // in order; the last is the active one
	bytes    int64
	next     uint64                // sequence number of the next record
	pending  map[uint64]pendingRec // records not yet done
	low      uint64                // no record below low is pending
	closed   bool
	broken   error // set when the log cannot be written safely any more
	stats    Stats
	reserved int64 // bytes of records queued for the flusher

	sendMu  sync.RWMutex // held for reading around a send on queue, for writing by Close
	queue   chan *appendReq
	rotate  chan struct{} // asks the flusher to start a new segment (the active one is all done)
	flushWG sync.WaitGroup
}

type segment struct {
	first   uint64 // sequence number of its first record (its name)
	path    string
	f       *os.File // open for writing: the active segment only
	size    int64    // bytes of its records
	alloc   int64    // bytes of the file: size plus the zero-filled tail (active segment)
	noAlloc bool     // a zero-fill failed (a full disk): append to this segment from now on
	records int      // records in it
	done    int      // of those, done
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
	s := &Spool{opts: opts, log: lg, lock: lock, pending: map[uint64]pendingRec{}, next: 1, low: 1,
		queue: make(chan *appendReq, 4096), rotate: make(chan struct{}, 1)}
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
	seg.alloc = seg.size
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
// starting at s.next. Called with mu held (or before the flusher starts).
// When the new segment cannot be created, the active one stays active.
func (s *Spool) startSegment() error {
	seg := &segment{first: s.next, path: s.segPath(s.next)}
	if n := len(s.segs); n > 0 && s.segs[n-1].first == seg.first {
		return nil // the active segment has no record yet: it starts at s.next already
	}
	// Not O_APPEND: records are written at the segment's size, inside its
	// zero-filled tail.
	f, err := os.OpenFile(seg.path, os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if n := len(s.segs); n > 0 && s.segs[n-1].f != nil {
		s.seal(s.segs[n-1])
	}
	seg.f = f
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

// seal cuts the zero-filled tail of the active segment seg and closes it.
// A tail that cannot be cut stays (Open reads it as the end of the
// records).
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
}

// preallocate zero-fills the active segment seg up to preallocBytes past
// its records (SegmentBytes at most) and makes the zeros durable, when
// fewer than half of that are left. It runs on the flusher while no
// Append waits. A failure (a full disk) cuts the partial fill and leaves
// seg to be appended to.
func (s *Spool) preallocate(seg *segment, zeros []byte) {
	chunk := min(int64(preallocBytes), s.opts.SegmentBytes)
	from := max(seg.alloc, seg.size)
	to := min(seg.size+chunk, max(s.opts.SegmentBytes, seg.size))
	if s.opts.NoSync || seg.noAlloc || seg.f == nil || from-seg.size >= chunk/2 || to <= from {
		return
	}
	var err error
	for off := from; off < to && err == nil; {
		n := min(int64(len(zeros)), to-off)
		_, err = seg.f.WriteAt(zeros[:n], off)
		off += n
	}
	if err == nil {
		err = fdatasync(seg.f)
	}
	if err != nil {
		seg.noAlloc = true
		if terr := seg.f.Truncate(from); terr != nil {
			// The zeros past from stay; Open reads them as the end of the
			// records, and the records written over them are whole.
			s.log.Warn("spool: cannot cut a failed preallocation", "segment", seg.path, "err", terr)
			return
		}
		seg.alloc = from
		s.log.Warn("spool: cannot preallocate the active segment; appending to it instead (each group then waits for a journal commit)",
			"segment", seg.path, "err", err)
		return
	}
	seg.alloc = to
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

// flusher is the group commit: it takes every append waiting, writes them
// with one write, fsyncs once, and answers them.
func (s *Spool) flusher() {
	defer s.flushWG.Done()
	var buf []byte
	var group []*appendReq
	zeros := make([]byte, 64<<10)
	for {
		var r *appendReq
		select {
		case <-s.rotate:
			s.mu.Lock()
			if seg := s.segs[len(s.segs)-1]; seg.records > 0 && seg.done == seg.records {
				if err := s.startSegment(); err != nil {
					s.log.Warn("spool: cannot start a new segment; the stored one stays until the next", "err", err)
				}
			}
			seg := s.segs[len(s.segs)-1]
			s.mu.Unlock()
			if len(s.queue) == 0 {
				s.preallocate(seg, zeros)
			}
			continue
		case rr, ok := <-s.queue:
			if !ok {
				return
			}
			r = rr
		}
		group = append(group[:0], r)
	more:
		for len(group) < 4096 {
			select {
			case r2, ok := <-s.queue:
				if !ok {
					break more
				}
				group = append(group, r2)
			default:
				break more
			}
		}
		buf = buf[:0]
		for _, r := range group {
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
		s.mu.Unlock()
		// The flusher alone writes seg and its size and alloc.
		_, err := seg.f.WriteAt(buf, seg.size)
		if err == nil && !s.opts.NoSync {
			err = fdatasync(seg.f)
		}
		s.mu.Lock()
		s.stats.Fsyncs++
		var size int64
		for _, r := range group {
			size += int64(headerBytes + len(r.payload))
		}
		s.reserved -= size
		if err != nil {
			// What was written may be partly on disk (a full disk): cut the
			// segment back to its last whole record, so that later records
			// never follow a torn one; if that fails, go on in a new
			// segment, and if that fails too, refuse appends from now on.
			err = fmt.Errorf("spool: write: %w", err)
			seg.noAlloc = true
			terr := seg.f.Truncate(seg.size)
			if terr == nil {
				seg.alloc = seg.size
			} else {
				seg.size += size // counted until the segment is trimmed
				s.bytes += size
				if serr := s.startSegment(); serr != nil {
					s.broken = fmt.Errorf("spool: after a failed write (%v) neither cutting it (%v) nor a new segment (%v) worked", err, terr, serr)
					s.log.Error(s.broken.Error())
				}
			}
		} else {
			for _, r := range group {
				r.seq = s.next
				s.next++
				s.pending[r.seq] = pendingRec{seg: seg, at: r.at}
				seg.records++
			}
			seg.size += size
			seg.alloc = max(seg.alloc, seg.size)
			s.bytes += size
			s.stats.Appends += int64(len(group))
			if seg.size >= s.opts.SegmentBytes {
				if e := s.startSegment(); e != nil {
					s.log.Error("spool: cannot start a new segment", "err", e)
				}
			}
		}
		seg = s.segs[len(s.segs)-1] // a new one when the group filled the last
		s.mu.Unlock()
		for _, r := range group {
			r.err = err
			close(r.done)
		}
		if len(s.queue) == 0 {
			s.preallocate(seg, zeros)
		}
	}
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

// Close stops accepting appends, waits for the appends in flight, closes
// the files and releases the lock. Records not done stay in the log for
// the next Open.
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
