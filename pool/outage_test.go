package pool

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/fakedb"
)

// logRecorder is a slog.Handler that keeps every record at INFO or above; up receives one
// value per INFO line that reports the pool up again.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
	up   chan slog.Record
}

func newLogRecorder() *logRecorder { return &logRecorder{up: make(chan slog.Record, 16)} }

func (r *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.recs = append(r.recs, rec.Clone())
	r.mu.Unlock()
	if rec.Level == slog.LevelInfo && strings.Contains(rec.Message, "the pool is up") {
		r.up <- rec.Clone()
	}
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// warns returns the WARN records so far.
func (r *logRecorder) warns() []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []slog.Record
	for _, rec := range r.recs {
		if rec.Level == slog.LevelWarn {
			out = append(out, rec)
		}
	}
	return out
}

func attr(rec slog.Record, key string) string {
	v := ""
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

// An outage is logged as one WARN when it starts (address, phase, error, what the pool does
// next), then at most one summary WARN per OutageLogInterval, and one INFO with the downtime
// when a connection opens again — not one WARN per failed dial (before: ten a second while
// callers waited). Stats.DownSince and the callers' errors say the same.
func TestOutageLogsAreBoundedAndEndWithRecovery(t *testing.T) {
	rec := newLogRecorder()
	fc := fakedb.New()
	const interval, outage = 500 * time.Millisecond, 3 * time.Second
	p, _ := newPoolOver(t, fc, Config{Name: "orders", MaxConns: 4, Addr: "db.example:3306",
		outageLogInterval: interval, Logger: slog.New(rec)})
	if st := p.Stats(); !st.DownSince.IsZero() {
		t.Fatalf("Stats before the outage: DownSince %v; want zero", st.DownSince)
	}

	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	fc.SetDialError(refused)
	for _, c := range fc.Conns() {
		c.Break()
	}
	p.SoftEvict()

	// 8 callers keep asking for connections for the whole outage, as a busy service would.
	ctx, stop := context.WithTimeout(context.Background(), outage)
	defer stop()
	var wg sync.WaitGroup
	var lastErr atomic.Value
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				c, err := p.Connect(cctx)
				cancel()
				if err == nil {
					_ = c.Close()
				} else {
					lastErr.Store(err)
				}
			}
		}()
	}
	wg.Wait()
	dials := fc.Dials.Load()
	if st := p.Stats(); st.DownSince.IsZero() || time.Since(st.DownSince) < outage/2 {
		t.Errorf("Stats during the outage: DownSince %v; want about %v ago", st.DownSince, outage)
	}
	if err, _ := lastErr.Load().(error); err == nil || !strings.Contains(err.Error(), "db.example:3306") {
		t.Errorf("a caller's error during the outage = %v; want it to name db.example:3306", err)
	}

	fc.SetDialError(nil)
	var up slog.Record
	select {
	case up = <-rec.up:
	case <-time.After(10 * time.Second):
		t.Fatal("no INFO line said the pool is up within 10s of the database coming back")
	}
	if st := p.Stats(); !st.DownSince.IsZero() {
		t.Errorf("Stats after recovery: DownSince %v; want zero", st.DownSince)
	}
	if d, err := time.ParseDuration(attr(up, "downtime")); err != nil || d < outage/2 {
		t.Errorf("recovery line downtime = %q; want about %v", attr(up, "downtime"), outage)
	}

	warns := rec.warns()
	for _, w := range warns {
		t.Logf("WARN %s %s", w.Message, attrsOf(w))
	}
	t.Logf("%d dials in %v of outage; %d WARN lines; recovery: %s", dials, outage, len(warns), attrsOf(up))
	// The first line, then at most one per interval (plus one for timer slack).
	if limit := 1 + int(outage/interval) + 1; len(warns) > limit {
		t.Errorf("%d WARN lines in a %v outage with OutageLogInterval %v; want at most %d", len(warns), outage, interval, limit)
	}
	if len(warns) == 0 {
		t.Fatal("no WARN line for the outage")
	}
	first := warns[0]
	if attr(first, "addr") != "db.example:3306" || attr(first, "phase") != "dial" ||
		!strings.Contains(attr(first, "next"), "every 100ms while callers wait") {
		t.Errorf("first WARN = %s %s; want addr, phase dial and what the pool does next", first.Message, attrsOf(first))
	}
	if attr(first, "retry_in") != "" {
		t.Errorf("first WARN has retry_in=%s: the creator dials every 100ms while callers wait, not after it", attr(first, "retry_in"))
	}
	if len(warns) > 1 && attr(warns[1], "failed_attempts") == "" {
		t.Errorf("summary WARN = %s %s; want failed_attempts", warns[1].Message, attrsOf(warns[1]))
	}
}

// A change of the failing phase during an outage (the database is back but refuses the login)
// is logged at once, once.
func TestOutageLogsAPhaseChange(t *testing.T) {
	rec := newLogRecorder()
	fc := fakedb.New()
	fc.SetDialError(&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")})
	p, _ := newPoolOver(t, fc, Config{Name: "orders", MaxConns: 1, Addr: "db:3306", InitializationFailTimeout: -1,
		LoginBackoffMax: time.Hour, Logger: slog.New(rec)})
	eventually(t, "the pool down", func() bool { return !p.Stats().DownSince.IsZero() })
	fc.SetDialError(accessDenied)
	eventually(t, "a WARN for the refused login", func() bool {
		for _, w := range rec.warns() {
			if attr(w, "last_phase") == "authentication" {
				return true
			}
		}
		return false
	})
	warns := rec.warns()
	if len(warns) != 2 || attr(warns[0], "phase") != "dial" || !strings.Contains(attr(warns[1], "next"), "Redial") {
		for _, w := range warns {
			t.Logf("WARN %s %s", w.Message, attrsOf(w))
		}
		t.Errorf("%d WARN lines; want 2: the dial failure, then the refused login with what to do", len(warns))
	}
}

func attrsOf(rec slog.Record) string {
	var b strings.Builder
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, "%s=%q ", a.Key, a.Value.String())
		return true
	})
	return b.String()
}

// A failed dial's error names the address and the phase; a connect timeout names the address;
// an acquire that gives up while a dial hangs says so, with the address.
func TestConnectErrorNamesAddrAndPhase(t *testing.T) {
	fc := fakedb.New()
	p, _ := newPoolOver(t, fc, Config{Name: "orders", MaxConns: 1, MinIdleConns: -1, Addr: "10.255.255.1:3306",
		InitializationFailTimeout: -1})
	for _, tc := range []struct {
		err  error
		init bool
		want string
	}{
		{&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: no route to host")}, false, phaseDial},
		{&net.DNSError{Err: "no such host", Name: "db"}, false, phaseDial},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, false, phaseTLS},
		{fmt.Errorf("connect timed out after ConnectTimeout 1s: %w", context.DeadlineExceeded), false, phaseTimeout},
		{&mysql.MySQLError{Number: 1045, Message: "Access denied"}, false, phaseAuth},
		{mysql.ErrInvalidConn, false, phaseHandshake},
		{errors.New("AfterConnect: boom"), true, phaseInit},
	} {
		ce := p.connectError(tc.err, tc.init)
		if ce.phase != tc.want || !strings.Contains(ce.Error(), "10.255.255.1:3306") || !errors.Is(ce, tc.err) {
			t.Errorf("connectError(%v) = %q phase %s; want phase %s, naming the address, unwrapping to the error", tc.err, ce, ce.phase, tc.want)
		}
	}

	// A dial that hangs (an unroutable host): the acquire's error names the address.
	fc.SetDialBlock(true)
	defer fc.SetDialBlock(false)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := p.Connect(ctx)
	if err == nil || !strings.Contains(err.Error(), "10.255.255.1:3306") || !strings.Contains(err.Error(), "no answer") {
		t.Errorf("Connect while the dial hangs = %v; want an error naming 10.255.255.1:3306 and the unanswered attempt", err)
	}
}
