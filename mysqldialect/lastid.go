package mysqldialect

import (
	"context"
	"database/sql/driver"

	"github.com/sqlpool/sqlpool/internal/rawconn"
)

// The LAST_INSERT_ID() reset is deferred (txstate.Tracker.SetDeferInsertID): a borrow whose only
// session effect is an AUTO_INCREMENT id it generated releases with nothing sent, and the stale
// id is reset, as a statement of its own, just before the first statement of a later borrow
// that could observe it (pool.SessionCaps.Before). A baseline with sql_auto_is_null on (or
// unknown) keeps the reset at release. See docs/sessions.md.

// deferInsertID turns the deferred reset on for a tracker over dc.
func (s *tracker) deferInsertID(dc driver.Conn) {
	s.dc = dc
	s.SetDeferInsertID(true)
}

// Clean marks the end of the borrow (the pool asks it once at every release it keeps the
// connection for), then reports whether release has nothing to send.
func (s *tracker) Clean() bool {
	s.EndBorrow()
	return s.Tracker.Clean()
}

// before is pool.SessionCaps.Before: the deferred reset, when query could observe the stale id.
func (s *tracker) before(ctx context.Context, query string, args []driver.NamedValue, result bool) error {
	q := s.BeforeStatement(query, args, result)
	if q == "" {
		return nil
	}
	if err := rawconn.Exec(ctx, s.dc, q); err != nil {
		return err
	}
	s.BeforeDone()
	return nil
}
