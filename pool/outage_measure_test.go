package pool_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	_ "github.com/sqlpool/sqlpool/mysqldialect"
	"github.com/sqlpool/sqlpool/pool"
)

// lineCounter counts log records by level and keeps each WARN and INFO message.
type lineCounter struct {
	mu    sync.Mutex
	start time.Time
	lines []string
	warn  atomic.Int64
	info  atomic.Int64
}

func (c *lineCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (c *lineCounter) Handle(_ context.Context, r slog.Record) error {
	switch r.Level {
	case slog.LevelWarn:
		c.warn.Add(1)
	case slog.LevelInfo:
		c.info.Add(1)
	}
	c.mu.Lock()
	c.lines = append(c.lines, r.Time.Sub(c.start).Round(time.Millisecond).String()+" "+r.Level.String()+" "+r.Message)
	c.mu.Unlock()
	return nil
}
func (c *lineCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *lineCounter) WithGroup(string) slog.Handler      { return c }

// outageProxy forwards TCP connections to a server; down closes its listener and every
// connection through it (the database is unreachable: dials are refused), up listens again on
// the same port.
type outageProxy struct {
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func (x *outageProxy) up(t *testing.T) {
	ln, err := net.Listen("tcp", x.addr)
	if err != nil {
		t.Fatal(err)
	}
	x.mu.Lock()
	x.ln = ln
	x.addr = ln.Addr().String()
	x.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", x.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			x.mu.Lock()
			x.conns = append(x.conns, c, s)
			x.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
			go func() { _, _ = io.Copy(c, s); _ = c.Close() }()
		}
	}()
}

func (x *outageProxy) down() {
	x.mu.Lock()
	defer x.mu.Unlock()
	_ = x.ln.Close()
	for _, c := range x.conns {
		_ = c.Close()
	}
	x.conns = nil
}

// TestMeasureOutageLogs measures what a pool logs while its MariaDB is unreachable: 16 callers
// query through p.OpenDB() (each query with a 1 s context) for 5 s up, SQLPOOL_OUTAGE_MEASURE
// (a duration) down, 5 s up again. It runs only when SQLPOOL_OUTAGE_MEASURE and MYSQL_TEST_DSN
// are set (docs/design/outage-logs.md); it uses only API that predates the outage logs, so that
// the same file measures older code.
func TestMeasureOutageLogs(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("SQLPOOL_OUTAGE_MEASURE"))
	dsn := os.Getenv("MYSQL_TEST_DSN")
	if err != nil || dsn == "" {
		t.Skip("set SQLPOOL_OUTAGE_MEASURE=20s and MYSQL_TEST_DSN to measure outage logs")
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	x := &outageProxy{target: cfg.Addr, addr: "127.0.0.1:0"}
	x.up(t)
	defer x.down()
	cfg.Addr = x.addr
	cfg.Logger = quietMySQLLogger{}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lc := &lineCounter{start: time.Now()}
	p, err := pool.New(conn, pool.Config{Name: "measure", MaxConns: 8, Logger: slog.New(lc)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	db := p.OpenDB()
	defer db.Close()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failed, ok atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				var one int
				if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
					failed.Add(1)
					time.Sleep(10 * time.Millisecond)
				} else {
					ok.Add(1)
				}
				cancel()
			}
		}()
	}
	time.Sleep(5 * time.Second)
	w0, i0 := lc.warn.Load(), lc.info.Load()
	x.down()
	downAt := time.Now()
	time.Sleep(d)
	wDown, iDown := lc.warn.Load()-w0, lc.info.Load()-i0
	x.up(t)
	upAt := time.Now()
	time.Sleep(5 * time.Second)
	close(stop)
	wg.Wait()
	wAfter, iAfter := lc.warn.Load()-w0-wDown, lc.info.Load()-i0-iDown
	lc.mu.Lock()
	lines := append([]string(nil), lc.lines...)
	lc.mu.Unlock()
	var shown []string
	for i, l := range lines {
		if i < 12 || i >= len(lines)-6 {
			shown = append(shown, l)
		} else if i == 12 {
			shown = append(shown, "…")
		}
	}
	t.Logf("outage %v (down at %v, up at %v): %d WARN (%.2f/s), %d INFO during; %d WARN, %d INFO in the 5 s after; queries ok %d failed %d\n%s",
		d, downAt.Sub(lc.start).Round(time.Millisecond), upAt.Sub(lc.start).Round(time.Millisecond),
		wDown, float64(wDown)/d.Seconds(), iDown, wAfter, iAfter, ok.Load(), failed.Load(), strings.Join(shown, "\n"))
}

type quietMySQLLogger struct{}

func (quietMySQLLogger) Print(...any) {}
