package pool

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sqlpool/sqlpool/internal/testhook"
)

// Defaults and floors, named after the HikariCP settings they mirror.
const (
	// DefaultMaxConns is MaxConns when the field is zero (HikariCP maximumPoolSize).
	DefaultMaxConns = 10
	// DefaultAcquireTimeout is AcquireTimeout when the field is zero (HikariCP connectionTimeout).
	DefaultAcquireTimeout = 30 * time.Second
	// DefaultValidationTimeout is ValidationTimeout when the field is zero.
	DefaultValidationTimeout = 5 * time.Second
	// DefaultAliveBypassWindow is AliveBypassWindow when the field is zero
	// (HikariCP's aliveBypassWindowMs).
	DefaultAliveBypassWindow = 500 * time.Millisecond
	// DefaultIdleTimeout is IdleTimeout when the field is zero.
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultMaxLifetime is MaxLifetime when the field is zero.
	DefaultMaxLifetime = 30 * time.Minute
	// DefaultInitializationFailTimeout is InitializationFailTimeout when the field is zero.
	DefaultInitializationFailTimeout = time.Millisecond
	// DefaultStatementCacheSize is StatementCacheSize when the field is zero.
	DefaultStatementCacheSize = 64
	// DefaultCloseTimeout is CloseTimeout when the field is zero.
	DefaultCloseTimeout = 10 * time.Second

	// TimeoutFloor is the smallest ValidationTimeout accepted, and the least ConnectTimeout a
	// short AcquireTimeout gives by default (HikariCP's timeout floor).
	TimeoutFloor = 250 * time.Millisecond
	// MinIdleTimeout is the smallest IdleTimeout accepted.
	MinIdleTimeout = 10 * time.Second
	// MinMaxLifetime is the smallest MaxLifetime accepted.
	MinMaxLifetime = 30 * time.Second
	// MinKeepaliveTime is the smallest KeepaliveTime accepted.
	MinKeepaliveTime = 30 * time.Second
	// MinLeakDetectionThreshold is the smallest LeakDetectionThreshold accepted.
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

// Config configures a Pool. The zero value of every field means "the default" and a negative
// duration or count means "off" or "none", as each field's comment says. New fixes up values out
// of range the way HikariCP does, with one warning log line naming the field, and rejects values
// that cannot be fixed with an error naming the field.
type Config struct {
	// Name labels the pool in errors, logs and metrics. Zero value: "pool-N", N counting pools
	// created by this process.
	Name string

	// MaxConns is the most physical connections the pool holds at once, idle and in use.
	// Zero value: 10. Negative: an error.
	MaxConns int

	// MinIdleConns is how many idle connections the pool tries to keep ready. Zero value:
	// MaxConns (a fixed-size pool, as HikariCP recommends; IdleTimeout then never applies).
	// Negative: no minimum. Values above MaxConns are lowered to MaxConns.
	MinIdleConns int

	// MaxWaiters bounds how many goroutines may wait for a connection at once; one more fails at
	// once with ErrPoolExhausted. Zero value: unbounded. Negative: no waiting at all (an acquire
	// that finds no idle connection fails at once).
	MaxWaiters int

	// AcquireTimeout bounds how long an acquire (Connect) waits for a connection, counted from
	// when it first has to wait or probe; the caller's ctx may end it sooner. Zero value: 30 s.
	// Negative: only the ctx bounds the wait. Any positive value is used as given (HikariCP
	// would raise one below 250 ms to 30 s); a short one also shortens the defaults of
	// ConnectTimeout and ValidationTimeout, down to 250 ms and 125 ms, and the creator's
	// backoff between failed dials, to half of it but at least 125 ms.
	AcquireTimeout time.Duration

	// ConnectTimeout bounds each dial by the creator, including Hooks.AfterConnect and the
	// session baseline query. Zero value: AcquireTimeout, but at least 250 ms (TimeoutFloor); 30 s when
	// AcquireTimeout is off. Negative: no bound beyond the pool's lifetime.
	ConnectTimeout time.Duration

	// ValidationTimeout bounds one liveness probe (on acquire, also by the acquire's
	// AcquireTimeout deadline; on keepalive) or one release plan. Zero value: 5 s, or half of an
	// enabled AcquireTimeout when that is shorter, but at least 125 ms. Values below 250 ms
	// (TimeoutFloor) are raised to 5 s, and values not below an enabled AcquireTimeout are
	// lowered to half of it (at least 125 ms), each with a warning. Negative: an error.
	ValidationTimeout time.Duration

	// AliveBypassWindow is how recently a connection must have been returned for Connect to hand
	// it out without probing it. Zero value: 500 ms. Negative: probe on every acquire.
	AliveBypassWindow time.Duration

	// IdleTimeout closes connections that have been idle this long while more than
	// MinIdleConns are idle, checked every 30 s by the housekeeper. It applies only when
	// MinIdleConns < MaxConns: with the default MinIdleConns (MaxConns, a fixed-size pool) it
	// never closes anything, and idle connections live until MaxLifetime; set MinIdleConns lower
	// (or negative) for it to apply. Zero value: 10 min. Negative: never. When it applies,
	// values below 10 s are raised to 10 min, and values within 1 s of MaxLifetime, or above it,
	// turn it off.
	IdleTimeout time.Duration

	// MaxLifetime is the longest a physical connection lives; each connection gets a lifetime
	// shortened by a random 0–2.5 % so that connections do not expire together. An in-use
	// connection is retired when it comes back. Zero value: 30 min. Negative: unlimited. Values
	// below 30 s are raised to 30 min.
	MaxLifetime time.Duration

	// KeepaliveTime pings idle connections this long after their last use (minus a random
	// 0–10 %) so that middleboxes and wait_timeout do not drop them; the housekeeper looks for
	// connections due every 30 s. Zero value and negative: off. Values below 30 s, or not below
	// MaxLifetime, turn it off.
	KeepaliveTime time.Duration

	// LeakDetectionThreshold logs one warning, with the borrower's stack, for a connection held
	// longer than this, and an info line if it comes back later. Zero value and negative: off.
	// Values below 2 s, or above MaxLifetime, turn it off.
	LeakDetectionThreshold time.Duration

	// InitializationFailTimeout governs New's first connection: New retries for up to this long
	// to open one good connection and returns the last error if it cannot. Zero value: 1 ms, that
	// is one attempt that must succeed (HikariCP's default). Negative: New does not connect; the
	// pool starts at once and fills in the background (HikariCP's "skip the check"). A failure of
	// Hooks.AfterConnect fails New at once without further attempts.
	InitializationFailTimeout time.Duration

	// CloseTimeout bounds how long Close waits for connections still in use. Zero value: 10 s.
	// Negative: Close does not wait.
	CloseTimeout time.Duration

	// StatementCacheSize is how many prepared statements each physical connection keeps, least
	// recently used first out. Through p.OpenDB(), a sql.Stmt then prepares once per
	// connection instead of on every borrow, and a parameterized query the driver cannot run
	// directly (go-sql-driver/mysql without interpolateParams) costs one round trip instead of
	// three (prepare, execute, close). Zero value: 64. Negative: no cache; database/sql's own
	// behaviour.
	StatementCacheSize int

	// ServerCancelTimeout turns on server-side cancel and bounds how long a connection stays
	// counted against MaxConns after its statement was cancelled. When a statement fails
	// because its context ended, go-sql-driver/mysql has already closed the socket and the
	// server goes on running the statement; the pool then has the dialect stop it (ServerCancel:
	// KILL QUERY on MySQL, pg_cancel_backend on PostgreSQL) over a side connection of its own and keeps counting the connection (in
	// Stats.Total, Active and Cancelling) until the server no longer lists the session, or
	// until ServerCancelTimeout has passed. The caller is not delayed. See ServerCancel. Zero
	// value: ValidationTimeout (5 s by default). Negative: off (the statement runs on after a
	// cancel and the pool dials a replacement at once, as plain database/sql does).
	ServerCancelTimeout time.Duration

	// Hooks are the lifecycle hooks (after connect, before hand-out, after return); see
	// Hooks. Zero value: none.
	Hooks Hooks

	// Dialect is the database's knowledge the pool uses: error classification, session
	// tracking and release plans, liveness, commit. Zero value: the dialect registered for the
	// connector's package (RegisterDialect; importing mysqldialect or pgdialect registers
	// theirs), else the one registered for every other connector (mysqldialect's); New fails
	// when there is none, and for go-sql-driver's, pgx's stdlib or lib/pq connector whose
	// dialect package is not imported. To add to or veto a dialect's decision that an error is
	// fatal, set a type that embeds the dialect (such as mysqldialect.Dialect) and overrides
	// Classify.
	Dialect Dialect

	// Trace receives the pool's events, for metrics and tracing (see Trace, and packages
	// metrics and otelpool); New copies it. Zero value: none, and the pool then reads no
	// clock for durations on the hot path.
	Trace *Trace

	// Logger receives the pool's structured log lines. Zero value: slog.Default().
	Logger *slog.Logger

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
	case c.CloseTimeout == 0:
		c.CloseTimeout = DefaultCloseTimeout
	case c.CloseTimeout < 0:
		c.CloseTimeout = 0
	}
	return c, nil
}
