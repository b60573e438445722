package pool_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/pool"
)

// Under overload the pool refuses an acquire that cannot finish before its deadline at once,
// without taking a connection: the error matches ErrOverloaded and context.DeadlineExceeded.
func ExampleErrOverloaded() {
	p, err := pool.New(fakedb.New(), pool.Config{Name: "example", MaxConns: 1, Logger: quietLog, OverloadTarget: 5 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	// Three goroutines contending for the connection, each borrow holding it 10 ms, teach the
	// pool how long a borrow takes (it times borrows only while someone waits).
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 16 {
				c, err := p.Connect(context.Background())
				if err != nil {
					fmt.Println(err)
					return
				}
				time.Sleep(10 * time.Millisecond)
				_ = c.Close()
			}
		}()
	}
	wg.Wait()
	busy, _ := p.Connect(context.Background()) // the only connection is out
	defer busy.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
	defer cancel()
	_, err = p.Connect(ctx)
	switch {
	case errors.Is(err, pool.ErrOverloaded):
		// Shed: answer "busy" (HTTP 503) rather than retry at once.
		fmt.Println("overloaded; deadline too near:", errors.Is(err, context.DeadlineExceeded))
	case err != nil:
		fmt.Println("other error:", err)
	}
	// Output: overloaded; deadline too near: true
}
