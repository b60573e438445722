// Package testhook reaches the settings of the library's packages that exist only for the
// module's own tests, so that they stay out of those packages' public API. Package pool and
// package metrics set its functions when they are initialized; a test calls them on a
// configuration before passing it to pool.New or metrics.New.
package testhook

import "time"

// Clock tells the time. A test clock is moved by hand. The pool reads it on every acquire and
// release, so an implementation must be cheap and safe for concurrent use.
type Clock interface {
	Now() time.Time
}

// SetPoolClock makes cfg, a *pool.Config, read the pool's time from c instead of the system
// clock: exactly, on every read (the pool keeps no coarse clock then). Timers and sleeps still
// use real time, and the housekeeper runs only every 30 s, so tests of lifecycle rules drive
// housekeeping themselves. It panics when cfg is not a *pool.Config. Set by package pool.
var SetPoolClock func(cfg any, c Clock)

// SetMetricsClock makes opts, a *metrics.Options, rotate the windows of the _max gauges by c
// instead of the system clock. It panics when opts is not a *metrics.Options. Set by package
// metrics.
var SetMetricsClock func(opts any, c Clock)
