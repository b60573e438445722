package pool

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"
)

// Hooks are code the pool runs on a connection, each bounded by its ctx (it must return when
// ctx ends) and Timeout. What BeforeAcquire and AfterRelease run is reset at release like a
// borrower's statements. A hook that fails, panics or times out fails with a *HookError and its
// connection is closed. See docs/lifecycle.md.
type Hooks struct {
	// AfterConnect runs once on each new connection, before the session baseline is recorded, so
	// what it sets is kept for the connection's life. A failure is a failed dial, and fails New at
	// once for the first connection. Zero value: none.
	AfterConnect func(ctx context.Context, c HookConn) error
	// BeforeAcquire runs before every hand-out, after the pool's own checks. ok=false closes the
	// connection and the acquire goes on with another; an error fails the acquire. Zero value:
	// none.
	BeforeAcquire func(ctx context.Context, c HookConn) (ok bool, err error)
	// AfterRelease runs when a borrower returns a connection the pool would keep, before the
	// release plan. keep=false or an error closes the connection. Zero value: none.
	AfterRelease func(ctx context.Context, c HookConn) (keep bool, err error)
	// Timeout bounds each hook call. Zero value: ValidationTimeout. Negative: only the hook's ctx
	// bounds it.
	Timeout time.Duration
}

// The hooks' names, as a HookError gives them.
const (
	HookAfterConnect  = "AfterConnect"
	HookBeforeAcquire = "BeforeAcquire"
	HookAfterRelease  = "AfterRelease"
)

// ErrHook matches every *HookError (errors.Is).
var ErrHook = errors.New("sqlpool: a lifecycle hook failed")

// HookError is the error of a hook that returned an error, panicked or ran past its time
// limit. It matches ErrHook, and unwraps to the hook's error (or the ctx's, for a timeout).
type HookError struct {
	Pool string
	Hook string // HookAfterConnect, HookBeforeAcquire or HookAfterRelease
	// Panic is the value the hook panicked with, or nil.
	Panic any
	// TimedOut: the hook outlived its time limit, Limit.
	TimedOut bool
	Limit    time.Duration
	Err      error
}

// Error names the hook and its error.
func (e *HookError) Error() string {
	var what string
	switch {
	case e.Panic != nil:
		what = fmt.Sprintf("panicked: %v", e.Panic)
	case e.TimedOut:
		what = fmt.Sprintf("timed out after %v (Hooks.Timeout, or the acquire's deadline); make the hook faster or raise the limit", e.Limit)
		if e.Err != nil {
			what += ": " + e.Err.Error()
		}
	default:
		what = "failed: " + e.Err.Error()
	}
	return fmt.Sprintf("sqlpool: %s: %s hook %s; the connection it ran on was closed", e.Pool, e.Hook, what)
}

// Is matches ErrHook.
func (e *HookError) Is(target error) bool { return target == ErrHook }

// Unwrap returns Err.
func (e *HookError) Unwrap() error { return e.Err }

// HookConn is the connection a hook runs on, valid only during the call; the session tracker sees
// its statements as a borrower's.
type HookConn struct{ c *conn }

// Conn returns the connection as a driver.Conn, for what Exec and QueryRow do not cover.
func (h HookConn) Conn() driver.Conn { return h.c }

// Exec runs one statement, converting args as database/sql does.
func (h HookConn) Exec(ctx context.Context, query string, args ...any) error {
	nv, err := h.namedValues(args)
	if err != nil {
		return err
	}
	_, err = h.c.ExecContext(ctx, query, nv)
	if err == driver.ErrSkip {
		var st driver.Stmt
		if st, err = h.c.PrepareContext(ctx, query); err != nil {
			return err
		}
		_, err = st.(driver.StmtExecContext).ExecContext(ctx, nv)
		_ = st.Close()
	}
	return err
}

// QueryRow runs a query and returns its first row; a query without rows returns io.EOF.
func (h HookConn) QueryRow(ctx context.Context, query string, args ...any) ([]driver.Value, error) {
	nv, err := h.namedValues(args)
	if err != nil {
		return nil, err
	}
	var rows driver.Rows
	var st driver.Stmt
	rows, err = h.c.QueryContext(ctx, query, nv)
	if err == driver.ErrSkip {
		if st, err = h.c.PrepareContext(ctx, query); err != nil {
			return nil, err
		}
		defer st.Close()
		rows, err = st.(driver.StmtQueryContext).QueryContext(ctx, nv)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(dest); err != nil {
		return nil, err
	}
	for i, v := range dest { // the driver may reuse its buffers after Close
		if b, ok := v.([]byte); ok {
			dest[i] = append([]byte(nil), b...)
		}
	}
	return dest, nil
}

func (h HookConn) namedValues(args []any) ([]driver.NamedValue, error) {
	if len(args) == 0 {
		return nil, nil
	}
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
		err := h.c.CheckNamedValue(&nv[i])
		if err == driver.ErrSkip {
			nv[i].Value, err = driver.DefaultParameterConverter.ConvertValue(a)
		}
		if err != nil {
			return nil, fmt.Errorf("argument %d: %w", i+1, err)
		}
	}
	return nv, nil
}

// hookLimit is the time limit of one hook call (negative: none).
func (p *Pool) hookLimit() time.Duration {
	if t := p.cfg.Hooks.Timeout; t != 0 {
		return t
	}
	return p.cfg.ValidationTimeout
}

// callHook runs f on c within limit (and ctx), turning a panic, a timeout or an error into a
// *HookError. Statements f left open are closed (not those of database/sql's own, which c
// may hold across borrows).
func (p *Pool) callHook(ctx context.Context, name string, limit time.Duration, c *conn, f func(context.Context, HookConn) error) (err error) {
	before := len(c.open)
	hctx := ctx
	if limit > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	defer func() {
		for len(c.open) > before {
			_ = c.open[len(c.open)-1].Close() // untracks it
			if len(c.open) > before {
				c.open = c.open[:len(c.open)-1]
			}
		}
		if r := recover(); r != nil {
			err = &HookError{Pool: p.cfg.Name, Hook: name, Panic: r}
		}
	}()
	err = f(hctx, HookConn{c})
	if hctx.Err() != nil && ctx.Err() == nil {
		return &HookError{Pool: p.cfg.Name, Hook: name, TimedOut: true, Limit: limit, Err: err}
	}
	if err != nil {
		return &HookError{Pool: p.cfg.Name, Hook: name, Err: err}
	}
	return nil
}

// runAfterConnect runs Hooks.AfterConnect on a new entry, before its baseline is recorded.
func (p *Pool) runAfterConnect(ctx context.Context, e *entry) error {
	e.sess = nopTracker{}
	c := &conn{p: p, e: e}
	err := p.callHook(ctx, HookAfterConnect, p.hookLimit(), c, func(ctx context.Context, h HookConn) error {
		return p.cfg.Hooks.AfterConnect(ctx, h)
	})
	// What the tracker saw is the baseline's to record: start it afresh.
	e.sess = nil
	e.fatal = nil
	return err
}

// runBeforeAcquire runs Hooks.BeforeAcquire on e, which the acquire owns (dl: its deadline, or
// nil on the fast path). It returns CloseHookRejected when the hook rejects e (the caller
// closes it and goes on), or an error after closing e itself.
func (p *Pool) runBeforeAcquire(ctx context.Context, e *entry, dl *deadline) (CloseReason, error) {
	limit := p.hookLimit()
	var left time.Duration
	if dl != nil {
		left = dl.left(p)
	} else {
		left = p.acquireTimeout()
	}
	if left > 0 && (limit < 0 || left < limit) {
		limit = max(left, time.Millisecond)
	}
	ok := true
	c := &conn{p: p, e: e}
	err := p.callHook(ctx, HookBeforeAcquire, limit, c, func(ctx context.Context, h HookConn) error {
		var err error
		ok, err = p.cfg.Hooks.BeforeAcquire(ctx, h)
		return err
	})
	if err != nil {
		p.releaseLocks(e)
		p.closeEntry(e, CloseHookFailed)
		return "", err
	}
	if !ok || e.fatal != nil {
		p.releaseLocks(e)
		return CloseHookRejected, nil
	}
	return "", nil
}

// lentBeforeAcquire runs Hooks.BeforeAcquire for a checkout from a DB's idle list
// (conn.ResetSession) and reports whether the connection may be handed out; if not it is
// marked, and the Close database/sql sends next closes it.
func (p *Pool) lentBeforeAcquire(ctx context.Context, c *conn) bool {
	ok := true
	err := p.callHook(ctx, HookBeforeAcquire, p.hookLimit(), c, func(ctx context.Context, h HookConn) error {
		var err error
		ok, err = p.cfg.Hooks.BeforeAcquire(ctx, h)
		return err
	})
	e := c.e
	switch {
	case err != nil:
		p.cfg.Logger.Warn("sqlpool: hook failed on a checkout from database/sql's idle list; closing the connection",
			"pool", p.cfg.Name, "conn", e.id, "error", err)
		e.discard = CloseHookFailed
	case !ok || e.fatal != nil:
		e.discard = CloseHookRejected
	default:
		return true
	}
	p.releaseLocks(e)
	e.evict.Store(true)
	return false
}

// runAfterRelease runs Hooks.AfterRelease on a returned entry and returns "" to keep it, or why
// it must be closed.
func (p *Pool) runAfterRelease(e *entry) CloseReason {
	keep := true
	c := &conn{p: p, e: e}
	err := p.callHook(p.dialCtx, HookAfterRelease, p.hookLimit(), c, func(ctx context.Context, h HookConn) error {
		var err error
		keep, err = p.cfg.Hooks.AfterRelease(ctx, h)
		return err
	})
	switch {
	case err != nil:
		p.cfg.Logger.Warn("sqlpool: hook failed on a returned connection; closing it", "pool", p.cfg.Name, "conn", e.id, "error", err)
		p.releaseLocks(e)
		return CloseHookFailed
	case !keep || e.fatal != nil:
		p.releaseLocks(e)
		return CloseHookRejected
	}
	return ""
}
