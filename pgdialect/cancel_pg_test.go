package pgdialect_test

import (
	"context"
	"database/sql/driver"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlpool/sqlpool/internal/pgtest"
	"github.com/sqlpool/sqlpool/pool"
)

// cancelLog keeps the outcomes of the pool's server-side cancels from its debug log.
type cancelLog struct {
	mu       sync.Mutex
	outcomes []string
}

func (l *cancelLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *cancelLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *cancelLog) WithGroup(string) slog.Handler            { return l }
func (l *cancelLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "sqlpool: cancelled statement stopped on the server" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "outcome" {
			l.mu.Lock()
			l.outcomes = append(l.outcomes, a.Value.String())
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

func (l *cancelLog) ended() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, o := range l.outcomes {
		if o == string(pool.CancelEnded) {
			return true
		}
	}
	return false
}

// TestServerCancel: a statement whose context ends on a pgx connection (which pgx then closes)
// is cancelled on the server through pgdialect's pool.ServerCancel (pg_cancel_backend on a side
// connection), and the pool sees its backend gone (outcome "ended").
func TestServerCancel(t *testing.T) {
	s := pgtest.Shared(t)
	cfg, err := pgx.ParseConfig(s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	// lib/pq is left out: its own cancel request ends the statement before the call returns,
	// and the pool then has nothing to cancel (no outcome is logged).
	for name, c := range map[string]driver.Connector{"pgx": stdlib.GetConnector(*cfg)} {
		t.Run(name, func(t *testing.T) { testServerCancel(t, c) })
	}
}

func testServerCancel(t *testing.T, c driver.Connector) {
	log := &cancelLog{}
	p, err := pool.New(c, pool.Config{MaxConns: 2, Logger: slog.New(log)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	db := p.OpenDB()
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := db.ExecContext(ctx, "SELECT pg_sleep(30)"); err == nil {
		t.Fatal("pg_sleep(30) ended within 200 ms")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !log.ended() {
		if time.Now().After(deadline) {
			log.mu.Lock()
			t.Fatalf("no server-side cancel ended within 10 s; outcomes %q", log.outcomes)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)' AND state = 'active'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d backends still sleep after the cancel", n)
	}
}
