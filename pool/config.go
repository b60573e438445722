package pool

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sqlpool/sqlpool/internal/testhook"
)

// Defaults and floors: DefaultX is Config.X when zero, MinX the least Config.X accepted,
// TimeoutFloor the least ValidationTimeout.
const (
	DefaultMaxConns                  = 10
	DefaultAcquireTimeout            = 30 * time.Second
	DefaultValidationTimeout         = 5 * time.Second
	DefaultAliveBypassWindow         = 500 * time.Millisecond
	DefaultIdleTimeout               = 10 * time.Minute
	DefaultMaxLifetime               = 30 * time.Minute
	DefaultInitializationFailTimeout = time.Millisecond
	DefaultStatementCacheSize        = 64
	DefaultCloseTimeout              = 10 * time.Second
	DefaultLoginBackoffMax           = 30 * time.Second

	TimeoutFloor              = 250 * time.Millisecond
	MinIdleTimeout            = 10 * time.Second
	MinMaxLifetime            = 30 * time.Second
	MinKeepaliveTime          = 30 * time.Second
	MinLeakDetectionThreshold = 2 * time.Second
)

const (
	// housekeepingPeriod is how often the housekeeper retires idle and expired connections,
	// pings for keepalive and refills to MinIdleConns, when Config.housekeepingPeriod is zero.
	housekeepingPeriod = 30 * time.Second
	// minDerivedTimeout is the least ValidationTimeout, and the least cap on the creator's
	// backoff, that a short AcquireTimeout gives (half of TimeoutFloor, what the shortest
	// AcquireTimeout HikariCP accepts gives).
	minDerivedTimeout = TimeoutFloor / 2
)

// Config configures a Pool. A field's zero value means its default and a negative one "off" or
// "none", as each field says. New fixes values out of range with one warning naming the field, and
// fails on values it cannot fix.
type Config struct {
	// Name labels the pool in errors, logs and metrics. Zero value: "pool-N".
	Name string
	// MaxConns caps the connections open, idle and in use. Zero value: 10. Negative: an error.
	MaxConns int
	// MinIdleConns is how many idle connections the pool keeps ready. Zero value: MaxConns (fixed
	// size). Negative: none. Values above MaxConns are lowered to it.
	MinIdleConns int
	// MaxWaiters bounds the goroutines waiting for a connection; one more fails at once with
	// ErrPoolExhausted. Zero value: unbounded. Negative: no waiting.
	MaxWaiters int

	// AcquireTimeout bounds how long Connect waits or probes; ctx may end it sooner. Zero value:
	// 30 s. Negative: only ctx. A short one lowers the ConnectTimeout and ValidationTimeout
	// defaults.
	AcquireTimeout time.Duration
	// ConnectTimeout bounds each dial, AfterConnect and baseline included. Zero value:
	// AcquireTimeout, at least 250 ms (30 s if AcquireTimeout is off). Negative: unbounded.
	ConnectTimeout time.Duration
	// ValidationTimeout bounds a probe or release plan. Zero value: 5 s, or half an enabled
	// AcquireTimeout (at least 125 ms). Below 250 ms: 5 s; not below AcquireTimeout: half of it.
	// Negative: an error.
	ValidationTimeout time.Duration
	// AliveBypassWindow: a connection returned more recently than this is handed out without a
	// probe. Zero value: 500 ms. Negative: probe on every acquire.
	AliveBypassWindow time.Duration
	// IdleTimeout closes connections idle this long while more than MinIdleConns are idle (so never
	// with the default MinIdleConns). Zero value: 10 min. Negative: never. Below 10 s: 10 min.
	// Within 1 s of MaxLifetime or above it: off.
	IdleTimeout time.Duration
	// MaxLifetime is the longest a connection lives, less a random 0–2.5 %; one in use retires on
	// return. Zero value: 30 min. Negative: unlimited. Below 30 s: raised to 30 min.
	MaxLifetime time.Duration
	// KeepaliveTime pings a connection idle this long (less a random 0–10 %) against middlebox and
	// wait_timeout drops. Zero value, negative, below 30 s, or not below MaxLifetime: off.
	KeepaliveTime time.Duration
	// LeakDetectionThreshold logs the borrower's stack for a connection held longer. Zero value,
	// negative, below 2 s or above MaxLifetime: off.
	LeakDetectionThreshold time.Duration
	// InitializationFailTimeout is how long New tries to open a first connection. Zero value: 1 ms
	// (one attempt). Negative: New does not connect; the pool fills in the background.
	InitializationFailTimeout time.Duration
	// LoginBackoffMax caps the wait before a dial after the server refused the login
	// (ErrorClass.Login); the wait starts at 1 s (or the cap, if less) and doubles. Zero value:
	// 30 s. Negative: off; such a failure is retried like any other.
	LoginBackoffMax time.Duration
	// CloseTimeout bounds Close's wait for connections in use. Zero value: 10 s. Negative: none.
	CloseTimeout time.Duration
	// StatementCacheSize is how many prepared statements each connection keeps (LRU). Zero value:
	// 64. Negative: no cache.
	StatementCacheSize int
	// ServerCancelTimeout bounds how long a connection cancelled on the server (ServerCancel) still
	// counts: beside MaxConns (the first MaxConns/8), else against it. Zero: ValidationTimeout; <0: off.
	ServerCancelTimeout time.Duration

	// Hooks are the lifecycle hooks. Zero value: none.
	Hooks Hooks
	// Dialect is the database knowledge the pool uses. Zero value: the one registered for the
	// connector (importing mysqldialect or pgdialect registers it); New fails without one.
	Dialect Dialect
	// Trace receives the pool's events; New copies it. Zero value: none.
	Trace *Trace
	// Logger receives the pool's structured log lines. Zero value: slog.Default().
	Logger *slog.Logger
	// Addr (host:port) names the server in connection errors and logs. Zero value: read from the connector.
	Addr string
	// Overload control: docs/operations.md, "Overload".

	// OverloadTarget: while congested, a waiter waits at most the larger of this and the sampled
	// borrow time, newest first. Zero value: 5 ms. Negative: overload control off (FIFO until
	// AcquireTimeout).
	OverloadTarget time.Duration
	// AdaptiveLimitFloor is the floor of the limit on connections in circulation that overload
	// control sets while congested (up to MaxConns). Zero value: 2. Negative: no limit.
	AdaptiveLimitFloor int
	// ServerStatementDeadline sends a statement with a context deadline with a server-side
	// time limit (MariaDB), so that the connection survives the deadline. Zero value: off.
	ServerStatementDeadline bool
	// Tenants, if not empty, shares connections between waiting tenants (WithTenant) by Weight,
	// FIFO within one; key "" is all others. Zero value: one FIFO queue (docs/design/tenants.md).
	Tenants map[string]Tenant

	// Settings for the module's own tests, set through internal/testhook (or directly by this
	// package's tests).
	//
	// testClock is the pool's source of time, for tests of lifecycle rules; nil: the system
	// clock. It is read exactly on every call (no coarse clock, see clock.go). Timers and sleeps
	// use real time either way, and the housekeeper then runs only every housekeepingPeriod:
	// tests drive housekeeping themselves.
	testClock timeSource
	// housekeepingPeriod is how often the housekeeper runs; zero: 30 s; negative: an error.
	housekeepingPeriod time.Duration
	// outageLogInterval is the least time between two summary WARN lines of an outage; zero:
	// 30 s; negative: none (outage.go).
	outageLogInterval time.Duration
	// overloadInterval is how long the waiters' queue stays non-empty before the pool counts as
	// congested, and the adaptive limit's window (overload.go); zero or negative: 100 ms.
	overloadInterval time.Duration
	// testAfter, if set, makes the timer the creator waits on after a refused login (loginWait).
	testAfter func(time.Duration) <-chan time.Time
}

// timeSource tells the time. The pool reads it on every acquire and release, so an
// implementation must be cheap and safe for concurrent use.
type timeSource interface {
	Now() time.Time
}

func init() {
	testhook.SetPoolClock = func(cfg any, c testhook.Clock) { cfg.(*Config).testClock = c }
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

var poolSeq atomic.Int64

// resolved returns cfg with defaults and fix-ups applied, or an error naming the first field that
// cannot be fixed up. Warnings go to the logger.
func (cfg Config) resolved() (Config, error) {
	c := cfg
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.testClock == nil {
		c.testClock = systemClock{}
	}
	if c.Trace != nil {
		t := *c.Trace
		c.Trace = &t
	}
	if c.Name == "" {
		c.Name = fmt.Sprintf("pool-%d", poolSeq.Add(1))
	}
	warn := func(field string, from, to any, why string) {
		c.Logger.Warn("sqlpool: config value fixed up", "pool", c.Name, "field", field,
			"given", from, "used", to, "reason", why)
	}

	switch {
	case c.MaxConns < 0:
		return c, fmt.Errorf("sqlpool: Config.MaxConns is %d; it must be at least 1 (zero means %d)", c.MaxConns, DefaultMaxConns)
	case c.MaxConns == 0:
		c.MaxConns = DefaultMaxConns
	}
	switch {
	case c.MinIdleConns == 0:
		c.MinIdleConns = c.MaxConns
	case c.MinIdleConns < 0:
		c.MinIdleConns = 0
	case c.MinIdleConns > c.MaxConns:
		warn("MinIdleConns", c.MinIdleConns, c.MaxConns, "above MaxConns")
		c.MinIdleConns = c.MaxConns
	}

	switch {
	case c.AcquireTimeout == 0:
		c.AcquireTimeout = DefaultAcquireTimeout
	case c.AcquireTimeout < 0:
		c.AcquireTimeout = -1
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = max(c.AcquireTimeout, TimeoutFloor)
		if c.AcquireTimeout < 0 {
			c.ConnectTimeout = DefaultAcquireTimeout
		}
	} else if c.ConnectTimeout < 0 {
		c.ConnectTimeout = -1
	}

	switch {
	case c.ValidationTimeout < 0:
		return c, fmt.Errorf("sqlpool: Config.ValidationTimeout is %v; it must be positive (zero means %v)", c.ValidationTimeout, DefaultValidationTimeout)
	case c.ValidationTimeout == 0:
		c.ValidationTimeout = DefaultValidationTimeout
	case c.ValidationTimeout < TimeoutFloor:
		warn("ValidationTimeout", c.ValidationTimeout, DefaultValidationTimeout, "below the 250ms floor")
		c.ValidationTimeout = DefaultValidationTimeout
	}
	if v := max(c.AcquireTimeout/2, minDerivedTimeout); c.AcquireTimeout > 0 && c.ValidationTimeout >= c.AcquireTimeout {
		if cfg.ValidationTimeout != 0 {
			warn("ValidationTimeout", c.ValidationTimeout, v, "not below AcquireTimeout")
		}
		c.ValidationTimeout = v
	}

	switch {
	case c.AliveBypassWindow == 0:
		c.AliveBypassWindow = DefaultAliveBypassWindow
	case c.AliveBypassWindow < 0:
		c.AliveBypassWindow = -1
	}

	switch {
	case c.MaxLifetime == 0:
		c.MaxLifetime = DefaultMaxLifetime
	case c.MaxLifetime < 0:
		c.MaxLifetime = -1
	case c.MaxLifetime < MinMaxLifetime:
		warn("MaxLifetime", c.MaxLifetime, DefaultMaxLifetime, "below the 30s minimum")
		c.MaxLifetime = DefaultMaxLifetime
	}

	switch {
	case c.IdleTimeout == 0:
		c.IdleTimeout = DefaultIdleTimeout
	case c.IdleTimeout < 0:
		c.IdleTimeout = -1
	}
	if c.IdleTimeout > 0 && c.MinIdleConns < c.MaxConns {
		switch {
		case c.MaxLifetime > 0 && c.IdleTimeout+time.Second > c.MaxLifetime:
			warn("IdleTimeout", c.IdleTimeout, "off", "close to or more than MaxLifetime")
			c.IdleTimeout = -1
		case c.IdleTimeout < MinIdleTimeout:
			warn("IdleTimeout", c.IdleTimeout, DefaultIdleTimeout, "below the 10s minimum")
			c.IdleTimeout = DefaultIdleTimeout
		}
	}

	switch {
	case c.KeepaliveTime <= 0:
		c.KeepaliveTime = -1
	case c.KeepaliveTime < MinKeepaliveTime:
		warn("KeepaliveTime", c.KeepaliveTime, "off", "below the 30s minimum")
		c.KeepaliveTime = -1
	case c.MaxLifetime > 0 && c.KeepaliveTime >= c.MaxLifetime:
		warn("KeepaliveTime", c.KeepaliveTime, "off", "not below MaxLifetime")
		c.KeepaliveTime = -1
	}

	switch {
	case c.LeakDetectionThreshold <= 0:
		c.LeakDetectionThreshold = -1
	case c.LeakDetectionThreshold < MinLeakDetectionThreshold:
		warn("LeakDetectionThreshold", c.LeakDetectionThreshold, "off", "below the 2s minimum")
		c.LeakDetectionThreshold = -1
	case c.MaxLifetime > 0 && c.LeakDetectionThreshold > c.MaxLifetime:
		warn("LeakDetectionThreshold", c.LeakDetectionThreshold, "off", "above MaxLifetime")
		c.LeakDetectionThreshold = -1
	}

	switch {
	case c.ServerCancelTimeout == 0:
		c.ServerCancelTimeout = c.ValidationTimeout
	case c.ServerCancelTimeout < 0:
		c.ServerCancelTimeout = -1
	}

	switch {
	case c.InitializationFailTimeout == 0:
		c.InitializationFailTimeout = DefaultInitializationFailTimeout
	case c.InitializationFailTimeout < 0:
		c.InitializationFailTimeout = -1
	}

	switch {
	case c.housekeepingPeriod < 0:
		return c, fmt.Errorf("sqlpool: Config.housekeepingPeriod is %v; it must be positive (zero means %v)", c.housekeepingPeriod, housekeepingPeriod)
	case c.housekeepingPeriod == 0:
		c.housekeepingPeriod = housekeepingPeriod
	}
	switch {
	case c.StatementCacheSize == 0:
		c.StatementCacheSize = DefaultStatementCacheSize
	case c.StatementCacheSize < 0:
		c.StatementCacheSize = 0
	}
	switch {
	case c.LoginBackoffMax == 0:
		c.LoginBackoffMax = DefaultLoginBackoffMax
	case c.LoginBackoffMax < 0:
		c.LoginBackoffMax = -1
	}
	switch {
	case c.CloseTimeout == 0:
		c.CloseTimeout = DefaultCloseTimeout
	case c.CloseTimeout < 0:
		c.CloseTimeout = 0
	}
	c.resolveOverload()
	return c, nil
}
