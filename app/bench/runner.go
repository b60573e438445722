package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Iteration is the outcome of one iteration of one benchmark.
type Iteration struct {
	Ops     int64         // operations completed within the iteration window (the score's)
	AllOps  int64         // every operation completed, including those in flight at its end
	Elapsed time.Duration // the window
	Missed  int64         // open loop: scheduled requests never started (see openLoop)
}

// Score is the iteration's throughput in operations per millisecond.
func (it Iteration) Score() float64 {
	return float64(it.Ops) / (float64(it.Elapsed) / float64(time.Millisecond))
}

// closedLoop runs threads goroutines, each calling its op (made by mk for goroutine i) back to
// back for d, as a JMH thread does. It counts operations completed before the window closed;
// the operation in flight at that moment is finished and counted in AllOps only. The first
// error stops the iteration.
func closedLoop(threads int, d time.Duration, mk func(i int) (func(context.Context) error, error)) (Iteration, error) {
	ops := make([]func(context.Context) error, threads)
	for i := range ops {
		var err error
		if ops[i], err = mk(i); err != nil {
			return Iteration{}, err
		}
	}
	it, _, err := runClosed(threads, d, func(ctx context.Context, i int) error { return ops[i](ctx) })
	return it, err
}

// runClosed is the closed loop of closedLoop and saturatedLoop: goroutines goroutines start
// together and call op(ctx, i) back to back until d has passed; the first error stops them
// all. It returns the iteration (Ops: operations completed within the window; AllOps: with
// the ones in flight when it closed), the per-goroutine counts within the window, and the
// first error.
func runClosed(goroutines int, d time.Duration, op func(ctx context.Context, i int) error) (Iteration, []int64, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		stop     atomic.Bool
		start    = make(chan struct{})
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		inWin    = make([]int64, goroutines)
		all      = make([]int64, goroutines)
	)
	for i := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var n, a int64
			<-start
			for !stop.Load() {
				if err := op(ctx, i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					stop.Store(true)
					break
				}
				a++
				if !stop.Load() {
					n++
				}
			}
			inWin[i], all[i] = n, a
		}()
	}
	t0 := time.Now()
	close(start)
	timer := time.NewTimer(d)
	<-timer.C
	stop.Store(true)
	elapsed := time.Since(t0)
	wg.Wait()
	it := Iteration{Elapsed: elapsed}
	for i := range goroutines {
		it.Ops += inWin[i]
		it.AllOps += all[i]
	}
	return it, inWin, firstErr
}

// openLoop runs goroutines goroutines for d, each starting a request every goroutines/rate
// milliseconds (rate: requests per millisecond, all goroutines together) on a fixed schedule;
// the goroutines' schedules are staggered evenly. A request starts at its scheduled time or,
// when the goroutine is late, at once; op measures latency from the scheduled time, so time
// spent behind an earlier slow request counts (coordinated omission is avoided).
//
// Requests scheduled before the end of the window are all run; a goroutine still behind at
// twice the window gives up on the rest, records each at the latency it had reached by then
// (a lower bound) and counts it in Missed. Ops counts requests completed; Elapsed is from the
// first scheduled start to the last completion (at least d).
func openLoop(goroutines int, d time.Duration, rate float64, op func(ctx context.Context, sched time.Time, h *Histogram) error) (Iteration, *Histogram, error) {
	if rate <= 0 {
		return Iteration{}, nil, errors.New("open loop needs a rate > 0")
	}
	interval := time.Duration(float64(goroutines) / rate * float64(time.Millisecond))
	if interval <= 0 {
		interval = 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		failed   atomic.Bool
		hists    = make([]*Histogram, goroutines)
		counts   = make([]int64, goroutines)
		missed   = make([]int64, goroutines)
		lastDone = make([]time.Time, goroutines)
	)
	t0 := time.Now().Add(5 * time.Millisecond) // let every goroutine start before the first slot
	end := t0.Add(d)
	hard := t0.Add(2 * d)
	for i := range goroutines {
		hists[i] = NewHistogram()
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := hists[i]
			next := t0.Add(time.Duration(int64(interval) * int64(i) / int64(goroutines)))
			var n int64
			for next.Before(end) && !failed.Load() {
				now := time.Now()
				if now.After(hard) {
					for ; next.Before(end); next = next.Add(interval) {
						h.Record(int64(hard.Sub(next)))
						missed[i]++
					}
					break
				}
				if wait := next.Sub(now); wait > 0 {
					time.Sleep(wait)
				}
				if err := op(ctx, next, h); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					failed.Store(true)
					break
				}
				n++
				next = next.Add(interval)
			}
			counts[i] = n
			lastDone[i] = time.Now()
		}()
	}
	wg.Wait()
	it := Iteration{}
	last := end
	all := NewHistogram()
	for i := range goroutines {
		it.Ops += counts[i]
		it.Missed += missed[i]
		all.Merge(hists[i])
		if lastDone[i].After(last) {
			last = lastDone[i]
		}
	}
	it.AllOps = it.Ops
	it.Elapsed = last.Sub(t0)
	if firstErr != nil {
		return it, all, fmt.Errorf("contended: %w", firstErr)
	}
	return it, all, nil
}

// saturatedLoop runs goroutines goroutines for d, each calling op back to back (a closed loop,
// as closedLoop) with its own latency histogram. It returns the iteration, the merged
// histogram and the operations each goroutine completed within the window. An operation in
// flight when the window closes is finished; its latency is recorded, but it is not counted.
func saturatedLoop(goroutines int, d time.Duration, op func(ctx context.Context, h *Histogram) error) (Iteration, *Histogram, []int64, error) {
	hists := make([]*Histogram, goroutines)
	for i := range hists {
		hists[i] = NewHistogram()
	}
	it, inWin, err := runClosed(goroutines, d, func(ctx context.Context, i int) error { return op(ctx, hists[i]) })
	merged := NewHistogram()
	for _, h := range hists {
		merged.Merge(h)
	}
	if err != nil {
		return it, merged, inWin, fmt.Errorf("saturated: %w", err)
	}
	return it, merged, inWin, nil
}

// goroutineOps returns the smallest, the median and the mean of per-goroutine operation counts.
func goroutineOps(per []int64) (slowest, median, mean float64) {
	if len(per) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(per)
	slices.Sort(s)
	var sum int64
	for _, v := range s {
		sum += v
	}
	n := len(s)
	median = float64(s[n/2])
	if n%2 == 0 {
		median = float64(s[n/2-1]+s[n/2]) / 2
	}
	return float64(s[0]), median, float64(sum) / float64(n)
}
