package pgdialect

import (
	"database/sql/driver"
	"errors"
	"net"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"github.com/jackc/pgx/v5/stdlib"
)

// Alive is the tracker's pool.SessionCaps.Alive: a non-blocking peek at the socket of an idle
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

// SkipDriverReset is the tracker's pool.SessionCaps.SkipDriverReset. It is true for lib/pq's connections,
// whose ResetSession reports the error that IsValid reported at the return before it (nothing
// runs on an idle lib/pq connection in between), and for a pgx stdlib connection whose
// ResetSession does only what the pool does at every hand-out (made by GetConnector or the
// registered driver with neither OptionResetSession nor OptionShouldPing): it fails a closed
// connection (the pool asks IsValid at return and Alive at hand-out), fails one left in a
// transaction (the release plan rolls it back), and pings one idle for more than a second (the
// pool probes one not known alive within AliveBypassWindow). The pool then does not call it,
// which saves a read of the wall clock (pgx) or of a mutex (lib/pq) per checkout.
func (t *tracker) SkipDriverReset() bool { return t.skipReset }

// IsValid is the tracker's pool.SessionCaps.IsValid, for a pgx connection whose ResetSession the pool skips:
// false once pgx closed it or while it is busy (a statement or a cancel still in flight).
func (t *tracker) IsValid() bool { return t.closed == nil || !t.closed() }

// defaultReset reports whether dc is a pgx stdlib connection with stdlib's own no-op session
// reset and no ShouldPing function: both are unexported fields of stdlib.Conn, read once per
// connection by reflection; any other layout (another pgx version) reports false, and the pool
// then calls pgx's ResetSession as database/sql does.
func defaultReset(dc driver.Conn) bool {
	c, ok := dc.(*stdlib.Conn)
	if !ok || c == nil {
		return false
	}
	v := reflect.ValueOf(c).Elem()
	rs, sp := v.FieldByName("resetSessionFunc"), v.FieldByName("shouldPing")
	if !rs.IsValid() || !sp.IsValid() || rs.Kind() != reflect.Func || sp.Kind() != reflect.Func || rs.IsNil() || !sp.IsNil() {
		return false
	}
	f := runtime.FuncForPC(rs.Pointer())
	return f != nil && strings.HasPrefix(f.Name(), stdlibPkg+".")
}

// stdlibPkg is the import path of pgx's database/sql driver, whose own reset functions are
// no-ops (a user's OptionResetSession function is defined in another package).
const stdlibPkg = "github.com/jackc/pgx/v5/stdlib"
