package mysqltest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// embeddedAddr returns the host:port of the shared embedded server.
func embeddedAddr(t *testing.T) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(EmbeddedDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Addr
}

// proxiedConn opens a DB through p and one established connection on it.
func proxiedConn(t *testing.T, p *Proxy) (*sql.DB, *sql.Conn) {
	t.Helper()
	db := openDB(t, p.DSN(EmbeddedDSN(t)))
	ctx := ctxT(t, 10*time.Second)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := conn.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	return db, conn
}

func TestPacketScanner(t *testing.T) {
	var stream []byte
	var want int64
	for _, n := range []int{0, 1, 5, 300, 70000, 0xffffff, 0} {
		stream = append(stream, byte(n), byte(n>>8), byte(n>>16), byte(want))
		stream = append(stream, bytes.Repeat([]byte{0xfe}, n)...)
		want++
	}
	for _, chunk := range []int{1, 2, 3, 4, 5, 7, 4096, len(stream)} {
		var s packetScanner
		var got int64
		for b := stream; len(b) > 0; {
			k := min(chunk, len(b))
			if s.skip > 1<<16 {
				k = s.skip // pass large payloads at once, to keep the test fast
			}
			got += s.feed(b[:k])
			b = b[k:]
		}
		if got != want || s.hn != 0 || s.skip != 0 {
			t.Errorf("chunk %d: %d packets (state %d/%d), want %d", chunk, got, s.hn, s.skip, want)
		}
	}
}

func TestProxyDSN(t *testing.T) {
	p := NewProxy(t, "127.0.0.1:1")
	in := "u:p@unix(/tmp/x.sock)/db?parseTime=true&wait_timeout=2"
	cfg, err := mysql.ParseDSN(p.DSN(in))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Net != "tcp" || cfg.Addr != p.Addr() || cfg.User != "u" || cfg.Passwd != "p" || cfg.DBName != "db" ||
		!cfg.ParseTime || cfg.Params["wait_timeout"] != "2" {
		t.Fatalf("DSN(%q) = %q", in, p.DSN(in))
	}
	if _, err := mysql.ParseDSN(p.DSN("not a dsn")); err == nil {
		t.Fatal("DSN of an invalid DSN parsed")
	}
}

func TestProxyCountsSelect1(t *testing.T) {
	p := NewProxy(t, embeddedAddr(t))
	_, conn := proxiedConn(t, p)
	if c := p.Counts(); c.Conns != 1 || c.ClientBytes == 0 || c.ServerBytes == 0 || c.ClientPackets == 0 || c.ServerPackets == 0 {
		t.Fatalf("counts after connect: %+v", c)
	}
	p.Reset()
	if c := p.Counts(); c != (Counts{}) {
		t.Fatalf("counts after Reset: %+v", c)
	}
	var one int
	if err := conn.QueryRowContext(ctxT(t, 10*time.Second), "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	c := p.Counts()
	// COM_QUERY: 4-byte header + 1 command byte + "SELECT 1".
	if c.ClientPackets != 1 || c.ClientBytes != 4+1+int64(len("SELECT 1")) {
		t.Errorf("client side of SELECT 1: %+v, want 1 packet of 13 bytes", c)
	}
	// Column count, column definition, row, and EOF/OK at least.
	if c.ServerPackets < 3 || c.ServerBytes < 4*c.ServerPackets || c.Conns != 0 {
		t.Errorf("server side of SELECT 1: %+v", c)
	}
}

func TestProxyCountsPing(t *testing.T) {
	p := NewProxy(t, embeddedAddr(t))
	db := openDB(t, p.DSN(EmbeddedDSN(t)))
	db.SetMaxOpenConns(1)
	ctx := ctxT(t, 10*time.Second)
	if err := db.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		p.Reset()
		if err := db.PingContext(ctx); err != nil {
			t.Fatal(err)
		}
		c := p.Counts()
		if c.ClientPackets != 1 || c.ClientBytes != 5 || c.ServerPackets != 1 || c.Conns != 0 {
			t.Fatalf("db.Ping: %+v, want 1 client packet of 5 bytes (COM_PING) and 1 server packet", c)
		}
	}
}

func TestProxyLatency(t *testing.T) {
	p := NewProxy(t, embeddedAddr(t))
	_, conn := proxiedConn(t, p)
	const d = 40 * time.Millisecond
	p.SetLatency(d)
	start := time.Now()
	if err := conn.PingContext(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 2*d {
		t.Fatalf("ping with %v latency each way took %v", d, el)
	}
	p.SetLatency(0)
	start = time.Now()
	if err := conn.PingContext(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el >= 2*d {
		t.Logf("ping without latency took %v (slow machine?)", el)
	}
}

func TestProxyBlackhole(t *testing.T) {
	p := NewProxy(t, embeddedAddr(t))
	db, conn := proxiedConn(t, p)
	p.Blackhole(true)

	// An existing connection stops answering.
	p.Reset()
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	err := conn.PingContext(ctx)
	cancel()
	if err == nil {
		t.Fatal("ping through a blackhole succeeded")
	}
	if c := p.Counts(); c.ClientBytes != 0 || c.ServerBytes != 0 {
		t.Fatalf("bytes forwarded during blackhole: %+v", c)
	}

	// A new connection is accepted but not answered.
	db2 := openDB(t, p.DSN(EmbeddedDSN(t)))
	ctx, cancel = context.WithTimeout(t.Context(), 150*time.Millisecond)
	err = db2.PingContext(ctx)
	cancel()
	if err == nil {
		t.Fatal("new connection through a blackhole succeeded")
	}
	if c := p.Counts(); c.Conns < 1 || c.ServerBytes != 0 {
		t.Fatalf("counts for a new blackholed connection: %+v", c)
	}

	// A connection that waits is served once the blackhole ends.
	db3 := openDB(t, p.DSN(EmbeddedDSN(t)))
	errc := make(chan error, 1)
	go func() { errc <- db3.PingContext(ctxT(t, 10*time.Second)) }()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-errc:
		t.Fatalf("ping returned during blackhole: %v", err)
	default:
	}
	p.Blackhole(false)
	if err := <-errc; err != nil {
		t.Fatalf("ping after the blackhole ended: %v", err)
	}
	if err := db.PingContext(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("ping on the first DB after the blackhole ended: %v", err)
	}
}

func TestProxyResetAll(t *testing.T) {
	p := NewProxy(t, embeddedAddr(t))
	db, conn := proxiedConn(t, p)
	p.ResetAll()
	if err := conn.PingContext(ctxT(t, 10*time.Second)); err == nil {
		t.Fatal("ping on a reset connection succeeded")
	}
	if err := db.PingContext(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("ping on a new connection after ResetAll: %v", err)
	}
	if c := p.Counts(); c.Conns != 2 {
		t.Fatalf("Conns = %d, want 2", c.Conns)
	}
}

func TestProxyCloseAfter(t *testing.T) {
	p := NewProxy(t, embeddedAddr(t))
	db, conn := proxiedConn(t, p)
	p.CloseAfter(3)
	p.Reset()
	if err := conn.PingContext(ctxT(t, 10*time.Second)); err == nil {
		t.Fatal("ping past CloseAfter(3) succeeded")
	}
	if c := p.Counts(); c.ClientBytes != 3 || c.ServerBytes != 0 {
		t.Fatalf("counts with CloseAfter(3): %+v, want 3 client bytes", c)
	}
	// A new connection is cut during its handshake.
	db2 := openDB(t, p.DSN(EmbeddedDSN(t)))
	if err := db2.PingContext(ctxT(t, 10*time.Second)); err == nil {
		t.Fatal("new connection with CloseAfter(3) succeeded")
	}
	p.CloseAfter(0)
	if err := db.PingContext(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("ping after CloseAfter(0): %v", err)
	}
}

func TestProxyRefuse(t *testing.T) {
	p := NewProxy(t, embeddedAddr(t))
	_, conn := proxiedConn(t, p)
	p.Refuse(true)
	p.Reset()
	db2 := openDB(t, p.DSN(EmbeddedDSN(t)))
	if err := db2.PingContext(ctxT(t, 10*time.Second)); err == nil {
		t.Fatal("new connection through a refusing proxy succeeded")
	}
	if c := p.Counts(); c.Conns < 1 || c.ClientBytes != 0 || c.ServerBytes != 0 {
		t.Fatalf("counts while refusing: %+v", c)
	}
	if err := conn.PingContext(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("existing connection while refusing: %v", err)
	}
	p.Refuse(false)
	if err := db2.PingContext(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("new connection after Refuse(false): %v", err)
	}
}

// rawServer accepts connections on 127.0.0.1 and runs handle on each, until
// the test ends.
func rawServer(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			handle(c)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

// TestProxyHalfClose checks that a FIN from either side is passed on as a
// half-close while the other direction keeps flowing.
func TestProxyHalfClose(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB

	t.Run("client first", func(t *testing.T) {
		target := rawServer(t, func(c net.Conn) {
			n, _ := io.Copy(io.Discard, c) // until the client's FIN
			fmt.Fprintf(c, "got %d", n)
		})
		p := NewProxy(t, target)
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(payload); err != nil {
			t.Fatal(err)
		}
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		reply, err := io.ReadAll(c)
		if err != nil || string(reply) != fmt.Sprintf("got %d", len(payload)) {
			t.Fatalf("reply %q, %v", reply, err)
		}
		if got := p.Counts(); got.ClientBytes != int64(len(payload)) || got.ServerBytes != int64(len(reply)) {
			t.Fatalf("counts %+v", got)
		}
	})

	t.Run("server first", func(t *testing.T) {
		gotc := make(chan string, 1)
		target := rawServer(t, func(c net.Conn) {
			c.Write(payload)
			c.(*net.TCPConn).CloseWrite()
			b, _ := io.ReadAll(c)
			gotc <- string(b)
		})
		p := NewProxy(t, target)
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(c) // until the server's FIN
		if err != nil || !bytes.Equal(b, payload) {
			t.Fatalf("read %d bytes, %v", len(b), err)
		}
		if _, err := c.Write([]byte("bye")); err != nil {
			t.Fatal(err)
		}
		c.Close()
		select {
		case s := <-gotc:
			if s != "bye" {
				t.Fatalf("server got %q", s)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("server did not see the client's data and FIN")
		}
	})
}

func TestProxyResetAllSendsRST(t *testing.T) {
	target := rawServer(t, func(c net.Conn) { io.Copy(c, c) })
	p := NewProxy(t, target)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4)
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	p.ResetAll()
	_, err = c.Read(buf)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after ResetAll: %v, want ECONNRESET", err)
	}
}

// proxyGoroutines returns the stacks of goroutines running proxy code.
//
// A goroutine that has called wg.Done may still be in its last instructions
// when Close's wg.Wait returns, so a non-empty answer is asked again for up
// to 5 s: what is counted is goroutines still running proxy code after that.
func proxyGoroutines() []string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		g := proxyGoroutinesNow()
		if len(g) == 0 || time.Now().After(deadline) {
			return g
		}
		time.Sleep(time.Millisecond)
	}
}

func proxyGoroutinesNow() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "mysqltest.(*Proxy)") || strings.Contains(g, "mysqltest.(*proxyConn)") {
			out = append(out, g)
		}
	}
	return out
}

// TestProxyCloseEndsGoroutines closes a proxy with connections in every
// state and checks that Close returns only after all its goroutines ended.
func TestProxyCloseEndsGoroutines(t *testing.T) {
	if g := proxyGoroutines(); len(g) != 0 {
		t.Fatalf("proxy goroutines before the test:\n%s", strings.Join(g, "\n\n"))
	}
	p, err := StartProxy(embeddedAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	dsn := p.DSN(EmbeddedDSN(t))
	ctx := ctxT(t, 10*time.Second)

	idle := openDB(t, dsn) // an idle connection
	if err := idle.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	p.SetLatency(time.Hour) // a connection sleeping in latency
	slow := openDB(t, dsn)
	slowErr := make(chan error, 1)
	go func() { slowErr <- slow.PingContext(ctx) }()
	waitStalled(t, p, 1) // its first chunk is sleeping in the hour of latency
	p.SetLatency(0)
	p.Blackhole(true) // a connection held by the blackhole
	held := openDB(t, dsn)
	heldErr := make(chan error, 1)
	go func() { heldErr <- held.PingContext(ctx) }()
	waitStalled(t, p, 2) // and this one is held by the blackhole

	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	if g := proxyGoroutines(); len(g) != 0 {
		t.Fatalf("proxy goroutines after Close:\n%s", strings.Join(g, "\n\n"))
	}
	if err := <-slowErr; err == nil {
		t.Error("ping delayed by an hour succeeded")
	}
	if err := <-heldErr; err == nil {
		t.Error("ping held by the blackhole succeeded")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Error("closed proxy still accepts")
	}
}

// waitStalled waits until n forwards are held by latency or a blackhole.
func waitStalled(t *testing.T, p *Proxy, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.Stalled() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d forwards stalled after 10s; want %d", p.Stalled(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
