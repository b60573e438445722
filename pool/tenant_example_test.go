package pool_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/pool"
)

// With Config.Tenants, a freed connection goes to the waiting tenant furthest below its share:
// a web request that queued behind three batch jobs is served second, not fourth.
func ExampleWithTenant() {
	p, err := pool.New(fakedb.New(), pool.Config{Name: "example", MaxConns: 1, Logger: quietLog,
		Tenants: map[string]pool.Tenant{"batch": {Cap: 8}, "web": {Weight: 2}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	busy, _ := p.Connect(context.Background()) // the only connection is out
	var (
		mu     sync.Mutex
		served []string
		wg     sync.WaitGroup
	)
	borrow := func(tenant string) {
		wg.Add(1)
		waiting := p.Stats().Waiting
		go func() {
			defer wg.Done()
			c, err := p.Connect(pool.WithTenant(context.Background(), tenant))
			if err != nil {
				fmt.Println(err)
				return
			}
			mu.Lock()
			served = append(served, tenant)
			mu.Unlock()
			_ = c.Close()
		}()
		for p.Stats().Waiting == waiting { // queued
			time.Sleep(time.Millisecond)
		}
	}
	for _, tenant := range []string{"batch", "batch", "batch", "web"} {
		borrow(tenant)
	}
	_ = busy.Close()
	wg.Wait()
	fmt.Println(strings.Join(served, " "))
	// Output: batch web batch batch
}
