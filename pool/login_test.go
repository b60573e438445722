package pool

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/fakedb"
)

// loginTimers stands in for the creator's timer after a refused login (Config.testAfter): each
// wait the creator starts is sent on asked, and ends when the test fires it.
type loginTimers struct{ asked chan loginTimer }

type loginTimer struct {
	d    time.Duration
	fire chan time.Time
}

func newLoginTimers() *loginTimers { return &loginTimers{asked: make(chan loginTimer, 1)} }

func (lt *loginTimers) after(d time.Duration) <-chan time.Time {
	t := loginTimer{d: d, fire: make(chan time.Time, 1)}
	lt.asked <- t
	return t.fire
}

// next returns the wait the creator started next; it fails the test after 5 s without one.
func (lt *loginTimers) next(t *testing.T) loginTimer {
	t.Helper()
	select {
	case w := <-lt.asked:
		return w
	case <-time.After(5 * time.Second):
		t.Fatal("the creator started no wait after a refused login within 5s")
		return loginTimer{}
	}
}

// accessDenied is the error go-sql-driver returns for a wrong password.
var accessDenied = &mysql.MySQLError{Number: 1045, SQLState: [5]byte{'2', '8', '0', '0', '0'},
	Message: "Access denied for user 'app'@'10.0.0.7' (using password: YES)"}

// connectAll runs n Connects at once and returns how long the slowest took; each must fail with
// the refused login, reachable with errors.As and matching ErrUnavailable. start, if not nil, is
// called once every Connect is queued, and the times count from its return.
func connectAll(t *testing.T, p *Pool, n int, start func()) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	ends := make(chan time.Time, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := p.Connect(ctx)
			if err == nil {
				_ = c.Close()
			}
			errs <- err
			ends <- time.Now()
		}()
	}
	if start != nil {
		eventually(t, "every Connect queued", func() bool { return p.Stats().Waiting == n })
		start()
	}
	began := time.Now()
	wg.Wait()
	close(errs)
	close(ends)
	for err := range errs {
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1045 || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Connect = %v; want the refused login (1045), matching ErrUnavailable", err)
		}
	}
	var slowest time.Duration
	for end := range ends {
		slowest = max(slowest, end.Sub(began))
	}
	return slowest
}

// A wrong password (1045) is not retried at dial speed: 16 borrowers hammering a pool for 20 s
// (of the pool's clock) cost 5 failed logins, 1 s apart and doubling to LoginBackoffMax; every
// borrower that finds no idle connection gets the 1045 at once, whether it arrives between two
// dials or waits for one; a successful dial resets the backoff; Redial dials at once.
// (Before: ~10 dials a second while acquires waited, each to its deadline.)
func TestLoginRefusedBackoff(t *testing.T) {
	const callers = 16
	clk, timers := newFakeClock(), newLoginTimers()
	fc := fakedb.New()
	fc.SetDialError(accessDenied) // before New: its creator dials at once
	p, _ := newPoolOver(t, fc, Config{MaxConns: 4, InitializationFailTimeout: -1, AcquireTimeout: 30 * time.Second,
		LoginBackoffMax: 20 * time.Second, testClock: clk, testAfter: timers.after})

	// The schedule over 50 s of pool time, callers arriving between dials and waiting for one.
	var waits []time.Duration
	var elapsed time.Duration
	dialsIn20s := int64(0)
	for elapsed < 50*time.Second {
		w := timers.next(t) // the creator's dial failed and it waits w
		waits = append(waits, w.d)
		if elapsed <= 20*time.Second {
			dialsIn20s = fc.Dials.Load()
		}
		// Arriving while the next dial is not due: the refusal at once, no dial.
		before := fc.Dials.Load()
		if took := connectAll(t, p, callers, nil); took > time.Second {
			t.Errorf("at %v: %d borrowers got the refused login after up to %v; want at once (1s)", elapsed, callers, took.Round(time.Millisecond))
		}
		if d := fc.Dials.Load() - before; d != 0 {
			t.Errorf("at %v: %d dials while the next was not due", elapsed, d)
		}
		// The next dial is due: borrowers wait for it, and get its refusal as soon as it comes.
		clk.Advance(w.d)
		elapsed += w.d
		if took := connectAll(t, p, callers, func() { w.fire <- time.Time{} }); took > time.Second {
			t.Errorf("at %v: %d waiting borrowers got the refused login %v after the dial; want within 1s", elapsed, callers, took.Round(time.Millisecond))
		}
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 20 * time.Second}
	if len(waits) != len(want) {
		t.Fatalf("the creator waited %v after refused logins; want %v", waits, want)
	}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("the creator waited %v after refused logins; want %v", waits, want)
		}
	}
	t.Logf("refused logins in the first 20 s: %d (waits %v)", dialsIn20s, waits)
	if dialsIn20s > 20 {
		t.Errorf("%d dials in 20 s with a wrong password; want at most one a second", dialsIn20s)
	}
	st := p.Stats()
	if st.Total != 0 || !errors.Is(st.LastError, accessDenied) {
		t.Errorf("Stats = %v, LastError %v; want no connection and the refused login", st, st.LastError)
	}

	// A successful dial resets the backoff.
	w := timers.next(t)
	fc.SetDialError(nil)
	clk.Advance(w.d)
	w.fire <- time.Time{}
	c := mustConnect(t, p)
	eventually(t, "the pool filled", func() bool { return p.Stats().Total == 4 })
	_ = c.Close()
	fc.SetDialError(accessDenied)
	p.SoftEvict() // the creator replaces the connections, and is refused
	if w = timers.next(t); w.d != time.Second {
		t.Errorf("after a successful dial, the creator waited %v after a refused login; want 1s again", w.d)
	}

	// Redial dials at once, without the timer: still refused, the backoff goes on from where it
	// was; accepted, borrowers get connections.
	p.Redial()
	if w = timers.next(t); w.d != 2*time.Second {
		t.Errorf("after Redial's refused dial the creator waited %v; want 2s", w.d)
	}
	fc.SetDialError(nil)
	before := fc.Dials.Load()
	p.Redial()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c2, err := p.Connect(ctx) // waits for Redial's dial instead of failing at once
	if err != nil {
		t.Fatalf("Connect after Redial with the credentials fixed: %v", err)
	}
	_ = c2.Close()
	if fc.Dials.Load() == before {
		t.Error("Redial did not dial")
	}
	if err := p.Stats().LastError; err != nil {
		t.Errorf("LastError after a successful dial = %v; want nil", err)
	}
}

// An ordinary dial failure after a refused login ends the fail-fast: borrowers wait (and time
// out, saying the pool is failing) as before; LoginBackoffMax < 0 treats 1045 like any failure.
func TestLoginRefusedOnlyForLoginErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		max    time.Duration
		second error
	}{
		{"refused then connection refused", 0, errors.New("dial tcp 10.0.0.7:3306: connect: connection refused")},
		{"LoginBackoffMax off", -1, accessDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timers := newLoginTimers()
			fc := fakedb.New()
			fc.SetDialError(accessDenied)
			p, _ := newPoolOver(t, fc, Config{MaxConns: 1, InitializationFailTimeout: -1, AcquireTimeout: 300 * time.Millisecond,
				LoginBackoffMax: tc.max, testAfter: timers.after})
			if tc.max >= 0 {
				w := timers.next(t)
				fc.SetDialError(tc.second)
				w.fire <- time.Time{}
			}
			eventually(t, "the second error recorded", func() bool {
				err := p.Stats().LastError
				return err != nil && errors.Is(err, tc.second)
			})
			start := time.Now()
			_, err := p.Connect(context.Background())
			var te *AcquireTimeoutError
			if !errors.As(err, &te) || !te.Failing || time.Since(start) < 250*time.Millisecond {
				t.Fatalf("Connect = %v after %v; want an AcquireTimeoutError at AcquireTimeout (300ms)", err, time.Since(start))
			}
		})
	}
}

// A dial that began with the old credentials and is refused after Redial answers no Redial: the
// creator dials again at once, and a borrower waits for that dial instead of failing with the
// stale refusal.
func TestRedialDuringRefusedDial(t *testing.T) {
	timers := newLoginTimers()
	fc := fakedb.New()
	fc.SetDialError(accessDenied)
	p, _ := newPoolOver(t, fc, Config{MaxConns: 1, InitializationFailTimeout: -1, AcquireTimeout: 5 * time.Second,
		LoginBackoffMax: 20 * time.Second, testAfter: timers.after})
	w := timers.next(t) // the first dial was refused; the creator waits
	fc.SetDialDelay(300 * time.Millisecond)
	before := fc.Dials.Load()
	w.fire <- time.Time{} // the next dial begins, with the wrong password
	eventually(t, "the next dial began", func() bool { return fc.Dials.Load() > before })
	fc.SetDialError(nil) // the credentials are fixed while that dial is under way
	fc.SetDialDelay(0)
	p.Redial()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := p.Connect(ctx)
	if err != nil {
		t.Fatalf("Connect after Redial, with a dial of the old credentials under way: %v; want the connection of the dial after it", err)
	}
	_ = c.Close()
}
