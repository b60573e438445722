package pool

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTenantsGenerated runs random tenant configurations (weights, caps, keys no one configured,
// callers without a key) under random concurrent borrowing, and checks against the reference of
// what the configuration allows: no tenant ever holds more than its Cap, the pool never more than
// MaxConns, every borrow is served (nobody starves behind a capped or heavy tenant), and at the
// end Stats shows nothing held or waiting and counts every hand-out. TENANT_GEN_SEEDS (default
// 20) sets the number of configurations.
func TestTenantsGenerated(t *testing.T) {
	seeds := envInt("TENANT_GEN_SEEDS", 20)
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 7))
			maxConns := 1 + r.IntN(6)
			keys := []string{"a", "b", "c"}[:1+r.IntN(3)]
			tenants := map[string]Tenant{}
			for _, k := range keys {
				tn := Tenant{Weight: 1 + r.IntN(4)}
				if r.IntN(2) == 0 {
					tn.Cap = 1 + r.IntN(maxConns)
				}
				tenants[k] = tn
			}
			p, _ := newPool(t, Config{MaxConns: maxConns, AcquireTimeout: time.Minute, Tenants: tenants})
			// In half the configurations an adaptive limit moves at random and the contending
			// tenants are throttled at every step (throttleTenants), as at the end of each of
			// the limit's windows under overload: no tenant starves and no cap is exceeded.
			stopLimit, limitDone := make(chan struct{}), make(chan struct{})
			moving := r.IntN(2) == 0
			go func() {
				defer close(limitDone)
				if !moving {
					return
				}
				lr, o := rand.New(rand.NewPCG(uint64(seed), 9)), &p.ovl
				for {
					select {
					case <-stopLimit:
						return
					case <-time.After(time.Duration(50+lr.IntN(500)) * time.Microsecond):
					}
					l := 1 + lr.IntN(maxConns)
					o.mu.Lock()
					old := o.limit.Swap(int32(l))
					o.throttled = p.throttleTenants()
					if l > int(old) {
						p.unbench(l)
					}
					o.mu.Unlock()
				}
			}()
			callers := 4 + r.IntN(12)
			perCaller := 20 + r.IntN(30)
			var held sync.Map // key → *atomic.Int64 (this test's own count, inside the pool's)
			var total atomic.Int64
			var handed atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, callers)
			for i := range callers {
				key := []string{"a", "b", "c", "unlisted", ""}[r.IntN(5)]
				limit := maxConns
				if tn, ok := tenants[key]; ok && tn.Cap > 0 {
					limit = tn.Cap
				}
				hold := time.Duration(r.IntN(300)) * time.Microsecond
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx := context.Background()
					if key != "" {
						ctx = WithTenant(ctx, key)
					}
					v, _ := held.LoadOrStore(key, new(atomic.Int64))
					n := v.(*atomic.Int64)
					for range perCaller {
						// A deadline per borrow, far above any wait the configuration allows
						// (callers × perCaller × hold < 1 s): a starved tenant is named, with
						// the pool's view, instead of hanging the test.
						bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
						c, err := p.Connect(bctx)
						cancel()
						if err != nil {
							errs <- fmt.Errorf("caller %d (tenant %q) starved: %w; Stats.Tenants %+v", i, key, err, p.Stats().Tenants)
							return
						}
						handed.Add(1)
						if _, capped := tenants[key]; capped {
							if got := n.Add(1); got > int64(limit) {
								errs <- fmt.Errorf("tenant %q held %d connections; its Cap is %d", key, got, limit)
							}
						}
						if got := total.Add(1); got > int64(maxConns) {
							errs <- fmt.Errorf("%d connections held; MaxConns is %d", got, maxConns)
						}
						time.Sleep(hold)
						total.Add(-1)
						if _, capped := tenants[key]; capped {
							n.Add(-1)
						}
						_ = c.Close()
					}
				}()
			}
			wg.Wait()
			close(stopLimit)
			<-limitDone
			close(errs)
			for err := range errs {
				t.Fatalf("MaxConns %d, tenants %v: %v", maxConns, tenants, err)
			}
			st := p.Stats()
			var acquires uint64
			for _, ts := range st.Tenants {
				if ts.Held != 0 || ts.Waiting != 0 {
					t.Errorf("tenant %q at the end: %+v; want nothing held or waiting", ts.Key, ts)
				}
				acquires += ts.Acquires
			}
			if acquires != uint64(handed.Load()) {
				t.Errorf("Stats.Tenants counts %d hand-outs; %d borrows were served", acquires, handed.Load())
			}
		})
	}
}

// TestTenantsOrderGenerated queues random sequences of waiters of random tenants (weights 1–4,
// no caps) behind one held connection, releases it, and checks the order in which the pool
// serves them against the rules fair waiting promises: first come, first served within a tenant,
// and, over every prefix of the hand-outs during which every tenant still had waiters, each
// tenant's count within 1.5 of its weighted share. TENANT_GEN_SEEDS (default 20) sets the
// number of sequences.
func TestTenantsOrderGenerated(t *testing.T) {
	for seed := range envInt("TENANT_GEN_SEEDS", 20) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 11))
			keys := []string{"a", "b", "c", "d"}[:2+r.IntN(3)]
			tenants := map[string]Tenant{}
			weights, sumW := map[string]float64{}, 0.0
			for _, k := range keys {
				w := 1 + r.IntN(4)
				tenants[k] = Tenant{Weight: w}
				weights[k] = float64(w)
				sumW += float64(w)
			}
			p, _ := newPool(t, Config{MaxConns: 1, Tenants: tenants})
			held := mustConnect(t, p)
			n := 8 + r.IntN(17)
			got, errs := make(chan string, n), make(chan error, n)
			queued := map[string]int{}
			var seq []string
			for i := range n {
				k := keys[r.IntN(len(keys))]
				if i < len(keys) {
					k = keys[i] // every tenant waits
				}
				queued[k]++
				seq = append(seq, k)
				queueWaiter(t, p, WithTenant(context.Background(), k), fmt.Sprintf("%s%02d", k, i), got, errs)
			}
			_ = held.Close()
			var order []string
			for range n {
				select {
				case name := <-got:
					order = append(order, name)
				case err := <-errs:
					t.Fatal(err)
				case <-time.After(10 * time.Second):
					t.Fatalf("served %v of %d waiters, then nothing for 10 s", order, n)
				}
			}
			last, count := map[string]string{}, map[string]int{}
			allWait := true
			for i, name := range order {
				k := name[:1]
				if prev, ok := last[k]; ok && prev > name {
					t.Fatalf("tenant %s: %s served after %s (queued %v, served %v); want first come, first served within a tenant", k, name, prev, seq, order)
				}
				last[k] = name
				count[k]++
				if !allWait {
					continue
				}
				for _, k2 := range keys {
					share := float64(i+1) * weights[k2] / sumW
					if d := float64(count[k2]) - share; d > 1.5 || d < -1.5 {
						t.Fatalf("after %d hand-outs tenant %s (weight %v of %v) had %d, its share %.1f (queued %v, served %v)", i+1, k2, weights[k2], sumW, count[k2], share, seq, order)
					}
				}
				for _, k2 := range keys {
					if count[k2] == queued[k2] {
						allWait = false // a tenant ran out of waiters: shares no longer apply
					}
				}
			}
		})
	}
}

// envInt is the positive integer in the environment variable name, else def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
