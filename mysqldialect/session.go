package mysqldialect

import (
	"context"
	"database/sql/driver"
	"io"

	"github.com/sqlpool/sqlpool/internal/rawconn"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/txstate"
	"github.com/sqlpool/sqlpool/validate"
)

// NewSession records the session baseline in one round trip and starts the tracker from it.
func (dialect) NewSession(ctx context.Context, dc driver.Conn) (pool.SessionTracker, error) {
	b, known, err := queryBaseline(ctx, dc)
	if err != nil {
		return nil, err
	}
	return newTracker(dc, b, known), nil
}

// newTracker starts a tracker over dc from b. When the driver could not answer the baseline
// query (known false) the tracker has no baseline and plans a discard for any change it cannot
// undo.
func newTracker(dc driver.Conn, b txstate.Baseline, known bool) *tracker {
	s := &tracker{}
	if known {
		s.Reset(b)
	}
	s.deferInsertID(dc)
	return s
}

// tracker is MySQL's pool.SessionTracker: a txstate.Tracker, whose methods the pool calls
// directly (Begin, Commit, Rollback, Statement, Failed, Unknown, Clean, ReadOnlyTx, Done),
// with the few that speak the pool's types.
type tracker struct {
	txstate.Tracker
	// dc is the connection the deferred LAST_INSERT_ID() reset runs on; nil: not deferred.
	dc driver.Conn
}

// Result tells the tracker the last insert id: zero means the statement generated no
// AUTO_INCREMENT value, so LAST_INSERT_ID() needs no reset for it.
func (s *tracker) Result(r driver.Result) {
	if id, err := r.LastInsertId(); err == nil {
		s.InsertID(id)
	}
}

// Plan is txstate's plan in the pool's terms.
func (s *tracker) Plan() pool.ReleasePlan {
	p := s.Tracker.Plan()
	switch p.Action {
	case txstate.ActionNone:
		return pool.ReleasePlan{}
	case txstate.ActionDiscard:
		return pool.ReleasePlan{Discard: true, Reason: p.Reason}
	}
	return pool.ReleasePlan{Statements: p.Statements, Reason: p.Reason}
}

var releaseAllLocks = []string{"SELECT RELEASE_ALL_LOCKS()"}

// BeforeClose releases the named locks a borrower may hold (SELECT RELEASE_ALL_LOCKS()): the
// server releases a closed connection's locks only after its socket closes.
func (s *tracker) BeforeClose() []string {
	if s.MayHoldUserLocks() {
		return releaseAllLocks
	}
	return nil
}

// Scope is the current database, as far as the tracker can follow USE.
func (s *tracker) Scope() (string, bool) {
	db, _, known := s.Resolution()
	return db, known
}

// Caps asks for no liveness peek (go-sql-driver checks its socket in ResetSession), the
// driver's ResetSession at every hand-out, statements run as the driver runs them; and, when
// the LAST_INSERT_ID() reset is deferred, Before (lastid.go).
func (s *tracker) Caps() pool.SessionCaps {
	var c pool.SessionCaps
	if s.dc != nil {
		c.Before = s.before
	}
	return c
}

// queryBaseline runs txstate.BaselineQuery (directly, or prepared when the driver has no
// QueryerContext): once per connection, right after dialling, never on a borrow. A server that
// rejects it with an ordinary (non-fatal) error, such as one that lacks a system variable it
// names, gets txstate.BaselineCoreQuery instead (one more round trip, on such servers only): the
// database, autocommit, isolation and access mode are then still reset, and only a SET of a
// session variable discards the connection. A row whose variable columns cannot be read keeps
// its core columns the same way. A server that rejects both leaves the baseline unknown.
func queryBaseline(ctx context.Context, dc driver.Conn) (txstate.Baseline, bool, error) {
	b, known, rejected, err := runBaseline(ctx, dc, txstate.BaselineQuery)
	if err != nil || !rejected {
		return b, known, err
	}
	b, known, _, err = runBaseline(ctx, dc, txstate.BaselineCoreQuery)
	return b, known, err
}

// runBaseline runs one baseline query and reads its row. rejected reports an ordinary error
// from the server (the query may be retried); err is a fatal one (or the ctx's).
func runBaseline(ctx context.Context, dc driver.Conn, q string) (b txstate.Baseline, known, rejected bool, err error) {
	rows, err := rawconn.Query(ctx, dc, q)
	if err != nil {
		if v := validate.Check(err, validate.Session{}); v.Fatal || ctx.Err() != nil {
			return b, false, false, err
		}
		return b, false, true, nil
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(dest); err != nil {
		if err == io.EOF {
			return b, false, false, nil
		}
		if v := validate.Check(err, validate.Session{}); v.Fatal || ctx.Err() != nil {
			return b, false, false, err
		}
		return b, false, true, nil
	}
	b, err = txstate.BaselineFromRow(dest)
	if err != nil && len(dest) > txstate.BaselineCoreColumns {
		// A variable column it cannot read: keep the core columns (no variables recorded).
		b, err = txstate.BaselineFromRow(dest[:txstate.BaselineCoreColumns])
	}
	if err != nil {
		return b, false, false, nil
	}
	return b, true, false, nil
}
