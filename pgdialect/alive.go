package pgdialect

import (
	"database/sql/driver"
	"errors"
	"net"
	"reflect"
	"syscall"
	"unsafe"

	"github.com/jackc/pgx/v5/stdlib"
)

// Alive implements pool.LivenessChecker: a non-blocking peek at the socket of an idle
// connection. EOF, an error, or any byte waiting (PostgreSQL sends nothing to an idle session
// unasked but a FATAL error before it closes, such as 57P01 from pg_terminate_backend or a
// shutdown) means the connection is dead. No byte is sent; the peek consumes nothing. A
// connection whose socket cannot be reached (TLS, an unknown driver) is reported alive.
func (t *tracker) Alive() bool {
	if t.closed != nil && t.closed() {
		return false
	}
	if t.sock == nil {
		return true
	}
	return sockAlive(t.sock)
}

// closedFunc returns pgx's "closed or busy" test for dc, or nil for other drivers.
func closedFunc(dc driver.Conn) func() bool {
	if c, ok := dc.(*stdlib.Conn); ok {
		pc := c.Conn().PgConn()
		return func() bool { return pc.IsClosed() || pc.IsBusy() }
	}
	return nil
}

// socketOf returns dc's socket when it is a plain TCP or unix socket, or nil.
func socketOf(dc driver.Conn) syscall.RawConn {
	var nc net.Conn
	switch c := dc.(type) {
	case *stdlib.Conn:
		nc = c.Conn().PgConn().Conn()
	default:
		nc = pqSocket(dc)
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// pqSocket reads lib/pq's unexported conn.c (its net.Conn), or returns nil.
func pqSocket(dc driver.Conn) net.Conn {
	v := reflect.ValueOf(dc)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil
	}
	el := v.Elem()
	if el.Kind() != reflect.Struct || el.Type().PkgPath() != "github.com/lib/pq" || el.Type().Name() != "conn" {
		return nil
	}
	f := el.FieldByName("c")
	if !f.IsValid() || f.Type() != reflect.TypeOf((*net.Conn)(nil)).Elem() {
		return nil
	}
	nc, _ := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(net.Conn)
	return nc
}

func sockAlive(rc syscall.RawConn) bool {
	var buf [1]byte
	alive := true
	// Control, not Read: Read would wait for the socket's read lock, which a driver's
	// background reader (pgx's bgreader) may hold in a blocking read.
	err := rc.Control(func(fd uintptr) {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK):
		case errors.Is(err, syscall.EINTR):
		default:
			alive = false // EOF (n == 0), a byte waiting (n > 0), or a socket error
			_ = n
		}
	})
	return err == nil && alive
}
