package validate

import (
	"context"
	"database/sql/driver"
	"errors"
	"time"
)

// DefaultAliveBypassWindow is how long after its last return a connection is
// handed out again without a probe. It is HikariCP's aliveBypassWindowMs
// (system property com.zaxxer.hikari.aliveBypassWindowMs), which HikariCP
// tightened from 1000 ms to 500 ms in 2015.
const DefaultAliveBypassWindow = 500 * time.Millisecond

// DefaultValidationTimeout is the default bound on one probe, HikariCP's
// validationTimeout default.
const DefaultValidationTimeout = 5 * time.Second

// MinValidationTimeout is the smallest useful probe timeout, HikariCP's
// com.zaxxer.hikari.timeoutMs.floor.
const MinValidationTimeout = 250 * time.Millisecond

// ProbeGrace is how long [Probe] waits, once its timeout or the caller's ctx
// has ended the probe, for the driver's Ping to return. A driver that honours
// the context returns at once (go-sql-driver/mysql closes the socket), and
// only then may the caller close the connection: closing it while the Ping
// still runs is a concurrent use of a driver.Conn, a data race in the driver.
const ProbeGrace = time.Second

// ErrProbeTimeout is returned by [Probe] when the connection did not answer
// within the probe's own timeout. It does not match context.DeadlineExceeded,
// and [IsFatal] reports it fatal: an unresponsive connection is dead to the
// pool.
var ErrProbeTimeout = errors.New("validate: probe timed out")

// NeedsProbe reports whether a connection that has been idle for idle since
// its last return must be probed before it is handed out under the given
// bypass window: true when idle exceeds window, and always when window is
// zero or negative (always validate). This is HikariCP's rule
// "now - lastAccessed > aliveBypassWindowMs".
func NeedsProbe(idle, window time.Duration) bool {
	return window <= 0 || idle > window
}

// Probe checks that c is alive by pinging it within timeout, and returns nil
// when it answered.
//
// When c implements driver.Validator and reports itself invalid, Probe
// returns driver.ErrBadConn without any network traffic. When c does not
// implement driver.Pinger, Probe reports it alive, as database/sql's
// DB.PingContext does: such a driver gives the pool no way to ask, and its
// errors will still be seen by [IsFatal] on first use.
//
// The ping runs under ctx further limited by timeout (no extra limit when
// timeout is zero or negative). The result is:
//
//   - nil: the connection answered.
//   - ctx's error when ctx itself was cancelled or expired: the caller gave
//     up, which [IsFatal] does not count as a connection fault.
//   - [ErrProbeTimeout] when the probe's own timeout expired first.
//   - otherwise the driver's error, unchanged (driver.ErrBadConn,
//     mysql.ErrInvalidConn, a *mysql.MySQLError such as 1053, ...).
//
// Any non-nil result means c must not be handed out: the ping may have been
// interrupted halfway, and go-sql-driver closes the socket when a ping's
// context ends.
//
// When the timeout or ctx ends the probe, Probe still waits up to
// [ProbeGrace] for the driver's Ping to return, so that the caller can close
// c without racing with it; a driver that honours the context (go-sql-driver
// does) returns at once. Probe therefore returns within timeout plus
// ProbeGrace even when the driver ignores the context; the abandoned ping then
// finishes in the background, and the caller must still never use c again.
func Probe(ctx context.Context, c driver.Conn, timeout time.Duration) error {
	if v, ok := c.(driver.Validator); ok && !v.IsValid() {
		return driver.ErrBadConn
	}
	p, ok := c.(driver.Pinger)
	if !ok {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	pctx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		pctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()

	done := make(chan error, 1) // buffered: an abandoned ping never blocks
	go func() { done <- p.Ping(pctx) }()

	var err error
	select {
	case err = <-done:
		if err == nil {
			return nil
		}
	case <-pctx.Done():
		// Let a driver that honours the context finish its Ping before the caller
		// closes c. The Ping's own result no longer matters: the probe ended.
		grace := time.NewTimer(ProbeGrace)
		select {
		case <-done:
		case <-grace.C:
		}
		grace.Stop()
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if pctx.Err() != nil {
		return ErrProbeTimeout
	}
	return err
}
