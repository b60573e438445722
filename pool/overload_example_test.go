package pool_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/pool"
)

// Under overload — more borrowers than the database serves before their deadlines — the pool
// refuses some acquires fast, without taking a connection, instead of letting every request
// miss its deadline: the error matches ErrOverloaded (and context.DeadlineExceeded when the
// deadline was too near to finish).
func ExampleErrOverloaded() {
	p, err := pool.New(fakedb.New(), pool.Config{Name: "example", MaxConns: 1, Logger: quietLog})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	// Eight callers for one connection, each request holding it 10 ms with a 50 ms deadline:
	// four times what the connection can serve in time.
	var wg sync.WaitGroup
	var shed atomic.Int64
	end := time.Now().Add(600 * time.Millisecond)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				c, err := p.Connect(ctx)
				if err == nil {
					time.Sleep(10 * time.Millisecond)
					_ = c.Close()
				} else if errors.Is(err, pool.ErrOverloaded) {
					// Shed: answer "busy" (HTTP 503) rather than retry at once.
					shed.Add(1)
					time.Sleep(time.Millisecond)
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	fmt.Println("some requests shed:", shed.Load() > 0)
	// Output: some requests shed: true
}
