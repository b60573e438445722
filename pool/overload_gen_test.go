package pool

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestOverloadGenerated drives random pools (MaxConns, overload settings, the adaptive limit on
// or off) with open-loop random arrivals, from a fifth to three times the capacity of a simulated
// database (k cores: a borrow holds its connection h × max(1, held/k)), each borrow with a
// deadline, and checks what overload control promises against what the configuration allows:
// never more than MaxConns held, no borrow returns later than its deadline (plus scheduling
// slack), every refusal matches ErrOverloaded or context.DeadlineExceeded, Stats.Limit stays
// within [1, MaxConns]; below half the capacity with deadlines far above a borrow, nothing is
// refused; afterwards nothing is held or waiting and a borrow succeeds at once.
// OVERLOAD_GEN_SEEDS (default 12) sets the number of runs.
func TestOverloadGenerated(t *testing.T) {
	for seed := range envInt("OVERLOAD_GEN_SEEDS", 12) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 23))
			maxConns := 1 + r.IntN(8)
			cores := 1 + r.IntN(4)
			hold := time.Duration(200+r.IntN(1800)) * time.Microsecond
			factor := []float64{0.2, 0.5, 1, 2, 3}[r.IntN(5)]
			deadline := time.Duration(5+r.IntN(45)) * time.Millisecond
			calm := seed%4 == 0 // the not-overloaded case: nothing may be refused
			if calm {
				factor, deadline = 0.2, time.Second
			}
			cfg := Config{MaxConns: maxConns, OverloadTarget: time.Duration(1+r.IntN(5)) * time.Millisecond,
				overloadInterval: time.Duration(5+r.IntN(15)) * time.Millisecond}
			cfg.AdaptiveLimitFloor = []int{0, -1, 1}[r.IntN(3)]
			desc := fmt.Sprintf("MaxConns %d, %d cores, hold %v, load %.1f×, deadline %v, target %v, interval %v, floor %d",
				maxConns, cores, hold, factor, deadline, cfg.OverloadTarget, cfg.overloadInterval, cfg.AdaptiveLimitFloor)
			p, _ := newPool(t, cfg)
			eventually(t, "the pool filled", func() bool { return p.Stats().Idle == maxConns })
			capacity := float64(min(cores, maxConns)) / hold.Seconds()
			rate := factor * capacity
			var (
				held, served, refused atomic.Int64
				wg                    sync.WaitGroup
				mu                    sync.Mutex
				violations            []string
			)
			violate := func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				if len(violations) < 5 {
					violations = append(violations, fmt.Sprintf(format, args...))
				}
			}
			const slack = 250 * time.Millisecond // scheduling on a loaded CI machine, under -race
			end := time.Now().Add(300 * time.Millisecond)
			for next := time.Now(); next.Before(end); next = next.Add(time.Duration(r.ExpFloat64() / rate * 1e9)) {
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				}
				if l := p.Stats().Limit; l < 1 || l > maxConns {
					violate("Stats.Limit = %d; want within [1, %d]", l, maxConns)
				}
				wg.Add(1)
				go func(arrival time.Time) {
					defer wg.Done()
					ctx, cancel := context.WithDeadline(context.Background(), arrival.Add(deadline))
					defer cancel()
					c, err := p.Connect(ctx)
					if late := time.Since(arrival) - deadline; late > slack {
						violate("a borrow returned %v after its deadline (err %v)", late, err)
					}
					if err != nil {
						refused.Add(1)
						if !errors.Is(err, ErrOverloaded) && !errors.Is(err, context.DeadlineExceeded) {
							violate("refused with %v; want ErrOverloaded or context.DeadlineExceeded", err)
						}
						if calm {
							violate("refused below half the capacity with a 1 s deadline: %v", err)
						}
						return
					}
					served.Add(1)
					n := held.Add(1)
					if n > int64(maxConns) {
						violate("%d connections held; MaxConns is %d", n, maxConns)
					}
					time.Sleep(time.Duration(float64(hold) * max(1, float64(n)/float64(cores))))
					held.Add(-1)
					_ = c.Close()
				}(next)
			}
			wg.Wait()
			for _, v := range violations {
				t.Errorf("%s: %s", desc, v)
			}
			st := p.Stats()
			if st.Active != 0 || st.Waiting != 0 {
				t.Errorf("%s: after the load: Active %d, Waiting %d; want 0, 0", desc, st.Active, st.Waiting)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			c, err := p.Connect(ctx)
			if err != nil {
				t.Fatalf("%s: a borrow after the load: %v (served %d, refused %d)", desc, err, served.Load(), refused.Load())
			}
			_ = c.Close()
			t.Logf("%s: served %d, refused %d, limit %d", desc, served.Load(), refused.Load(), st.Limit)
		})
	}
}
