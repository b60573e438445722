package validate

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// fakeConn is a driver.Conn without Pinger.
type fakeConn struct{}

func (fakeConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("not implemented") }
func (fakeConn) Close() error                        { return nil }
func (fakeConn) Begin() (driver.Tx, error)           { return nil, errors.New("not implemented") }

// pingConn is a driver.Conn whose Ping runs ping.
type pingConn struct {
	fakeConn
	ping func(ctx context.Context) error
}

func (c pingConn) Ping(ctx context.Context) error { return c.ping(ctx) }

// validatingConn adds driver.Validator.
type validatingConn struct {
	pingConn
	valid bool
}

func (c validatingConn) IsValid() bool { return c.valid }

func TestProbe(t *testing.T) {
	const timeout = 50 * time.Millisecond
	const bound = 2 * time.Second // loose: the machine is shared

	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // lets the abandoned ping finish

	tests := []struct {
		name  string
		conn  driver.Conn
		want  error
		fatal bool
	}{
		{"alive", pingConn{ping: func(context.Context) error { return nil }}, nil, false},
		{"dead: bad conn", pingConn{ping: func(context.Context) error { return driver.ErrBadConn }}, driver.ErrBadConn, true},
		{"dead: shutdown", pingConn{ping: func(context.Context) error { return myErr(1053, "08S01", "Server shutdown in progress") }}, &mysql.MySQLError{Number: 1053}, true},
		{"blocks, honours ctx", pingConn{ping: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}, ErrProbeTimeout, true},
		{"blocks, ignores ctx", pingConn{ping: func(context.Context) error { <-release; return nil }}, ErrProbeTimeout, true},
		{"blocks, driver closes socket", pingConn{ping: func(ctx context.Context) error { <-ctx.Done(); return mysql.ErrInvalidConn }}, ErrProbeTimeout, true},
		{"no Pinger", fakeConn{}, nil, false},
		{"Validator says invalid", validatingConn{pingConn: pingConn{ping: func(context.Context) error { t.Error("pinged an invalid conn"); return nil }}}, driver.ErrBadConn, true},
		{"Validator says valid", validatingConn{pingConn: pingConn{ping: func(context.Context) error { return nil }}, valid: true}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			err := Probe(context.Background(), tt.conn, timeout)
			elapsed := time.Since(start)
			if !errors.Is(err, tt.want) && err != tt.want {
				t.Fatalf("Probe = %v, want %v", err, tt.want)
			}
			if elapsed > bound {
				t.Fatalf("Probe took %v, bound %v", elapsed, bound)
			}
			if fatal, _ := IsFatal(err); fatal != tt.fatal {
				t.Fatalf("IsFatal(%v) = %v, want %v", err, fatal, tt.fatal)
			}
		})
	}
}

func TestProbeTimeoutNotBeforeDeadline(t *testing.T) {
	const timeout = 30 * time.Millisecond
	c := pingConn{ping: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}
	start := time.Now()
	err := Probe(context.Background(), c, timeout)
	if !errors.Is(err, ErrProbeTimeout) {
		t.Fatalf("Probe = %v, want ErrProbeTimeout", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("ErrProbeTimeout must not match context.DeadlineExceeded, or IsFatal would excuse it")
	}
	if elapsed := time.Since(start); elapsed < timeout {
		t.Fatalf("Probe gave up after %v, before its %v timeout", elapsed, timeout)
	}
}

func TestProbeCallerContext(t *testing.T) {
	t.Run("already cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		c := pingConn{ping: func(context.Context) error { t.Error("pinged with a cancelled context"); return nil }}
		err := Probe(ctx, c, time.Second)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Probe = %v, want context.Canceled", err)
		}
		if fatal, _ := IsFatal(err); fatal {
			t.Fatal("the caller's cancellation counted as a connection fault")
		}
	})
	t.Run("cancelled during ping", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		started := make(chan struct{})
		c := pingConn{ping: func(pctx context.Context) error {
			close(started)
			<-pctx.Done()
			return mysql.ErrInvalidConn // what a driver that closes the socket may say
		}}
		go func() { <-started; cancel() }()
		err := Probe(ctx, c, 10*time.Second)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Probe = %v, want context.Canceled", err)
		}
		if fatal, _ := IsFatal(err); fatal {
			t.Fatal("the caller's cancellation counted as a connection fault")
		}
	})
	t.Run("caller deadline shorter than timeout", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		c := pingConn{ping: func(pctx context.Context) error { <-pctx.Done(); return pctx.Err() }}
		err := Probe(ctx, c, 10*time.Second)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Probe = %v, want context.DeadlineExceeded", err)
		}
	})
	t.Run("no timeout uses ctx only", func(t *testing.T) {
		c := pingConn{ping: func(pctx context.Context) error {
			if _, ok := pctx.Deadline(); ok {
				t.Error("Probe added a deadline with timeout 0")
			}
			return nil
		}}
		if err := Probe(context.Background(), c, 0); err != nil {
			t.Fatalf("Probe = %v", err)
		}
	})
}

func TestNeedsProbe(t *testing.T) {
	w := DefaultAliveBypassWindow
	tests := []struct {
		idle, window time.Duration
		want         bool
	}{
		{0, w, false},
		{w - time.Millisecond, w, false},
		{w, w, false},
		{w + time.Nanosecond, w, true},
		{time.Hour, w, true},
		{0, 0, true},
		{time.Millisecond, -1, true},
	}
	for _, tt := range tests {
		if got := NeedsProbe(tt.idle, tt.window); got != tt.want {
			t.Errorf("NeedsProbe(%v, %v) = %v, want %v", tt.idle, tt.window, got, tt.want)
		}
	}
	if DefaultAliveBypassWindow != 500*time.Millisecond {
		t.Errorf("DefaultAliveBypassWindow = %v, HikariCP's is 500ms", DefaultAliveBypassWindow)
	}
}

// A probe that ends by its timeout returns only once the driver's Ping has returned (within
// ProbeGrace), so that the caller may close the connection without racing with the Ping.
func TestProbeWaitsForPingBeforeReturning(t *testing.T) {
	var returned atomic.Bool
	c := pingConn{ping: func(ctx context.Context) error {
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // a driver tearing its socket down
		returned.Store(true)
		return mysql.ErrInvalidConn
	}}
	err := Probe(context.Background(), c, 10*time.Millisecond)
	if !errors.Is(err, ErrProbeTimeout) {
		t.Fatalf("Probe = %v, want ErrProbeTimeout", err)
	}
	if !returned.Load() {
		t.Fatal("Probe returned while the driver's Ping was still running")
	}
}
