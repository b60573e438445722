package replica_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/replica"
)

// A replica killed under 16 goroutines of reads: once the router has it out of rotation no read
// fails, and it is back in rotation within 5 s of accepting connections again.
func TestReplicaKilledUnderReads(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a MariaDB primary and two replicas, kills and restarts one")
	}
	b := newBed(t, replica.Config{Mode: replica.PerToken})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var markedDown atomic.Bool
	var reads, failedBefore, failedAfter atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := b.r.NewToken()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rctx := ctx
				if g%2 == 0 {
					rctx = replica.WithToken(ctx, tok)
				}
				down := markedDown.Load()
				_, err := readSnapshot(rctx, b.r.Reader())
				reads.Add(1)
				if err != nil {
					if down {
						failedAfter.Add(1)
						firstErr.CompareAndSwap(nil, fmt.Sprint(err))
					} else {
						failedBefore.Add(1)
					}
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	killed := time.Now()
	b.repl.Kill(0)
	down := b.waitUsable(t, ctx, 0, false)
	markedDown.Store(true)
	t.Logf("replica out of rotation %v after SIGKILL", down)
	if down > time.Second {
		t.Errorf("replica taken out %v after it was killed, want ≤ 1 s", down)
	}
	time.Sleep(time.Second)
	_ = killed
	if err := b.repl.Start(0); err != nil {
		t.Fatal(err)
	}
	back := b.waitUsable(t, ctx, 0, true)
	t.Logf("replica back in rotation %v after it accepted connections again", back)
	if back > 5*time.Second {
		t.Errorf("replica back %v after it returned, want ≤ 5 s", back)
	}
	before := b.r.Stats().Replicas[0].Reads
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	after := b.r.Stats().Replicas[0].Reads
	t.Logf("reads %d; failed before it was marked down %d, after %d; reads on the returned replica in 0.5 s: %d",
		reads.Load(), failedBefore.Load(), failedAfter.Load(), after-before)
	if n := failedAfter.Load(); n != 0 {
		t.Errorf("%d reads failed after the replica was marked down; first: %v", n, firstErr.Load())
	}
	if after == before {
		t.Errorf("the returned replica got no reads")
	}
}
