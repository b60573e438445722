package pool

import (
	"context"
	"database/sql/driver"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/fakedb"
)

type hookKey struct{}

// hookMode is what the test's BeforeAcquire does for an acquire whose ctx carries it.
type hookMode string

func hookCtx(m hookMode) context.Context {
	return context.WithValue(context.Background(), hookKey{}, m)
}

// A panicking or timed-out BeforeAcquire fails that acquire only, with an error naming the
// hook; the connection it ran on is closed and replaced, and acquires before and after succeed.
func TestBeforeAcquirePanicAndTimeoutFailOnlyThatAcquire(t *testing.T) {
	var calls atomic.Int32
	p, fc := newPool(t, Config{MaxConns: 2, AcquireTimeout: 5 * time.Second, Hooks: Hooks{
		Timeout: 300 * time.Millisecond,
		BeforeAcquire: func(ctx context.Context, c HookConn) (bool, error) {
			calls.Add(1)
			switch ctx.Value(hookKey{}) {
			case hookMode("panic"):
				panic("boom")
			case hookMode("block"):
				<-ctx.Done()
				return false, ctx.Err()
			case hookMode("error"):
				return false, errors.New("tenant not allowed")
			}
			return true, nil
		},
	}})
	eventually(t, "two idle connections", func() bool { return p.Stats().Idle == 2 })
	for _, tc := range []struct {
		mode hookMode
		want string
		to   bool
	}{
		{"panic", "BeforeAcquire hook panicked: boom", false},
		{"block", "BeforeAcquire hook timed out after 300ms", true},
		{"error", "BeforeAcquire hook failed: tenant not allowed", false},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			// Another borrower holds a connection across the failing acquire, unaffected.
			other := mustConnect(t, p)
			closedBefore := p.Stats().Closed
			start := time.Now()
			_, err := p.Connect(hookCtx(tc.mode))
			var he *HookError
			if !errors.As(err, &he) || !errors.Is(err, ErrHook) || he.Hook != HookBeforeAcquire {
				t.Fatalf("Connect = %v; want a *HookError for BeforeAcquire", err)
			}
			if !strings.Contains(err.Error(), tc.want) || he.TimedOut != tc.to {
				t.Fatalf("error %q (TimedOut %v); want it to contain %q", err, he.TimedOut, tc.want)
			}
			if tc.to && time.Since(start) > 3*time.Second {
				t.Fatalf("the timed-out hook held the acquire %v", time.Since(start))
			}
			if got := p.Stats().Closed; got != closedBefore+1 {
				t.Fatalf("Closed = %d, want %d: the connection the hook failed on is closed", got, closedBefore+1)
			}
			if _, err := other.ExecContext(context.Background(), "SELECT 1", nil); err != nil {
				t.Fatalf("the other borrower's connection: %v", err)
			}
			_ = other.Close()
			c, err := p.Connect(context.Background())
			if err != nil {
				t.Fatalf("the next acquire: %v", err)
			}
			_ = c.Close()
		})
	}
	_ = fc
	if calls.Load() == 0 {
		t.Fatal("the hook never ran")
	}
}

// A BeforeAcquire that rejects a connection makes the acquire go on with another; the rejected
// one is closed with CloseHookRejected.
func TestBeforeAcquireRejectTriesAnother(t *testing.T) {
	var rejected sync.Map
	var ev closeEvents
	p, _ := newPool(t, Config{MaxConns: 3, Trace: ev.trace(), Hooks: Hooks{
		BeforeAcquire: func(ctx context.Context, c HookConn) (bool, error) {
			dc := c.Conn().(*conn).e.conn
			if _, seen := rejected.LoadOrStore(dc, true); !seen && len(ev.reasons()) < 2 {
				return false, nil // reject each connection the first time it is offered, twice
			}
			return true, nil
		},
	}})
	eventually(t, "three idle connections", func() bool { return p.Stats().Idle == 3 })
	c := mustConnect(t, p)
	_ = c.Close()
	if got := ev.reasons(); len(got) != 2 || got[0] != CloseHookRejected || got[1] != CloseHookRejected {
		t.Fatalf("close reasons %v; want two hook_rejected", got)
	}
}

type closeEvents struct {
	mu sync.Mutex
	rs []CloseReason
}

func (e *closeEvents) Closed(_ string, r CloseReason) {
	e.mu.Lock()
	e.rs = append(e.rs, r)
	e.mu.Unlock()
}
func (e *closeEvents) trace() *Trace { return &Trace{Closed: e.Closed} }

func (e *closeEvents) reasons() []CloseReason {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.rs)
}

// What BeforeAcquire sets through SQL is tracked like a borrower's statement and reset at
// release, on both paths (Connect, and a checkout from a DB's idle list).
func TestHookStatementsAreResetAtRelease(t *testing.T) {
	p, fc := newPool(t, Config{MaxConns: 1, Hooks: Hooks{
		BeforeAcquire: func(ctx context.Context, c HookConn) (bool, error) {
			return true, c.Exec(ctx, "SET @tenant = 'acme'")
		},
	}})
	eventually(t, "an idle connection", func() bool { return p.Stats().Idle == 1 })
	c := mustConnect(t, p)
	_ = c.Close()
	db := p.OpenDB()
	defer db.Close()
	for range 3 {
		if _, err := db.Exec("SELECT 1"); err != nil {
			t.Fatal(err)
		}
	}
	log := fc.Conns()[0].Log()
	var sets, resets int
	for _, q := range log {
		switch {
		case q == "SET @tenant = 'acme'":
			sets++
		case strings.Contains(q, "@`tenant`=NULL") || strings.Contains(q, "@tenant=NULL") || strings.Contains(q, "@`tenant` = NULL"):
			resets++
		}
	}
	if sets < 4 || resets != sets {
		t.Fatalf("%d SETs by the hook, %d resets; want one reset per SET (log %q)", sets, resets, log)
	}
}

// AfterRelease runs before the release plan and may veto reuse; its own statements are reset.
func TestAfterReleaseVeto(t *testing.T) {
	var veto atomic.Bool
	var ev closeEvents
	p, fc := newPool(t, Config{MaxConns: 1, Trace: ev.trace(), Hooks: Hooks{
		AfterRelease: func(ctx context.Context, c HookConn) (bool, error) {
			if err := c.Exec(ctx, "SET @last_release = 1"); err != nil {
				return false, err
			}
			return !veto.Load(), nil
		},
	}})
	eventually(t, "an idle connection", func() bool { return p.Stats().Idle == 1 })
	c := mustConnect(t, p)
	_ = c.Close()
	if p.Stats().Closed != 0 {
		t.Fatal("a kept connection was closed")
	}
	if log := fc.Conns()[0].Log(); !slices.ContainsFunc(log, func(q string) bool { return strings.Contains(q, "last_release") && strings.Contains(q, "NULL") }) {
		t.Fatalf("the hook's SET was not reset: %q", log)
	}
	veto.Store(true)
	c = mustConnect(t, p)
	_ = c.Close()
	if got := ev.reasons(); len(got) != 1 || got[0] != CloseHookRejected {
		t.Fatalf("close reasons %v; want [hook_rejected]", got)
	}
}

// A failing AfterConnect is a failed dial: New fails, and in the creator it is recorded as
// LastError and retried with backoff.
func TestAfterConnectFailureIsADialFailure(t *testing.T) {
	fail := errors.New("no tenant schema")
	_, err := New(fakedb.New(), Config{Logger: quiet, Hooks: Hooks{
		AfterConnect: func(ctx context.Context, c HookConn) error { return fail },
	}})
	if !errors.Is(err, fail) || !strings.Contains(err.Error(), "AfterConnect hook failed") {
		t.Fatalf("New = %v; want the AfterConnect error", err)
	}
	var n atomic.Int32
	p, fc := newPool(t, Config{MaxConns: 1, InitializationFailTimeout: -1, Hooks: Hooks{
		AfterConnect: func(ctx context.Context, c HookConn) error {
			if n.Add(1) <= 3 {
				panic("not yet")
			}
			return c.Exec(ctx, "SET time_zone = '+00:00'")
		},
	}})
	eventually(t, "an idle connection after three failed hooks", func() bool { return p.Stats().Idle == 1 })
	if fc.Opens.Load() != 4 || fc.Open() != 1 {
		t.Fatalf("opens %d, open %d; want 4 dials, 1 kept", fc.Opens.Load(), fc.Open())
	}
	c := mustConnect(t, p)
	_ = c.Close()
	if p.Stats().ReleasePlans != 0 {
		t.Fatal("AfterConnect's SET is part of the baseline; a release ran a plan for it")
	}
}

// WithCredentials calls its source before every dial; a failing source is a failed dial.
func TestWithCredentials(t *testing.T) {
	fc := fakedb.New()
	var calls atomic.Int32
	var fail atomic.Bool
	src := func(ctx context.Context, host string) (driver.Connector, error) {
		calls.Add(1)
		if host != "db1:3306" {
			t.Errorf("host %q", host)
		}
		if fail.Load() {
			return nil, errors.New("vault sealed")
		}
		return fc, nil
	}
	p2, err := New(WithCredentials("db1:3306", src), Config{Logger: quiet, MaxConns: 2, AcquireTimeout: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	eventually(t, "two connections", func() bool { return p2.Stats().Idle == 2 })
	if calls.Load() != 2 {
		t.Fatalf("%d source calls for 2 dials", calls.Load())
	}
	fail.Store(true)
	p2.SoftEvict()
	_, err = p2.Connect(context.Background())
	if !errors.Is(err, ErrAcquireTimeout) || !strings.Contains(err.Error(), "vault sealed") {
		t.Fatalf("Connect = %v; want a timeout whose last error is the source's", err)
	}
	if got := calls.Load(); got < 3 || got > 20 {
		t.Fatalf("%d source calls in 400 ms of failures; want a few, with backoff", got)
	}
	fail.Store(false)
	c, err := p2.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
}

// On a checkout from a DB's idle list (ResetSession) a rejection makes database/sql take
// another connection, and a failing hook reaches the caller through the Connect database/sql
// falls back to.
func TestBeforeAcquireOnDatabaseSQLCheckout(t *testing.T) {
	var calls atomic.Int32
	var panicking atomic.Bool
	var ev closeEvents
	p, _ := newPool(t, Config{MaxConns: 2, Trace: ev.trace(), Hooks: Hooks{
		BeforeAcquire: func(ctx context.Context, c HookConn) (bool, error) {
			if panicking.Load() {
				panic("tenant lookup broke")
			}
			return calls.Add(1)%3 != 0, nil // every third offer rejected
		},
	}})
	db := p.OpenDB()
	defer db.Close()
	for i := range 20 {
		if _, err := db.Exec("SELECT 1"); err != nil {
			t.Fatalf("Exec %d: %v", i, err)
		}
	}
	if got := ev.reasons(); len(got) == 0 || !slices.Contains(got, CloseHookRejected) {
		t.Fatalf("close reasons %v; want rejections", got)
	}
	panicking.Store(true)
	_, err := db.Exec("SELECT 1")
	if !errors.Is(err, ErrHook) || !strings.Contains(err.Error(), "BeforeAcquire hook panicked: tenant lookup broke") {
		t.Fatalf("Exec with a panicking hook = %v; want the hook's error", err)
	}
	panicking.Store(false)
	if _, err := db.Exec("SELECT 1"); err != nil {
		t.Fatalf("Exec after the hook recovered: %v", err)
	}
}
