package pool

import (
	"context"
	"database/sql/driver"
	"errors"
	"time"
)

// statementDeadline is implemented by a Dialect that can give one statement a server-side time
// limit (Config.ServerStatementDeadline; docs/operations.md, "Overload"). StatementLimiter
// runs once per new connection and returns the function that rewrites a statement to run at
// most limit ("": unchanged), or nil; StatementTimedOut recognizes the server's error for a
// statement stopped so.
type statementDeadline interface {
	StatementLimiter(ctx context.Context, dc driver.Conn) (func(query string, limit time.Duration) string, error)
	StatementTimedOut(err error) bool
}

// Why: without a server-side limit the driver closes the socket when the deadline passes
// mid-statement, and the pool must stop the statement with a KILL and dial a replacement
// (cancel.go). With it the server stops the statement and answers an ordinary error.

// The server-side limit ends a tenth of the time left before the deadline, within these bounds:
// the server's error must reach the driver before the deadline closes the socket.
const (
	minDeadlineMargin = 5 * time.Millisecond
	maxDeadlineMargin = 100 * time.Millisecond
)

// initLimiter asks the dialect for e's statement limiter (statementDeadline), when on.
func (p *Pool) initLimiter(ctx context.Context, e *entry, dc driver.Conn) error {
	sd, ok := p.dialect.(statementDeadline)
	if !ok || !p.cfg.ServerStatementDeadline {
		return nil
	}
	l, err := sd.StatementLimiter(ctx, dc)
	if err != nil {
		return err
	}
	e.limiter = l
	return nil
}

// limited returns query with the server-side time limit e's server takes, when ctx has a
// deadline and the call sends query as text; otherwise query. One field load when off.
func (p *Pool) limited(ctx context.Context, e *entry, query string) string {
	if e.limiter == nil {
		return query
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return query
	}
	left := time.Until(dl)
	margin := min(max(left/10, minDeadlineMargin), maxDeadlineMargin)
	if left-margin < time.Millisecond {
		return query // too close: the context's deadline decides
	}
	if q := e.limiter(query, left-margin); q != "" {
		return q
	}
	return query
}

// statementTimedOut reports whether err says the server stopped a statement at the limit the
// pool sent (statementDeadline), or the context's deadline passed in it.
func (p *Pool) statementTimedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	sd, ok := p.dialect.(statementDeadline)
	return ok && sd.StatementTimedOut(err)
}
