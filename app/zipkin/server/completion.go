package server

import (
	"errors"
	"sync/atomic"
)

// Errors the Message.Done of Transport.Ingest is told.
var (
	// ErrGivenUp is a message whose spans the store refused until the
	// retry deadline (Config.RetryDeadline): they are logged with their
	// IDs and counted as dropped, and will not be stored. A collector
	// acknowledges such a message (commits its offset) so that it does not
	// come back forever: the error log and the metric are where the
	// operator sees it.
	ErrGivenUp = errors.New("spans given up after the retry deadline")
	// ErrAbandoned is a message still unwritten when Server.Close ran out
	// of time: it is not stored, and a collector must not acknowledge it,
	// so that the broker delivers it again.
	ErrAbandoned = errors.New("spans abandoned at shutdown")
)

// completion joins the parts of one message (offer splits a message by
// writer) and calls fn once, when the last part is written or given up,
// with the first error.
type completion struct {
	pending atomic.Int64
	err     atomic.Pointer[error]
	fn      func(error)
}

func (c *completion) part(err error) {
	if err != nil {
		c.err.CompareAndSwap(nil, &err)
	}
	if c.pending.Add(-1) == 0 {
		var e error
		if p := c.err.Load(); p != nil {
			e = *p
		}
		c.fn(e)
	}
}
