package mysqltest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Proxy is a TCP proxy on 127.0.0.1 that counts bytes and MySQL packets in
// each direction, and can inject faults. Faults can be switched while a test
// runs and affect existing and new connections alike.
//
// Each accepted connection is forwarded to the target over a connection of
// its own. A half-close (FIN) from either side is passed on as a half-close,
// and the proxy closes both sockets once both directions have ended. A reset
// from either side is passed on as a reset.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // canceled by Close; bounds dials
	cancel context.CancelFunc

	clientBytes, serverBytes     atomic.Int64
	clientPackets, serverPackets atomic.Int64
	conns                        atomic.Int64

	latency atomic.Int64 // time.Duration
	refuse  atomic.Bool
	stalled atomic.Int64 // forwards waiting now in a latency delay or a blackhole

	mu         sync.Mutex
	closeAfter int64 // bytes; 0 = off
	blackhole  bool
	stateCh    chan struct{} // closed and replaced whenever blackhole changes
	open       map[*proxyConn]struct{}
	closed     bool

	closing   chan struct{}
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup // accept loop, connection handlers and pipes
}

// Counts is a snapshot of a Proxy's counters. ClientBytes and ClientPackets
// count data forwarded from clients to the server, ServerBytes and
// ServerPackets data forwarded from the server to clients. Packets are
// counted by parsing the 4-byte MySQL packet header (3-byte little-endian
// payload length, 1-byte sequence number) in each direction's stream of each
// connection; a packet is counted once its header has been forwarded.
// Bytes and packets are counted just before they are written on, so that
// once a peer has received them they are in the counts. Conns
// counts accepted connections, including refused ones.
type Counts struct {
	ClientBytes, ServerBytes, ClientPackets, ServerPackets, Conns int64
}

// NewProxy starts a proxy to target ("host:port") and closes it in
// tb.Cleanup, failing the test if that leaves an error.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := StartProxy(target)
	if err != nil {
		tb.Fatalf("mysqltest: start proxy: %v", err)
	}
	tb.Cleanup(func() {
		if err := p.Close(); err != nil {
			tb.Errorf("mysqltest: close proxy: %v", err)
		}
	})
	return p
}

// StartProxy starts a proxy to target ("host:port") listening on a free port
// of 127.0.0.1. The caller must call Close.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("mysqltest: proxy listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		target:  target,
		ln:      ln,
		ctx:     ctx,
		cancel:  cancel,
		stateCh: make(chan struct{}),
		open:    map[*proxyConn]struct{}{},
		closing: make(chan struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the proxy's listening address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// DSN returns the go-sql-driver/mysql DSN dsn rewritten to connect through
// the proxy over TCP; every other setting is kept. If dsn cannot be parsed,
// DSN returns a string that go-sql-driver/mysql rejects with a message
// naming the parse error.
func (p *Proxy) DSN(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Sprintf("mysqltest-invalid-dsn(%v)", err)
	}
	cfg.Net = "tcp"
	cfg.Addr = p.Addr()
	return cfg.FormatDSN()
}

// Counts returns a snapshot of the counters.
func (p *Proxy) Counts() Counts {
	return Counts{
		ClientBytes:   p.clientBytes.Load(),
		ServerBytes:   p.serverBytes.Load(),
		ClientPackets: p.clientPackets.Load(),
		ServerPackets: p.serverPackets.Load(),
		Conns:         p.conns.Load(),
	}
}

// Reset zeroes the counters. Packet parsing state is kept, so packets that
// straddle a Reset are still framed correctly.
func (p *Proxy) Reset() {
	p.clientBytes.Store(0)
	p.serverBytes.Store(0)
	p.clientPackets.Store(0)
	p.serverPackets.Store(0)
	p.conns.Store(0)
}

// SetLatency delays every forwarded chunk by d (0 turns latency off). The
// delay applies in each direction, so a round trip takes at least 2*d.
func (p *Proxy) SetLatency(d time.Duration) {
	if d < 0 {
		d = 0
	}
	p.latency.Store(int64(d))
}

// Blackhole, when on, makes the proxy accept new connections but never
// forward anything or answer on them, and stops forwarding on existing
// connections; data and end-of-stream already read are held, not dropped.
// Turning it off resumes forwarding, and connections accepted meanwhile are
// then connected to the target.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blackhole == on {
		return
	}
	p.blackhole = on
	close(p.stateCh)
	p.stateCh = make(chan struct{})
}

// ResetAll resets (SetLinger(0) and Close, which sends RST) both sides of
// every open connection.
func (p *Proxy) ResetAll() {
	for _, c := range p.snapshot() {
		c.abort(true)
	}
}

// CloseAfter makes the proxy close each connection, open or new, after n
// more bytes have been forwarded on it (both directions together); n <= 0
// turns it off. The chunk that reaches the limit is cut at the limit.
func (p *Proxy) CloseAfter(n int64) {
	if n < 0 {
		n = 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeAfter = n
	for c := range p.open {
		c.budget.Store(budgetFor(n))
	}
}

// Stalled returns how many forwards (a chunk, or a new connection's dial to
// the target) are held right now by SetLatency or Blackhole: a test waits
// for it instead of sleeping until a connection is caught.
func (p *Proxy) Stalled() int64 { return p.stalled.Load() }

// Refuse, when on, makes the proxy close new connections as soon as it
// accepts them. Existing connections are not affected.
func (p *Proxy) Refuse(on bool) { p.refuse.Store(on) }

// Close stops the proxy: it closes the listener and every connection, and
// waits until all of the proxy's goroutines have returned. It is safe to
// call more than once and returns the listener's close error.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		conns := make([]*proxyConn, 0, len(p.open))
		for c := range p.open {
			conns = append(conns, c)
		}
		p.mu.Unlock()
		close(p.closing)
		p.cancel()
		p.closeErr = p.ln.Close()
		for _, c := range conns {
			c.abort(false)
		}
		p.wg.Wait()
	})
	return p.closeErr
}

func (p *Proxy) snapshot() []*proxyConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	conns := make([]*proxyConn, 0, len(p.open))
	for c := range p.open {
		conns = append(conns, c)
	}
	return conns
}

func budgetFor(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			select {
			case <-p.closing:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient error such as EMFILE: back off briefly.
			t := time.NewTimer(5 * time.Millisecond)
			select {
			case <-p.closing:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		p.conns.Add(1)
		if p.refuse.Load() {
			_ = conn.Close()
			continue
		}
		c := &proxyConn{p: p, client: conn, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = conn.Close()
			return
		}
		c.budget.Store(budgetFor(p.closeAfter))
		p.open[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go c.run()
	}
}

// proxyConn is one proxied connection.
type proxyConn struct {
	p      *Proxy
	client net.Conn
	budget atomic.Int64 // bytes left before close; -1 = unlimited

	mu       sync.Mutex
	upstream net.Conn // nil until dialed
	aborted  bool

	done chan struct{} // closed by abort
}

// run connects to the target and forwards in both directions until both
// have ended or the connection is aborted.
func (c *proxyConn) run() {
	p := c.p
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.open, c)
		p.mu.Unlock()
	}()
	defer c.abort(false)

	if !c.waitForward() {
		return
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	up, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		return
	}
	c.mu.Lock()
	if c.aborted {
		c.mu.Unlock()
		_ = up.Close()
		return
	}
	c.upstream = up
	c.mu.Unlock()

	serverDone := make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(serverDone)
		c.pipe(up, c.client, &p.serverBytes, &p.serverPackets)
	}()
	c.pipe(c.client, up, &p.clientBytes, &p.clientPackets)
	<-serverDone
}

// abort closes both sides of the connection, with RST when rst is set. Only
// the first call has an effect.
func (c *proxyConn) abort(rst bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.aborted {
		return
	}
	c.aborted = true
	close(c.done)
	for _, conn := range []net.Conn{c.client, c.upstream} {
		if conn == nil {
			continue
		}
		if rst {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
		}
		_ = conn.Close()
	}
}

// waitForward blocks while the proxy is blackholed. It returns false when
// the connection was aborted or the proxy closed meanwhile.
func (c *proxyConn) waitForward() bool {
	p := c.p
	for {
		p.mu.Lock()
		bh, ch := p.blackhole, p.stateCh
		p.mu.Unlock()
		if !bh {
			select {
			case <-c.done:
				return false
			default:
				return true
			}
		}
		p.stalled.Add(1)
		var ok bool
		select {
		case <-ch:
			ok = true
		case <-c.done:
		case <-p.closing:
		}
		p.stalled.Add(-1)
		if !ok {
			return false
		}
	}
}

// delay sleeps for the current latency. It returns false when the
// connection was aborted or the proxy closed meanwhile.
func (c *proxyConn) delay() bool {
	d := time.Duration(c.p.latency.Load())
	if d <= 0 {
		return true
	}
	c.p.stalled.Add(1)
	defer c.p.stalled.Add(-1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.done:
		return false
	case <-c.p.closing:
		return false
	}
}

// take reserves up to n bytes of the connection's CloseAfter budget. It
// returns how many may be forwarded and whether the budget is now spent.
func (c *proxyConn) take(n int) (int, bool) {
	for {
		b := c.budget.Load()
		if b < 0 {
			return n, false
		}
		t := min(b, int64(n))
		if c.budget.CompareAndSwap(b, b-t) {
			return int(t), b-t == 0
		}
	}
}

// pipe forwards src to dst, counting bytes and packets, until src ends or
// the connection is aborted. At the end of src it half-closes dst.
func (c *proxyConn) pipe(src, dst net.Conn, bytes, packets *atomic.Int64) {
	buf := make([]byte, 32<<10)
	var scan packetScanner
	for {
		n, rerr := src.Read(buf)
		if !c.waitForward() {
			return
		}
		if n > 0 {
			if !c.delay() {
				return
			}
			allowed, spent := c.take(n)
			if allowed > 0 {
				data := buf[:allowed]
				// Count before writing, so that a peer that has received
				// the data also sees it counted.
				bytes.Add(int64(len(data)))
				packets.Add(scan.feed(data))
				if _, err := dst.Write(data); err != nil {
					c.abort(isReset(err))
					return
				}
			}
			if spent {
				c.abort(false)
				return
			}
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				if cw, ok := dst.(interface{ CloseWrite() error }); ok {
					if err := cw.CloseWrite(); err == nil {
						return
					}
				}
			}
			c.abort(isReset(rerr))
			return
		}
	}
}

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// packetScanner frames one direction of a MySQL stream into packets.
type packetScanner struct {
	hdr  [4]byte
	hn   int // header bytes seen
	skip int // payload bytes still to pass
}

// feed consumes b and returns the number of packet headers it completed.
func (s *packetScanner) feed(b []byte) int64 {
	var packets int64
	for len(b) > 0 {
		if s.skip > 0 {
			k := min(s.skip, len(b))
			s.skip -= k
			b = b[k:]
			continue
		}
		k := copy(s.hdr[s.hn:], b)
		s.hn += k
		b = b[k:]
		if s.hn == len(s.hdr) {
			packets++
			s.skip = int(s.hdr[0]) | int(s.hdr[1])<<8 | int(s.hdr[2])<<16
			s.hn = 0
		}
	}
	return packets
}
