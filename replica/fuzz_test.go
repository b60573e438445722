package replica_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/replica"
)

// The generative check: workers interleave writes, token reads of several kinds (the reader, a
// read-only transaction on the reader, a read-only transaction routed from the writer, two reads
// on one sql.Conn), with tokens per context, per key and round-tripped as text, while a chaos
// worker makes replicas lag (SQL thread stopped 0–2 s, MASTER_DELAY) and kills and restarts
// them. Every read is a snapshot of the clock row and every data row; it must not be older than
// its token's own commits or than what the token read before (stale), and must be a state the
// primary went through (checked after the run against the history of commits). A failing
// program is shrunk by dropping operations.
//
// SQLPOOL_REPLICA_FUZZ_STEPS sets the number of worker steps (default 3000; 100000 by hand),
// SQLPOOL_REPLICA_FUZZ_SEED the seed (default: time).
func TestFuzzReadYourWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a MariaDB primary and two replicas, makes them lag, kills them")
	}
	steps := envInt("SQLPOOL_REPLICA_FUZZ_STEPS", 3000)
	seed := uint64(envInt("SQLPOOL_REPLICA_FUZZ_SEED", int(time.Now().UnixNano()%1e9)))
	t.Logf("seed %d (SQLPOOL_REPLICA_FUZZ_SEED), %d steps", seed, steps)
	b := newBed(t, replica.Config{Mode: replica.PerToken, RouteReadOnly: true, WaitTimeout: 250 * time.Millisecond,
		MaxReplicaLag: 5 * time.Second})
	prog := generate(rand.New(rand.NewPCG(seed, 1)), steps)
	start := time.Now()
	res := run(t, b, prog)
	t.Logf("%d steps (%d reads, %d writes, %d lag/kill/sleep events, %d calls failed while a replica was killed under them) in %v; stats %+v",
		res.steps, res.reads, res.writes, res.chaos, res.inFlight,
		time.Since(start).Round(time.Millisecond), b.r.Stats())
	if res.err == nil {
		return
	}
	t.Errorf("seed %d: %v", seed, res.err)
	small := shrink(t, b, prog, time.Minute)
	t.Errorf("shrunk program (%d worker ops, %d chaos ops):\n%s", small.size(), len(small.chaos), small)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

type opKind int

const (
	opWrite    opKind = iota
	opRead            // QueryContext on the reader
	opReaderTx        // read-only transaction on the reader
	opWriterRO        // read-only transaction on the writer (routed)
	opConn            // two reads on one sql.Conn of the reader
)

var opNames = [...]string{"write", "read", "reader-tx", "writer-ro-tx", "conn"}

type op struct {
	kind opKind
	k    int // row of a write
}

type chaosKind int

const (
	chaosPause chaosKind = iota // SQL thread stopped for d
	chaosDelay                  // MASTER_DELAY=1 for d
	chaosKill                   // killed, restarted after d
	chaosSleep
)

var chaosNames = [...]string{"pause", "delay", "kill", "sleep"}

type chaos struct {
	kind chaosKind
	i    int
	d    time.Duration
}

// token kinds of the workers: 0 a Token in the context, 1 a key, 2 a Token round-tripped as
// text before every call.
const workers = 6

type program struct {
	ops   [workers][]op
	chaos []chaos
}

func (p program) size() int {
	n := 0
	for _, w := range p.ops {
		n += len(w)
	}
	return n
}

func (p program) String() string {
	var b strings.Builder
	for w, ops := range p.ops {
		fmt.Fprintf(&b, "worker %d (token %s):", w, [...]string{"context", "key", "text"}[w%3])
		for _, o := range ops {
			if o.kind == opWrite {
				fmt.Fprintf(&b, " write(%d)", o.k)
			} else {
				fmt.Fprintf(&b, " %s", opNames[o.kind])
			}
		}
		b.WriteByte('\n')
	}
	b.WriteString("chaos:")
	for _, c := range p.chaos {
		fmt.Fprintf(&b, " %s(%d,%v)", chaosNames[c.kind], c.i, c.d)
	}
	return b.String()
}

func generate(rng *rand.Rand, steps int) program {
	var p program
	for s := 0; s < steps; s++ {
		w := s % workers
		o := op{kind: opKind(rng.IntN(5))}
		if rng.IntN(3) == 0 {
			o.kind = opWrite
		}
		o.k = rng.IntN(8)
		p.ops[w] = append(p.ops[w], o)
	}
	// About one chaos event per 150 steps, lag 0–2 s.
	for range steps/150 + 1 {
		c := chaos{i: rng.IntN(2), d: time.Duration(rng.IntN(2001)) * time.Millisecond}
		switch x := rng.IntN(10); {
		case x < 5:
			c.kind = chaosPause
		case x < 7:
			c.kind = chaosDelay
		case x < 8:
			c.kind = chaosKill
		default:
			c.kind = chaosSleep
		}
		p.chaos = append(p.chaos, c)
	}
	return p
}

type result struct {
	err                                   error
	steps, reads, writes, chaos, inFlight int64
}

// run executes p; the replicas are running, applying and undelayed before and after.
func run(t testing.TB, b *bed, p program) result {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var res result
	var mu sync.Mutex
	fail := func(err error) {
		mu.Lock()
		if res.err == nil {
			res.err = err
		}
		mu.Unlock()
	}
	var hist sync.Map // clock → row written
	var snaps struct {
		sync.Mutex
		s []snapshot
	}
	workersDone := make(chan struct{})
	var wg sync.WaitGroup
	var steps, reads, writes, chaosRun, inFlight, killing, killEnded atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := b.r.NewToken()
			text := ""
			key := fmt.Sprintf("fuzz-%d-%d", w, time.Now().UnixNano())
			var lower int64 // what this token must see: its commits and its reads
			for i, o := range p.ops[w] {
				if ctx.Err() != nil {
					return
				}
				tctx := ctx
				switch w % 3 {
				case 0:
					tctx = replica.WithToken(ctx, tok)
				case 1:
					tctx = replica.WithKey(ctx, key)
				case 2:
					t2, err := b.r.ParseToken(text)
					if err != nil {
						fail(err)
						return
					}
					tok = t2
					tctx = replica.WithToken(ctx, tok)
				}
				steps.Add(1)
				var got []snapshot
				var err error
				switch o.kind {
				case opWrite:
					var c int64
					c, err = write(tctx, b.r.Writer(), o.k)
					if err == nil {
						writes.Add(1)
						hist.Store(c, o.k)
						lower = max(lower, c)
					}
				case opRead:
					var s snapshot
					s, err = readSnapshot(tctx, b.r.Reader())
					got = append(got, s)
				case opReaderTx, opWriterRO:
					db := b.r.Reader()
					if o.kind == opWriterRO {
						db = b.r.Writer()
					}
					var tx *sql.Tx
					if tx, err = db.BeginTx(tctx, &sql.TxOptions{ReadOnly: true}); err == nil {
						var s snapshot
						s, err = readSnapshot(tctx, tx)
						got = append(got, s)
						_ = tx.Rollback()
					}
				case opConn:
					var c *sql.Conn
					if c, err = b.r.Reader().Conn(tctx); err == nil {
						for range 2 {
							var s snapshot
							if s, err = readSnapshot(tctx, c); err != nil {
								break
							}
							got = append(got, s)
						}
						_ = c.Close()
					}
				}
				if w%3 == 2 {
					text = tok.String()
				}
				if err != nil {
					if killing.Load() > 0 || time.Since(time.Unix(0, killEnded.Load())) < time.Second {
						// A call on a replica that was killed under it (a borrow in flight):
						// the bar on failed reads is TestReplicaKilledUnderReads's.
						inFlight.Add(1)
						continue
					}
					fail(fmt.Errorf("worker %d op %d %s: %w", w, i, opNames[o.kind], err))
					return
				}
				for _, s := range got {
					reads.Add(1)
					if s.clock < lower {
						fail(fmt.Errorf("STALE: worker %d op %d %s saw clock %d, token needs %d", w, i, opNames[o.kind], s.clock, lower))
						return
					}
					lower = s.clock
				}
				snaps.Lock()
				snaps.s = append(snaps.s, got...)
				snaps.Unlock()
			}
		}()
	}
	var cwg sync.WaitGroup
	cwg.Add(1)
	go func() {
		defer cwg.Done()
		for j := 0; len(p.chaos) > 0; j++ {
			c := p.chaos[j%len(p.chaos)]
			select {
			case <-workersDone:
				return
			case <-time.After(200 * time.Millisecond):
			}
			var err error
			switch c.kind {
			case chaosPause:
				if err = b.repl.PauseApply(ctx, c.i); err == nil {
					err = sleepUnless(workersDone, c.d, func() error { return b.repl.ResumeApply(ctx, c.i) })
				}
			case chaosDelay:
				if err = b.repl.SetDelay(ctx, c.i, time.Second); err == nil {
					err = sleepUnless(workersDone, c.d, func() error { return b.repl.SetDelay(ctx, c.i, 0) })
				}
			case chaosKill:
				killing.Add(1)
				b.repl.Kill(c.i)
				err = sleepUnless(workersDone, c.d, func() error { return b.repl.Start(c.i) })
				killEnded.Store(time.Now().UnixNano())
				killing.Add(-1)
			case chaosSleep:
				err = sleepUnless(workersDone, c.d, func() error { return nil })
			}
			if err != nil {
				fail(fmt.Errorf("chaos %s(%d): %w", chaosNames[c.kind], c.i, err))
				return
			}
			chaosRun.Add(1)
		}
	}()
	wg.Wait()
	close(workersDone)
	cwg.Wait()
	res.steps, res.reads, res.writes, res.chaos, res.inFlight = steps.Load(), reads.Load(), writes.Load(), chaosRun.Load(), inFlight.Load()
	// Leave every replica running, applying and caught up.
	for i := range b.repl.Replicas {
		if err := b.repl.Start(i); err != nil {
			t.Fatal(err)
		}
		if err := b.repl.SetDelay(ctx, i, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.repl.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if res.err != nil {
		return res
	}
	// Every snapshot is a state of the primary: each row holds the clock of its last write at
	// or before the snapshot's clock.
	last := map[int]int64{}
	var maxClock int64
	hist.Range(func(k, v any) bool { maxClock = max(maxClock, k.(int64)); return true })
	byClock := make([]int, maxClock+1)
	for i := range byClock {
		byClock[i] = -1
	}
	hist.Range(func(k, v any) bool { byClock[k.(int64)] = v.(int); return true })
	sort := snaps.s
	// States in clock order.
	idx := map[int64][]snapshot{}
	for _, s := range sort {
		idx[s.clock] = append(idx[s.clock], s)
	}
	for c := int64(0); c <= maxClock; c++ {
		if k := byClock[c]; k >= 0 {
			last[k] = c
		}
		for _, s := range idx[c] {
			for k, rc := range s.rows {
				// A write whose COMMIT failed (a replica killed is not the primary, but the
				// error may be the client's) is not in the history: its clock is not checked.
				known := rc <= maxClock && byClock[rc] >= 0
				if rc > c || known && rc != last[k] {
					res.err = fmt.Errorf("snapshot at clock %d has row %d at clock %d, the primary had %d", c, k, rc, last[k])
					return res
				}
			}
		}
	}
	return res
}

// sleepUnless waits d (or until done is closed) and then runs f.
func sleepUnless(done <-chan struct{}, d time.Duration, f func() error) error {
	select {
	case <-done:
	case <-time.After(d):
	}
	return f()
}

// shrink drops chunks of operations while the program still fails (twice tried), within
// budget, and returns the smallest failing program found.
func shrink(t testing.TB, b *bed, p program, budget time.Duration) program {
	deadline := time.Now().Add(budget)
	fails := func(q program) bool {
		for range 2 {
			if r := run(t, b, q); r.err != nil && !errors.Is(r.err, context.DeadlineExceeded) {
				return true
			}
		}
		return false
	}
	for chunk := max(p.size()/2, 1); chunk >= 1 && time.Now().Before(deadline); chunk /= 2 {
		for w := 0; w < workers && time.Now().Before(deadline); w++ {
			for i := 0; i < len(p.ops[w]) && time.Now().Before(deadline); {
				q := p
				q.ops[w] = append(append([]op(nil), p.ops[w][:i]...), p.ops[w][min(i+chunk, len(p.ops[w])):]...)
				if fails(q) {
					p = q
				} else {
					i += chunk
				}
			}
		}
	}
	return p
}
