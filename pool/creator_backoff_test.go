package pool

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/fakedb"
)

// While acquires wait, the creator's backoff after failed dials ends after
// at most waitingBackoff: a database that stays down is dialled a few times
// a second (not as fast as it refuses), and once it is back the waiting
// acquire gets a connection within a second, although the backoff had
// grown to its 5 s cap (without the cap: up to 5 s later).
func TestCreatorBackoffWhileAcquiresWait(t *testing.T) {
	fc := fakedb.New()
	fc.SetDialError(errors.New("connection refused")) // before New: its creator dials at once
	p, _ := newPoolOver(t, fc, Config{MaxConns: 2, InitializationFailTimeout: -1, AcquireTimeout: 20 * time.Second})
	const down = 3 * time.Second
	backCh := make(chan time.Time, 1)
	var dialsDown int64
	timer := time.AfterFunc(down, func() {
		dialsDown = fc.Dials.Load()
		fc.SetDialError(nil)
		backCh <- time.Now()
	})
	defer timer.Stop()
	c, err := p.Connect(context.Background()) // waits while the database is "down"
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	back := <-backCh
	took := time.Since(back)
	rate := float64(dialsDown) / down.Seconds()
	t.Logf("database down %v with an acquire waiting: %d dials (%.1f/s); connection %v after it was back",
		down, dialsDown, rate, took.Round(time.Millisecond))
	// 10, 20, 40, 80 ms, then every 100 ms: about 30 in 3 s.
	if dialsDown > 45 {
		t.Errorf("%d dials in %v: the creator hammers a database that is down", dialsDown, down)
	}
	if dialsDown < 15 {
		t.Errorf("%d dials in %v with an acquire waiting: want one every %v at least", dialsDown, down, waitingBackoff)
	}
	if took > time.Second {
		t.Errorf("the waiting acquire got a connection %v after the database came back, want within 1s", took)
	}
}
