package mysqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sqlpool/sqlpool/retry"
	"github.com/sqlpool/sqlpool/stmtname"
)

// Statement names of the retention component for the SQL timers.
const (
	stmtRetentionSelect = "retention select zipkin_spans"
	stmtRetentionLock   = "retention lock zipkin_spans"
	stmtRetentionSpans  = "retention delete zipkin_spans"
	stmtRetentionAnns   = "retention delete zipkin_annotations"

	stmtRetentionServiceSpans = "retention delete zipkin_service_spans"
	stmtRetentionTagKeys      = "retention select zipkin_annotations (zipkin_tags keys)"
	stmtRetentionTags         = "retention delete zipkin_tags"
)

// tagDeleteChunk bounds the zipkin_tags rows one retention DELETE names.
const tagDeleteChunk = 200

// RetentionOptions configure a Retention. MaxAge is required.
type RetentionOptions struct {
	// MaxAge is how old a span may get: spans whose start_ts (Span.timestamp)
	// is older than now − MaxAge are deleted with their annotations. Spans
	// without a timestamp are never deleted. Must be positive.
	MaxAge time.Duration
	// Interval is the wait between passes; a pass deletes batches until it
	// has walked every span older than the cutoff once (see DeleteBefore).
	// Zero value: one minute, or MaxAge/10 when that is shorter.
	Interval time.Duration
	// BatchSpans is how many spans one transaction deletes, at most. Small
	// batches keep row locks short while ingest goes on. Zero value: 500.
	BatchSpans int
	// Pause is the wait between batches of a pass. Zero value: as long as
	// the previous batch took, so that retention uses the database at most
	// half of the time. Negative: no pause.
	Pause time.Duration
	// Now is the clock. Zero value: time.Now.
	Now func() time.Time
}

// RetentionStats are a Retention's counters since it was created.
type RetentionStats struct {
	Passes             int64 // passes finished
	Batches            int64 // transactions committed
	SpansDeleted       int64 // zipkin_spans rows deleted
	AnnotationsDeleted int64 // zipkin_annotations rows deleted
	IndexRowsDeleted   int64 // rows of the zipkin_service_spans addition deleted
	TagRowsDeleted     int64 // rows of the zipkin_tags addition deleted
	Retries            int64 // transactions run again after a deadlock (1213), lock wait timeout (1205) or lost connection
	Errors             int64 // batches that failed after their retries (the pass stops; the next one tries again)
}

// Retention deletes spans older than a maximum age, with their annotations,
// in small transactions while ingest goes on. Create one with
// Store.NewRetention and run it with Run or DeleteBefore.
//
// Each batch picks the oldest spans with a consistent (non-locking) read of
// the start_ts index, then in one READ COMMITTED transaction locks those
// rows by primary key (re-checking start_ts, so a span an upsert made
// younger meanwhile is kept), deletes them, deletes their annotations and,
// when the zipkin_tags addition is in use, deletes their zipkin_tags rows
// by primary key (tagRowsOf).
// Rows are locked in primary-key order, spans before annotations, as the
// writers lock them, and READ COMMITTED takes no gap locks: a concurrent
// write waits at most for one batch, and an annotation is never left
// without its span (an annotation is written in the same transaction as its
// span row, which the batch holds locked). Deadlocks and lock wait
// timeouts that still happen are retried (retry.Tx) and counted.
type Retention struct {
	s    *Store
	opts RetentionOptions

	passes, batches, spans, anns, index, tags, retries, errs atomic.Int64

	// afterBatch, when set (by tests), runs after each committed batch.
	afterBatch func()
}

// NewRetention returns the retention component of s. It returns an error
// when opts.MaxAge is not positive.
func (s *Store) NewRetention(opts RetentionOptions) (*Retention, error) {
	if opts.MaxAge <= 0 {
		return nil, fmt.Errorf("mysqlstore: retention MaxAge must be positive, got %s", opts.MaxAge)
	}
	if opts.Interval <= 0 {
		opts.Interval = min(time.Minute, opts.MaxAge/10)
		if opts.Interval <= 0 {
			opts.Interval = time.Millisecond
		}
	}
	if opts.BatchSpans <= 0 {
		opts.BatchSpans = 500
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Retention{s: s, opts: opts}, nil
}

// Stats returns the counters.
func (r *Retention) Stats() RetentionStats {
	return RetentionStats{Passes: r.passes.Load(), Batches: r.batches.Load(), SpansDeleted: r.spans.Load(),
		AnnotationsDeleted: r.anns.Load(), IndexRowsDeleted: r.index.Load(), TagRowsDeleted: r.tags.Load(), Retries: r.retries.Load(), Errors: r.errs.Load()}
}

// Run deletes expired spans every Interval until ctx ends; it returns
// ctx's error. A pass that fails is logged and counted, and the next pass
// tries again.
func (r *Retention) Run(ctx context.Context) error {
	for {
		cutoff := r.opts.Now().Add(-r.opts.MaxAge)
		if _, err := r.DeleteBefore(ctx, cutoff); err != nil && ctx.Err() == nil {
			r.s.log.WarnContext(ctx, "mysqlstore: retention pass failed; trying again at the next interval",
				"cutoff", cutoff, "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.opts.Interval):
		}
	}
}

// retKey is a zipkin_spans primary key.
type retKey struct{ high, low, id int64 }

// DeleteBefore runs one pass: it deletes, batch by batch, every span whose
// start_ts is before cutoff, and their annotations. With the dependency
// aggregator it first drains the aggregator's queue and deletes its trace
// records and link counts (hours and days) of the days more than a day
// before cutoff. It returns how many spans it deleted.
//
// A pass walks the expired range once, in (start_ts, primary key) order,
// each batch starting after the last span the previous batch read. A span
// stored during the pass with a start_ts behind that position (a late
// arrival older than the cutoff) is left for the next pass, so a pass ends
// even while ingest keeps adding expired spans faster than one pass deletes
// them.
func (r *Retention) DeleteBefore(ctx context.Context, cutoff time.Time) (int64, error) {
	cut := cutoff.UnixMicro()
	if err := r.purgeServiceSpans(ctx, cut); err != nil {
		r.errs.Add(1)
		return 0, err
	}
	if err := r.s.purgeDependencyTraces(ctx, cut, r.opts.BatchSpans); err != nil {
		r.errs.Add(1)
		return 0, err
	}
	var total int64
	var after *retCursor
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		keys, last, err := r.oldest(ctx, cut, after)
		if err != nil {
			r.errs.Add(1)
			return total, err
		}
		if len(keys) == 0 {
			r.passes.Add(1)
			return total, nil
		}
		after = &last
		t0 := time.Now()
		n, err := r.deleteBatch(ctx, keys, cut)
		if err != nil {
			r.errs.Add(1)
			return total, err
		}
		total += n
		if r.afterBatch != nil {
			r.afterBatch()
		}
		if len(keys) < r.opts.BatchSpans {
			r.passes.Add(1)
			return total, nil
		}
		pause := r.opts.Pause
		if pause == 0 {
			pause = time.Since(t0)
		}
		if pause > 0 {
			select {
			case <-ctx.Done():
				return total, ctx.Err()
			case <-time.After(pause):
			}
		}
	}
}

// purgeServiceSpans deletes the rows of the zipkin_service_spans addition
// older than cut, service by service along its primary key (the old end of
// each service's range, away from where ingest inserts), BatchSpans rows per
// statement. It runs before the spans are deleted, so that getTraces never
// finds a trace ID in it whose spans are gone.
func (r *Retention) purgeServiceSpans(ctx context.Context, cut int64) error {
	if !r.s.add.serviceSpans {
		return nil
	}
	q := "SELECT DISTINCT service_name FROM " + tableServiceSpans
	if r.s.add.names {
		q = sqlFastServiceNames
	}
	services, err := r.s.selectNamesOn(ctx, r.s.db, stmtRetentionSelect, q)
	if err != nil {
		return fmt.Errorf("mysqlstore: retention: %w", err)
	}
	for _, svc := range services {
		for {
			res, err := r.s.db.ExecContext(stmtname.With(ctx, stmtRetentionServiceSpans),
				"DELETE FROM "+tableServiceSpans+" WHERE service_name = ? AND start_ts < ? LIMIT ?", svc, cut, r.opts.BatchSpans)
			if err != nil {
				return fmt.Errorf("mysqlstore: retention: deleting from %s: %w", tableServiceSpans, err)
			}
			n, _ := res.RowsAffected()
			r.index.Add(n)
			if n < int64(r.opts.BatchSpans) {
				break
			}
		}
	}
	return nil
}

// retCursor is the position of the last span a batch read: its start_ts
// and primary key.
type retCursor struct {
	ts int64
	k  retKey
}

// oldest reads, without locking, up to BatchSpans keys of spans older than
// cut in (start_ts, primary key) order, starting after the position after
// (from the start of the range when after is nil). It returns the keys and
// the position of the last one.
func (r *Retention) oldest(ctx context.Context, cut int64, after *retCursor) ([]retKey, retCursor, error) {
	high := "trace_id_high"
	if !r.s.feat.traceIDHigh {
		high = "0"
	}
	q := "SELECT start_ts, " + high + ", trace_id, id FROM " + tableSpans + " WHERE start_ts < ?"
	args := []any{cut}
	if after != nil {
		// The range condition on start_ts alone lets the server walk the
		// start_ts index from the position; the rest orders ties.
		if r.s.feat.traceIDHigh {
			q += " AND start_ts >= ? AND (start_ts > ? OR (start_ts = ? AND (trace_id_high > ? OR (trace_id_high = ? AND" +
				" (trace_id > ? OR (trace_id = ? AND id > ?))))))"
			args = append(args, after.ts, after.ts, after.ts, after.k.high, after.k.high, after.k.low, after.k.low, after.k.id)
		} else {
			q += " AND start_ts >= ? AND (start_ts > ? OR (start_ts = ? AND (trace_id > ? OR (trace_id = ? AND id > ?))))"
			args = append(args, after.ts, after.ts, after.ts, after.k.low, after.k.low, after.k.id)
		}
	}
	order := " ORDER BY start_ts, trace_id_high, trace_id, id LIMIT ?"
	if !r.s.feat.traceIDHigh {
		order = " ORDER BY start_ts, trace_id, id LIMIT ?"
	}
	rows, err := r.s.db.QueryContext(stmtname.With(ctx, stmtRetentionSelect), q+order, append(args, r.opts.BatchSpans)...)
	if err != nil {
		return nil, retCursor{}, fmt.Errorf("mysqlstore: retention: selecting spans older than the cutoff: %w", err)
	}
	defer rows.Close()
	var keys []retKey
	var last retCursor
	for rows.Next() {
		if err := rows.Scan(&last.ts, &last.k.high, &last.k.low, &last.k.id); err != nil {
			return nil, retCursor{}, fmt.Errorf("mysqlstore: retention: %w", err)
		}
		keys = append(keys, last.k)
	}
	if err := rows.Err(); err != nil {
		return nil, retCursor{}, fmt.Errorf("mysqlstore: retention: %w", err)
	}
	return keys, last, nil
}

// keyList returns "(a = ? AND b = ? AND c = ?) OR …" for keys and its
// arguments; cols names the three key columns (the first empty when the
// schema has no trace_id_high).
func keyList(cols [3]string, keys []retKey) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, 3*len(keys))
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteByte('(')
		if cols[0] != "" {
			b.WriteString(cols[0])
			b.WriteString(" = ? AND ")
			args = append(args, k.high)
		}
		b.WriteString(cols[1])
		b.WriteString(" = ? AND ")
		b.WriteString(cols[2])
		b.WriteString(" = ?)")
		args = append(args, k.low, k.id)
	}
	return b.String(), args
}

// deleteBatch deletes the spans of keys that are still older than cut,
// their annotations and, with the tag-search addition, their zipkin_tags
// rows, in one transaction.
func (r *Retention) deleteBatch(ctx context.Context, keys []retKey, cut int64) (int64, error) {
	slices.SortFunc(keys, func(a, b retKey) int {
		return cmp.Or(cmp.Compare(a.high, b.high), cmp.Compare(a.low, b.low), cmp.Compare(a.id, b.id))
	})
	keys = slices.Compact(keys)
	hi := ""
	if r.s.feat.traceIDHigh {
		hi = "trace_id_high"
	}
	sel := "0"
	if hi != "" {
		sel = hi
	}
	policy := r.s.opts.Retry
	policy.Observer = &retry.Hooks{OnRetry: func(retry.Op, int, error, time.Duration) { r.retries.Add(1) }}
	var spans, anns, tags int64
	err := retry.Tx(ctx, r.s.db, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, policy, func(ctx context.Context, tx *sql.Tx) error {
		spans, anns, tags = 0, 0, 0
		// Lock the rows, in key order, and keep those still expired.
		where, args := keyList([3]string{hi, "trace_id", "id"}, keys)
		rows, err := tx.QueryContext(stmtname.With(ctx, stmtRetentionLock),
			"SELECT "+sel+", trace_id, id, start_ts FROM "+tableSpans+" WHERE ("+where+") AND start_ts < ? ORDER BY "+
				strings.TrimPrefix(hi+", ", ", ")+"trace_id, id FOR UPDATE", append(args, cut)...)
		if err != nil {
			return err
		}
		var locked []retKey
		starts := map[retKey]int64{}
		for rows.Next() {
			var k retKey
			var ts int64
			if err := rows.Scan(&k.high, &k.low, &k.id, &ts); err != nil {
				rows.Close()
				return err
			}
			locked = append(locked, k)
			starts[k] = ts
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(locked) == 0 {
			return nil
		}
		var tagKeys, tagAnyValue []tagRow
		if r.s.add.tags {
			// Before their annotation rows go: they name the keys.
			if tagKeys, tagAnyValue, err = r.tagRowsOf(ctx, tx, sel, hi, locked, starts); err != nil {
				return err
			}
		}
		where, args = keyList([3]string{hi, "trace_id", "id"}, locked)
		res, err := tx.ExecContext(stmtname.With(ctx, stmtRetentionSpans),
			"DELETE FROM "+tableSpans+" WHERE "+where, args...)
		if err != nil {
			return err
		}
		spans, _ = res.RowsAffected()
		where, args = keyList([3]string{hi, "trace_id", "span_id"}, locked)
		res, err = tx.ExecContext(stmtname.With(ctx, stmtRetentionAnns),
			"DELETE FROM "+tableAnnotations+" WHERE "+where, args...)
		if err != nil {
			return err
		}
		anns, _ = res.RowsAffected()
		tags, err = deleteTagRows(ctx, tx, tagKeys, tagAnyValue)
		return err
	})
	if err != nil {
		if errors.Is(err, retry.ErrAmbiguousCommit) {
			// Deleting again is harmless: the next pass finds what is left.
			return 0, nil
		}
		return 0, fmt.Errorf("mysqlstore: retention: deleting %d spans: %w", len(keys), err)
	}
	r.batches.Add(1)
	r.spans.Add(spans)
	r.anns.Add(anns)
	r.tags.Add(tags)
	return spans, nil
}

// tagRowsOf returns the zipkin_tags keys, without the service column, under
// which the write path may have stored rows of the locked spans, read from
// their zipkin_annotations rows (which tx reads before deleting them) and
// their start_ts (starts):
//
//   - a tag row (a_type 6) at a_timestamp t stored the key row
//     (0, a_key, "", t) and, with a non-empty value, the value row
//     (1, a_key, the value's first maxTagValue+1 bytes, t);
//   - a timeline annotation (a_type -1) stored the key row (0, a_key, "", t)
//     at the timestamp t of the span side that carried it, which its row
//     does not record: t is each of the span's start_ts, the a_timestamp of
//     its rows of another type (its sides' tags, "lc" and address rows) and
//     of its begin annotations (cs, sr, ms, wr, mr), all written at a
//     side's timestamp;
//   - a row of a reserved key (cs, sa, lc, …) at t stored nothing itself,
//     but it hides a tag whose key the collation folds to it ("çs" is "cs"
//     in utf8_general_ci) stored at the same t: zipkin_annotations' primary
//     key kept one of the two rows, zipkin_tags has the tag's. The key row
//     (0, a_key, "", t) finds it by the same folding; its value rows, whose
//     value no annotation row still shows, are returned in anyValue, to be
//     deleted whatever their value.
//
// A timestamp 0 (none) is noTimestamp in zipkin_tags, and noTimestamp is
// always one of the annotation timestamps.
func (r *Retention) tagRowsOf(ctx context.Context, tx *sql.Tx, sel, hi string, locked []retKey,
	starts map[retKey]int64) (points, anyValue []tagRow, err error) {
	where, args := keyList([3]string{hi, "trace_id", "span_id"}, locked)
	rows, err := tx.QueryContext(stmtname.With(ctx, stmtRetentionTagKeys),
		"SELECT "+sel+", trace_id, span_id, a_key, a_type, LEFT(a_value, "+itoa(maxTagValue+1)+"), a_timestamp FROM "+
			tableAnnotations+" WHERE "+where, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	tsOf := func(ts int64) int64 {
		if ts <= 0 {
			return noTimestamp
		}
		return ts
	}
	type annKey struct {
		k   retKey
		key string
	}
	sides := map[retKey]map[int64]bool{}
	for k, ts := range starts {
		sides[k] = map[int64]bool{tsOf(ts): true, noTimestamp: true}
	}
	var annotations []annKey
	set := map[tagRow]struct{}{}
	folded := map[tagRow]struct{}{}
	for rows.Next() {
		var k retKey
		var key string
		var aType int64
		var value []byte
		var ats sql.NullInt64
		if err := rows.Scan(&k.high, &k.low, &k.id, &key, &aType, &value, &ats); err != nil {
			return nil, nil, err
		}
		ts := tsOf(ats.Int64)
		if aType != aTypeAnnotation || beginAnnotation(key) {
			if sides[k] != nil {
				sides[k][ts] = true
			}
		}
		row := tagRow{kind: tagKindKey, key: key, ts: ts, high: k.high, low: k.low, id: k.id}
		switch {
		case reservedTagKey(key):
			set[row] = struct{}{}
			row.kind = tagKindValue
			folded[row] = struct{}{}
		case aType != aTypeAnnotation:
			set[row] = struct{}{}
			if aType == aTypeString && len(value) > 0 {
				row.kind, row.value = tagKindValue, string(value)
				set[row] = struct{}{}
			}
		default:
			annotations = append(annotations, annKey{k, key})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	for _, a := range annotations {
		for ts := range sides[a.k] {
			set[tagRow{kind: tagKindKey, key: a.key, ts: ts, high: a.k.high, low: a.k.low, id: a.k.id}] = struct{}{}
		}
	}
	points = slices.AppendSeq(make([]tagRow, 0, len(set)), maps.Keys(set))
	sortTagRows(points)
	anyValue = slices.AppendSeq(make([]tagRow, 0, len(folded)), maps.Keys(folded))
	sortTagRows(anyValue)
	return points, anyValue, nil
}

// beginAnnotation reports whether key is one of the core annotations the
// write path stores at a span side's timestamp.
func beginAnnotation(key string) bool {
	switch key {
	case "cs", "sr", "ms", "wr", "mr":
		return true
	}
	return false
}

// deleteTagRows deletes, in key order and tagDeleteChunk keys per
// statement, the zipkin_tags rows of points (each naming every primary-key
// column but the last, the service) and of anyValue (each naming every one
// but the value and the service), and returns how many it deleted.
func deleteTagRows(ctx context.Context, tx *sql.Tx, points, anyValue []tagRow) (int64, error) {
	var total int64
	for _, part := range []struct {
		keys []tagRow
		cond string
		args func(tagRow) []any
	}{
		{points, "(kind = ? AND a_key = ? AND a_value = ? AND start_ts = ? AND trace_id_high = ? AND trace_id = ? AND span_id = ?)",
			func(k tagRow) []any { return []any{int64(k.kind), k.key, []byte(k.value), k.ts, k.high, k.low, k.id} }},
		{anyValue, "(kind = ? AND a_key = ? AND start_ts = ? AND trace_id_high = ? AND trace_id = ? AND span_id = ?)",
			func(k tagRow) []any { return []any{int64(k.kind), k.key, k.ts, k.high, k.low, k.id} }},
	} {
		keys := part.keys
		for len(keys) > 0 {
			chunk := keys[:min(len(keys), tagDeleteChunk)]
			keys = keys[len(chunk):]
			var b strings.Builder
			var args []any
			b.WriteString("DELETE FROM " + tableTags + " WHERE ")
			for i, k := range chunk {
				if i > 0 {
					b.WriteString(" OR ")
				}
				b.WriteString(part.cond)
				args = append(args, part.args(k)...)
			}
			res, err := tx.ExecContext(stmtname.With(ctx, stmtRetentionTags), b.String(), args...)
			if err != nil {
				return total, err
			}
			n, _ := res.RowsAffected()
			total += n
		}
	}
	return total, nil
}
