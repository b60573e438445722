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
			p, _ := newPool(t, Config{MaxConns: maxConns, AcquireTimeout: 20 * time.Second, Tenants: tenants})
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
						c, err := p.Connect(ctx)
						if err != nil {
							errs <- fmt.Errorf("caller %d (tenant %q): %w", i, key, err)
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

// envInt is the positive integer in the environment variable name, else def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
