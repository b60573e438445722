package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/server"
	gmssql "github.com/dolthub/go-mysql-server/sql"
	vtlog "github.com/dolthub/vitess/go/vt/log"
	"github.com/sirupsen/logrus"
)

// Database is the name of the in-memory database that every embedded
// server creates and that its DSN selects.
const Database = "test"

// EnvLogLevel names an environment variable that, when set to a
// logrus level ("debug", "info", ...), overrides the default "error" level
// of the embedded server's logs.
const EnvLogLevel = "MYSQLTEST_EMBEDDED_LOG_LEVEL"

var quietOnce sync.Once

// quietLogs lowers the embedded server's logging to errors (or to the level
// named by MYSQLTEST_EMBEDDED_LOG_LEVEL) and demotes the error that vitess
// logs whenever a client vanishes without COM_QUIT, which fault-injection
// tests do on purpose.
func quietLogs() {
	quietOnce.Do(func() {
		level := logrus.ErrorLevel
		if s := os.Getenv(EnvLogLevel); s != "" {
			if l, err := logrus.ParseLevel(s); err == nil {
				level = l
			}
		}
		logrus.SetLevel(level)
		vtlog.Errorf = func(format string, args ...any) {
			if strings.HasPrefix(format, "Error reading packet from") {
				logrus.Debugf(format, args...)
				return
			}
			logrus.Errorf(format, args...)
		}
	})
}

// Start starts an in-process go-mysql-server on 127.0.0.1 at a random
// port, with an in-memory database "test" and user root with no password
// (the server accepts any user when no user accounts are configured). It
// returns a go-sql-driver/mysql DSN of the form
// "root@tcp(127.0.0.1:PORT)/test" and a stop function. Stop closes the
// listener and every open connection, waits until the server's goroutines
// have returned, and is safe to call more than once.
func Start() (dsn string, stop func() error, err error) {
	return StartAt("127.0.0.1:0")
}

// StartAt is Start listening on addr ("host:port"; port 0 picks a free one).
func StartAt(addr string) (dsn string, stop func() error, err error) {
	quietLogs()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("embedded: listen: %w", err)
	}
	srv, tl, err := newServer(ln)
	if err != nil {
		return "", nil, err
	}
	done := make(chan struct{})
	go run(srv, done)
	var once sync.Once
	var stopErr error
	stop = func() error {
		once.Do(func() {
			stopErr = srv.Close()
			// Engine.Close kills running queries; its background threads
			// report context.Canceled on a normal shutdown.
			if err := srv.Engine.Close(); err != nil && !errors.Is(err, context.Canceled) {
				stopErr = errors.Join(stopErr, err)
			}
			tl.closeAll()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				stopErr = errors.Join(stopErr, errors.New("embedded: the server's accept loop did not return"))
			}
			if !tl.wait(10 * time.Second) {
				stopErr = errors.Join(stopErr, errors.New("embedded: the server's connections did not close"))
			}
		})
		return stopErr
	}
	return dsnFor(ln.Addr().String()), stop, nil
}

func dsnFor(addr string) string {
	return fmt.Sprintf("root@tcp(%s)/%s", addr, Database)
}

// run runs the accept loop of a server started by
// Start and closes done when it returns.
func run(srv *server.Server, done chan<- struct{}) {
	defer close(done)
	_ = srv.Start()
}

// newServer builds a go-mysql-server with an in-memory database
// "test" that serves connections accepted from ln.
func newServer(ln net.Listener) (*server.Server, *trackingListener, error) {
	db := memory.NewDatabase(Database)
	db.BaseDatabase.EnablePrimaryKeyIndexes()
	pro := memory.NewDBProvider(db)
	engine := sqle.NewDefault(pro)
	tl := &trackingListener{Listener: ln, conns: map[*trackedConn]struct{}{}}
	cfg := server.Config{Protocol: "tcp", Address: ln.Addr().String(), Listener: tl}
	srv, err := server.NewServer(cfg, engine, gmssql.NewContext, memory.NewSessionBuilder(pro), nil)
	if err != nil {
		_ = ln.Close()
		return nil, nil, fmt.Errorf("embedded: new embedded server: %w", err)
	}
	return srv, tl, nil
}

// trackingListener remembers the connections it accepted until the server
// closes them, so that a stop can close them all and wait for their handlers.
type trackingListener struct {
	net.Listener
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// trackedConn is a connection accepted by a trackingListener.
type trackedConn struct {
	net.Conn
	l    *trackingListener
	once sync.Once
}

// Close closes the connection and marks its handler as finished; the server
// calls it when the connection's handler returns.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		c.l.wg.Done()
	})
	return err
}

// Accept accepts a connection and tracks it.
func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	tc := &trackedConn{Conn: c, l: l}
	l.conns[tc] = struct{}{}
	l.wg.Add(1)
	return tc, nil
}

// closeAll closes the sockets of all tracked connections, which makes their
// handlers return (and call trackedConn.Close).
func (l *trackingListener) closeAll() {
	l.mu.Lock()
	l.closed = true
	cs := make([]*trackedConn, 0, len(l.conns))
	for c := range l.conns {
		cs = append(cs, c)
	}
	l.mu.Unlock()
	for _, c := range cs {
		_ = c.Conn.Close()
	}
}

// wait waits up to d for the handlers of all tracked connections to return
// and reports whether they did.
func (l *trackingListener) wait(d time.Duration) bool {
	ch := make(chan struct{})
	go func() { l.wg.Wait(); close(ch) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}
