package pgstore

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// retentionRound bounds the zipkin_spans rows one retention statement
// deletes.
const retentionRound = 10_000

const (
	sqlRetainSpans = "DELETE FROM " + tableSpans + " WHERE ctid IN (SELECT ctid FROM " + tableSpans +
		" WHERE start_ts < $1 LIMIT " + "10000" + ") RETURNING trace_id"
	// A fragment without a timestamp goes with the last timestamped
	// fragment of its trace.
	// (Looked up trace by trace along the primary key, as sqlLinkerSpans.)
	sqlRetainOrphans = "DELETE FROM " + tableSpans + " WHERE ctid IN (SELECT o.ctid FROM unnest($1::int8[]) AS q(t), LATERAL (SELECT s.ctid FROM " +
		tableSpans + " s WHERE s.trace_id = q.t AND s.start_ts IS NULL AND NOT EXISTS (SELECT 1 FROM " + tableSpans +
		" x WHERE x.trace_id = q.t AND x.start_ts IS NOT NULL) OFFSET 0) o)"
	sqlRetainHours   = "DELETE FROM " + tableDepHours + " WHERE hour < $1"
	sqlRetainRecords = "DELETE FROM " + tableDepTraces + " WHERE hour < $1"
)

// DeleteBefore deletes what is older than cutoff and returns how many
// zipkin_spans rows it deleted: the span fragments whose timestamp is before
// cutoff, in statements of at most 10,000 rows each (ctx stops it between
// them), each followed by the fragments without a timestamp of the traces
// it emptied of timestamped fragments; then the dependency counts of the
// hours before cutoff's hour (zipkin_dependency_hours) and the records of
// the traces counted in them (zipkin_dependency_traces), in one transaction
// that waits for a running dependency drain. A trace whose earliest span is
// deleted counts, once its writes are drained again, in the hour of its
// earliest remaining span. zipkin_names is kept, as Zipkin's MySQL store
// keeps its names: it holds one row per distinct name, not per span.
// Queued dependency writes are kept: draining a trace whose spans are gone
// removes its counts.
func (s *Store) DeleteBefore(ctx context.Context, cutoff time.Time) (int64, error) {
	micros := cutoff.UnixMicro()
	var total int64
	for {
		lows, err := s.deleteRound(ctx, sqlRetainSpans, micros)
		if err != nil {
			return total, fmt.Errorf("pgstore: deleting spans before %s: %w", cutoff.UTC().Format(time.RFC3339), err)
		}
		total += int64(len(lows))
		if len(lows) > 0 {
			res, err := s.db.ExecContext(ctx, sqlRetainOrphans, int8Array(distinct(lows)))
			if err != nil {
				return total, fmt.Errorf("pgstore: deleting the fragments without timestamp of deleted traces: %w", err)
			}
			n, _ := res.RowsAffected()
			total += n
		}
		if len(lows) < retentionRound {
			break
		}
	}
	if err := s.deleteDependencyHours(ctx, floorDiv(micros, hourMicros)); err != nil {
		return total, err
	}
	return total, nil
}

func (s *Store) deleteRound(ctx context.Context, q string, micros int64) ([]int64, error) {
	rows, err := s.db.QueryContext(ctx, q, micros)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var lows []int64
	for rows.Next() {
		var l int64
		if err := rows.Scan(&l); err != nil {
			return nil, err
		}
		lows = append(lows, l)
	}
	return lows, rows.Err()
}

// deleteDependencyHours deletes the dependency counts of the hours before
// hour and the records of the traces counted in them.
func (s *Store) deleteDependencyHours(ctx context.Context, hour int64) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("pgstore: deleting dependency counts: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit: nothing to roll back
	for _, q := range []string{sqlLockDeps, sqlRetainHours, sqlRetainRecords} {
		var args []any
		if q != sqlLockDeps {
			args = []any{hour}
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("pgstore: deleting dependency counts before hour %d: %w", hour, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("pgstore: deleting dependency counts: %w", err)
	}
	return nil
}

func distinct(v []int64) []int64 {
	seen := make(map[int64]struct{}, len(v))
	out := v[:0:0]
	for _, x := range v {
		if _, ok := seen[x]; !ok {
			seen[x] = struct{}{}
			out = append(out, x)
		}
	}
	return out
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// RetentionOptions configure a Retention. MaxAge is required.
type RetentionOptions struct {
	// MaxAge is how old data may get: each pass runs DeleteBefore(now −
	// MaxAge). Must be positive.
	MaxAge time.Duration
	// Interval is the wait between passes. Zero value: one minute, or
	// MaxAge/10 when that is shorter.
	Interval time.Duration
	// Logger receives a warning per failed pass. Zero value: slog.Default().
	Logger *slog.Logger
	// Now is the clock. Zero value: time.Now.
	Now func() time.Time
}

// RetentionStats are a Retention's counters since it was created.
type RetentionStats struct {
	Passes       int64 // passes finished without an error
	SpansDeleted int64 // zipkin_spans rows deleted
	Errors       int64 // passes that failed (the next pass tries again)
}

// Retention deletes the store's data older than a maximum age, pass after
// pass, while ingest goes on. Create one with Store.NewRetention.
type Retention struct {
	s                   *Store
	opts                RetentionOptions
	passes, spans, errs atomic.Int64
}

// NewRetention returns the retention component of s, or an error when
// opts.MaxAge is not positive.
func (s *Store) NewRetention(opts RetentionOptions) (*Retention, error) {
	if opts.MaxAge <= 0 {
		return nil, fmt.Errorf("pgstore: retention MaxAge must be positive, got %s", opts.MaxAge)
	}
	if opts.Interval <= 0 {
		opts.Interval = max(min(time.Minute, opts.MaxAge/10), time.Millisecond)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Retention{s: s, opts: opts}, nil
}

// Stats returns the counters.
func (r *Retention) Stats() RetentionStats {
	return RetentionStats{Passes: r.passes.Load(), SpansDeleted: r.spans.Load(), Errors: r.errs.Load()}
}

// Run runs a pass (Store.DeleteBefore) every Interval, the first at once,
// until ctx ends; it returns ctx's error. A failed pass is logged and
// counted, and the next pass tries again.
func (r *Retention) Run(ctx context.Context) error {
	for {
		cutoff := r.opts.Now().Add(-r.opts.MaxAge)
		n, err := r.s.DeleteBefore(ctx, cutoff)
		r.spans.Add(n)
		switch {
		case err == nil:
			r.passes.Add(1)
		case ctx.Err() == nil:
			r.errs.Add(1)
			r.opts.Logger.WarnContext(ctx, "pgstore: retention pass failed; trying again at the next interval", "cutoff", cutoff, "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.opts.Interval):
		}
	}
}
