package mysqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/retry"
	"github.com/sqlpool/sqlpool/stmtname"
)

// Dependency aggregation: the store keeps zipkin_dependencies current from
// what it writes, so that neither a Spark job (zipkin-dependencies) nor
// on-demand linking of every span in the window is needed, and the write
// transaction carries one small row for it (deps_queue.go).
//
// A trace counts once, in the hour (zipkin_dependency_hours) and on the
// UTC day (zipkin_dependencies) of its earliest span timestamp (start_ts),
// with the links Zipkin's DependencyLinker finds in the whole trace — what
// the pre-aggregated variant of Zipkin's ITDependencies expects of the job.
//
//   - zipkin_dependency_queue receives, with each write transaction, the
//     linker's view of the rows it writes.
//   - The drain takes queued writes in large batches and, per trace they
//     name, applies them to the trace's record in zipkin_dependency_traces
//     (the linker's view of every row stored for the trace, keyed by the
//     low 64 bits of its ID as linking groups traces, plus what was
//     counted: hour, day and links), relinks the trace and adds the
//     difference from what was counted to zipkin_dependencies and
//     zipkin_dependency_hours, summed over the batch. Drains take turns
//     (the queue rows are read FOR UPDATE; on Galera two nodes' drains
//     conflict at certification and one is retried).
//
// A span stored twice changes nothing (the relinked trace is the same, the
// difference empty); a child stored before its parent is linked when the
// parent arrives (its trace is relinked then); a span that moves a trace
// to an earlier hour moves its links. GetDependencies adds the differences
// of the writes still queued, so it answers with every committed batch;
// Zipkin's own readers of zipkin_dependencies see a batch after the next
// drain (DependencyLag). zipkin_dependency_pending is the previous
// version's difference table: the drain folds what it holds.
const (
	tableDepTraces  = "zipkin_dependency_traces"
	tableDepPending = "zipkin_dependency_pending"

	ddlDepTraces = "CREATE TABLE IF NOT EXISTS " + tableDepTraces + ` (
  trace_id BIGINT NOT NULL,
  seq BIGINT NOT NULL DEFAULT 0,
  day DATE,
  links MEDIUMBLOB,
  PRIMARY KEY (trace_id),
  KEY day (day)
)` + depTableOptions

	ddlDepPending = "CREATE TABLE IF NOT EXISTS " + tableDepPending + ` (
  trace_id BIGINT NOT NULL,
  seq BIGINT NOT NULL,
  n INT NOT NULL,
  day DATE NOT NULL,
  parent VARCHAR(255) NOT NULL,
  child VARCHAR(255) NOT NULL,
  call_count BIGINT NOT NULL,
  error_count BIGINT NOT NULL,
  PRIMARY KEY (trace_id, seq, n)
)` + tableOptions

	probeDepTraces  = "SELECT seq FROM " + tableDepTraces + " LIMIT 1"
	probeDepPending = "SELECT n FROM " + tableDepPending + " LIMIT 1"
)

// Statement names for the SQL timers.
const (
	stmtLockDepTraces    = "upsert zipkin_dependency_traces (lock)"
	stmtSelectDepTraces  = "select zipkin_dependency_traces"
	stmtSelectTraceSpans = "select dependency spans of traces"
	stmtInsertDepPending = "insert zipkin_dependency_pending"
	stmtUpdateDepTraces  = "upsert zipkin_dependency_traces"
	stmtSelectDepPending = "select zipkin_dependency_pending"
	stmtFoldDependencies = "fold zipkin_dependency_pending"
	stmtPurgeDepTraces   = "delete zipkin_dependency_traces (retention)"
	stmtPurgeDepHours    = "delete zipkin_dependency_hours (retention)"
	stmtPurgeDepDays     = "delete zipkin_dependencies (retention)"
)

// depChunk bounds the traces one aggregation statement names.
const depChunk = 100

// foldChunk bounds the pending rows one fold transaction moves.
const foldChunk = 5000

// inlineDrainTx bounds the drain transactions one Accept runs after its
// write (64 queued writes each).
const inlineDrainTx = 8

// defaultFoldInterval is Options.DependencyFoldInterval's zero value: each
// drain upserts every link it touches once, whatever the spans it covers,
// so drains seconds apart amortize that over more spans (measured: at a
// 1 s interval and 500 spans/s the upserts were 0.4 row updates per span).
const defaultFoldInterval = 3 * time.Second

// DependencyAggregationDDL returns the CREATE TABLE statements of the
// dependency aggregator's tables (zipkin_dependency_traces,
// zipkin_dependency_queue, zipkin_dependency_hours), which CreateSchema
// runs after the additions.
func DependencyAggregationDDL() []string { return []string{ddlDepTraces, ddlDepQueue, ddlDepHours} }

func createDependencyAggregation(ctx context.Context, db *sql.DB) error {
	for _, q := range DependencyAggregationDDL() {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("mysqlstore: creating the dependency aggregator's tables (%.50s…): %w", q, err)
		}
	}
	return nil
}

// depState is the store's view of the aggregator.
type depState struct {
	traces    bool          // zipkin_dependency_traces is usable: retention purges it
	pending   bool          // zipkin_dependency_pending (the previous aggregator's) is usable: GetDependencies adds it, drains fold it
	queue     bool          // zipkin_dependency_queue is usable
	hours     bool          // zipkin_dependency_hours is usable (and aggregation on): windows are served per hour
	aggregate bool          // traces and queue usable, zipkin_dependencies with error_count exists and aggregation is not disabled
	lastFold  atomic.Int64  // time.Now().UnixNano() of the last fold's start
	folding   chan struct{} // a one-slot semaphore: one fold at a time per Store
}

// detectAggregation probes the aggregator's tables. Aggregation runs when
// zipkin_dependency_traces and zipkin_dependency_queue exist,
// zipkin_dependencies has error_count, and
// Options.DisableDependencyAggregation is false.
func (s *Store) detectAggregation(ctx context.Context) {
	s.deps.folding = make(chan struct{}, 1)
	traces := s.tableUsable(ctx, probeDepTraces)
	s.deps.traces = traces
	s.deps.pending = s.tableUsable(ctx, probeDepPending) && s.feat.dependencies
	s.deps.queue = s.tableUsable(ctx, probeDepQueue)
	s.deps.aggregate = traces && s.deps.queue && s.feat.dependencies && s.feat.errorCount && !s.opts.DisableDependencyAggregation
	s.deps.hours = s.deps.aggregate && s.tableUsable(ctx, probeDepHours)
	switch {
	case s.opts.DisableDependencyAggregation:
		s.log.InfoContext(ctx, "mysqlstore: dependency aggregation disabled; zipkin_dependencies is read as it is and dependencies are linked from spans when it has no row")
	case !s.deps.aggregate:
		s.log.InfoContext(ctx, "mysqlstore: dependency aggregation off: its tables are missing (run with -init-schema to add them); dependencies are linked from spans on each request",
			tableDepTraces, traces, tableDepQueue, s.deps.queue, "zipkin_dependencies.error_count", s.feat.errorCount)
	}
}

// DependencyAggregation reports whether the store keeps zipkin_dependencies
// current from its writes (see Options.DisableDependencyAggregation).
func (s *Store) DependencyAggregation() bool { return s.deps.aggregate }

// depRecord is the previous aggregator's zipkin_dependency_traces.links
// (JSON): the day its links were counted on ("" for none), the links, and
// the high halves of its ID stored so far. This version reads it (the
// trace is then relinked from the span tables) and writes recordV2.
type depRecord struct {
	Day   string       `json:"d"`
	Highs []int64      `json:"h"`
	Links [][4]any     `json:"l,omitempty"` // parent, child, calls, errors
	parse []depLinkRow // decoded Links
}

type depLinkRow struct {
	parent, child string
	calls, errs   int64
}

func decodeRecord(b []byte) (depRecord, error) {
	var r depRecord
	if len(b) == 0 {
		return r, nil
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("mysqlstore: zipkin_dependency_traces.links is not the aggregator's JSON (%.40q): %w", b, err)
	}
	for _, l := range r.Links {
		p, _ := l[0].(string)
		c, _ := l[1].(string)
		calls, _ := l[2].(float64)
		errs, _ := l[3].(float64)
		r.parse = append(r.parse, depLinkRow{p, c, int64(calls), int64(errs)})
	}
	return r, nil
}

// depDelta is one difference to add to a day's link.
type depDelta struct {
	day, parent, child string
	calls, errs        int64
}

// txLostError is the error of a write transaction whose own writes a later
// read in it did not see: the server rolled the transaction back without
// telling the statement. MariaDB Galera does so when a replicated writeset
// brute-force aborts a local transaction while it runs a SELECT (seen on
// 10.11 when batches on two nodes insert the same zipkin_names rows): the
// SELECT answers an empty result and no error, the statements after it run
// outside any transaction, and COMMIT answers OK with nothing to commit —
// the batch would be acknowledged and lost. Its SQLSTATE, 40001
// (serialization failure: the transaction was rolled back), makes retry.Tx
// run the whole transaction again, as after a certification failure.
type txLostError struct{ what string }

func (e *txLostError) Error() string {
	return "mysqlstore: the write transaction was rolled back underneath without an error (read " + e.what +
		"; a Galera brute-force abort?)"
}

// SQLState returns 40001 (serialization failure): package retry classifies
// the error as transient.
func (e *txLostError) SQLState() string { return "40001" }

func (s *Store) txLost(ctx context.Context, what string) error {
	s.log.WarnContext(ctx, "mysqlstore: a write transaction was rolled back by the server without an error; running it again",
		"read", what)
	return &txLostError{what: what}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// maybeDrain drains the dependency queue (and folds what the previous
// aggregator left pending) when Options.DependencyFoldInterval has passed
// since the last drain and no other drain of this Store runs. A failed
// drain is logged: the rows stay queued (GetDependencies counts them) and
// the next drain takes them.
func (s *Store) maybeDrain(ctx context.Context) {
	if !s.deps.aggregate {
		return
	}
	interval := s.opts.DependencyFoldInterval
	if interval < 0 {
		return
	}
	if interval == 0 {
		interval = defaultFoldInterval
	}
	now := time.Now().UnixNano()
	if now-s.deps.lastFold.Load() < int64(interval) {
		return
	}
	select {
	case s.deps.folding <- struct{}{}:
	default:
		return
	}
	defer func() { <-s.deps.folding }()
	s.deps.lastFold.Store(now)
	// A bounded share: the writer whose Accept drains waits for it.
	if _, err := s.drainLocked(ctx, inlineDrainTx); err != nil {
		s.log.WarnContext(ctx, "mysqlstore: draining the dependency queue into zipkin_dependencies failed; its rows stay queued and are counted by GetDependencies",
			"err", err)
	}
}

// FoldDependencies brings zipkin_dependencies up to date with every write
// so far: it drains the dependency queue (DrainDependencies) and moves
// what the previous version's aggregator left in zipkin_dependency_pending
// into the table. It returns the number of queued writes and pending rows
// it took. The store also drains by itself (see
// Options.DependencyFoldInterval and RunDependencyAggregation); calling
// this is needed only before handing the table to another reader, or in
// tests. Without aggregation it does nothing.
func (s *Store) FoldDependencies(ctx context.Context) (int, error) {
	if !s.deps.aggregate {
		return 0, nil
	}
	select {
	case s.deps.folding <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-s.deps.folding }()
	return s.drainLocked(ctx, 0)
}

// foldAll moves every row of zipkin_dependency_pending (left by the
// previous aggregator) into zipkin_dependencies.
func (s *Store) foldAll(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := s.foldOnce(ctx)
		total += n
		if err != nil || n < foldChunk {
			return total, err
		}
	}
}

// foldOnce moves up to foldChunk pending rows in one transaction.
func (s *Store) foldOnce(ctx context.Context) (int, error) {
	moved := 0
	err := retry.Tx(ctx, s.db, nil, s.writePolicy(), func(ctx context.Context, tx *sql.Tx) error {
		moved = 0
		rows, err := tx.QueryContext(stmtname.With(ctx, stmtSelectDepPending),
			"SELECT trace_id, seq, n, day, parent, child, call_count, error_count FROM "+tableDepPending+
				" ORDER BY trace_id, seq, n LIMIT ? FOR UPDATE", foldChunk)
		if err != nil {
			return err
		}
		type key struct{ day, parent, child string }
		sums := map[key]*depDelta{}
		var keys []key
		var del []any
		for rows.Next() {
			var low, seq, n, calls, errs int64
			var day any
			var parent, child string
			if err := rows.Scan(&low, &seq, &n, &day, &parent, &child, &calls, &errs); err != nil {
				rows.Close()
				return err
			}
			d, err := dayString(day)
			if err != nil {
				rows.Close()
				return err
			}
			del = append(del, low, seq, n)
			k := key{d, parent, child}
			x := sums[k]
			if x == nil {
				x = &depDelta{day: d, parent: parent, child: child}
				sums[k] = x
				keys = append(keys, k)
			}
			x.calls += calls
			x.errs += errs
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return err
		}
		rows.Close()
		if len(del) == 0 {
			return nil
		}
		moved = len(del) / 3
		// Key order, for one lock order among folders.
		slices.SortFunc(keys, func(a, b key) int {
			return cmp.Or(strings.Compare(a.day, b.day), strings.Compare(a.parent, b.parent), strings.Compare(a.child, b.child))
		})
		fctx := stmtname.With(ctx, stmtFoldDependencies)
		var up []any
		var days []any
		n := 0
		for _, k := range keys {
			x := sums[k]
			if x.calls == 0 && x.errs == 0 {
				continue
			}
			up = append(up, x.day, x.parent, x.child, x.calls, x.errs)
			if len(days) == 0 || days[len(days)-1] != x.day {
				days = append(days, x.day)
			}
			n++
		}
		for start := 0; start < n; start += 500 {
			c := min(500, n-start)
			if _, err := tx.ExecContext(fctx, "INSERT INTO "+tableDependencies+
				" (day, parent, child, call_count, error_count) VALUES "+values(5, c)+
				" ON DUPLICATE KEY UPDATE call_count = COALESCE(call_count, 0) + VALUES(call_count),"+
				" error_count = COALESCE(error_count, 0) + VALUES(error_count)", up[start*5:(start+c)*5]...); err != nil {
				return err
			}
		}
		for start := 0; start < len(del); start += 3 * 500 {
			c := min(500, (len(del)-start)/3)
			var w strings.Builder
			for i := 0; i < c; i++ {
				if i > 0 {
					w.WriteString(" OR ")
				}
				w.WriteString("(trace_id = ? AND seq = ? AND n = ?)")
			}
			if _, err := tx.ExecContext(fctx, "DELETE FROM "+tableDepPending+" WHERE "+w.String(), del[start:start+3*c]...); err != nil {
				return err
			}
		}
		if len(days) > 0 {
			if _, err := tx.ExecContext(fctx, "DELETE FROM "+tableDependencies+" WHERE day IN ("+placeholders(len(days))+
				") AND call_count <= 0 AND COALESCE(error_count, 0) <= 0", days...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("mysqlstore: folding %s into %s: %w", tableDepPending, tableDependencies, err)
	}
	return moved, nil
}

// dayString turns a DATE column value (text, or time.Time with parseTime)
// into "YYYY-MM-DD".
func dayString(v any) (string, error) {
	switch v := v.(type) {
	case time.Time:
		return v.UTC().Format(time.DateOnly), nil
	case []byte:
		if len(v) >= 10 {
			return string(v[:10]), nil
		}
	case string:
		if len(v) >= 10 {
			return v[:10], nil
		}
	}
	return "", fmt.Errorf("mysqlstore: unexpected DATE value %v (%T)", v, v)
}

// selectPending returns the pending differences of the days from..to.
func (s *Store) selectPending(ctx context.Context, from, to string) ([]model.DependencyLink, error) {
	rows, err := s.db.QueryContext(stmtname.With(ctx, stmtSelectDepPending),
		"SELECT parent, child, SUM(call_count), SUM(error_count) FROM "+tableDepPending+
			" WHERE day BETWEEN ? AND ? GROUP BY parent, child", from, to)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: select pending dependencies: %w", err)
	}
	defer rows.Close()
	var links []model.DependencyLink
	for rows.Next() {
		var l model.DependencyLink
		var calls, errs sql.NullFloat64 // SUM of BIGINT is DECIMAL
		if err := rows.Scan(&l.Parent, &l.Child, &calls, &errs); err != nil {
			return nil, fmt.Errorf("mysqlstore: select pending dependencies: %w", err)
		}
		l.CallCount, l.ErrorCount = int64(calls.Float64), int64(errs.Float64)
		links = append(links, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysqlstore: select pending dependencies: %w", err)
	}
	return links, nil
}

// purgeDependencyTraces deletes, batch rows per statement, the aggregator's
// records of traces whose day is more than a day before the retention
// cutoff cut (epoch microseconds), and the counts of those days: the rows
// of zipkin_dependency_hours and (with aggregation on) zipkin_dependencies
// before that day. Their spans are gone or going. The writes still queued
// are folded first, so that no count of a purged day is added after the
// pass. Spans of such a trace arriving later are counted as a new trace
// (and purged by the next pass when they are expired too). Without the
// aggregator's tables it does nothing.
func (s *Store) purgeDependencyTraces(ctx context.Context, cut int64, batch int) error {
	if !s.deps.traces {
		return nil
	}
	if _, err := s.FoldDependencies(ctx); err != nil {
		return fmt.Errorf("mysqlstore: retention: folding the queued dependency writes: %w", err)
	}
	dayMs := floorDiv(floorDiv(cut, 1000)-dayMillis, dayMillis) * dayMillis
	day := epochDay(dayMs)
	type purge struct {
		table, stmt, q string
		arg            any
	}
	purges := []purge{
		{tableDepTraces, stmtPurgeDepTraces, "DELETE FROM " + tableDepTraces + " WHERE day < ? LIMIT ?", day},
	}
	if s.deps.hours {
		purges = append(purges, purge{tableDepHours, stmtPurgeDepHours, "DELETE FROM " + tableDepHours + " WHERE hour < ? LIMIT ?", floorDiv(dayMs, 3_600_000)})
	}
	if s.deps.aggregate {
		purges = append(purges, purge{tableDependencies, stmtPurgeDepDays, "DELETE FROM " + tableDependencies + " WHERE day < ? LIMIT ?", day})
	}
	for _, p := range purges {
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			res, err := s.db.ExecContext(stmtname.With(ctx, p.stmt), p.q, p.arg, batch)
			if err != nil {
				return fmt.Errorf("mysqlstore: retention: deleting %s rows before %s: %w", p.table, day, err)
			}
			if n, err := res.RowsAffected(); err != nil || n < int64(batch) {
				break
			}
		}
	}
	return nil
}

// BackfillDependencies runs the aggregator over the traces already stored
// (in chunks of 100 traces, one transaction each, ordered by trace ID), so
// that days written before the aggregator's tables existed — or by a bulk
// loader that wrote the span tables directly — are counted as if their
// spans had arrived through Accept, and then drains the queue. A trace already
// counted is recomputed and changes nothing unless its spans changed.
// Traces are found through zipkin_annotations (index trace_id), so a
// trace none of whose spans has an annotation row is skipped; such spans
// carry no service name and link nothing. It returns the number of traces
// it went through. Without aggregation (see DependencyAggregation) it does
// nothing. It may run while Accept runs.
func (s *Store) BackfillDependencies(ctx context.Context) (int, error) {
	if !s.deps.aggregate {
		return 0, nil
	}
	total := 0
	var after int64
	first := true
	for {
		// The next traces, along index trace_id (trace_id, span_id, a_key).
		q := "SELECT DISTINCT trace_id FROM " + tableAnnotations
		var args []any
		if !first {
			q += " WHERE trace_id > ?"
			args = append(args, after)
		}
		q += " ORDER BY trace_id LIMIT ?"
		args = append(args, depChunk)
		lows, err := queryInts(ctx, s.db, q, args...)
		if err != nil {
			return total, fmt.Errorf("mysqlstore: backfilling dependencies: %w", err)
		}
		if len(lows) == 0 {
			break
		}
		traces := make(map[int64][]int64, len(lows))
		for _, low := range lows {
			traces[low] = []int64{0}
		}
		if err := retry.Tx(ctx, s.db, nil, s.writePolicy(), func(ctx context.Context, tx *sql.Tx) error {
			return s.relinkStored(ctx, tx, lows)
		}); err != nil {
			return total, fmt.Errorf("mysqlstore: backfilling dependencies: %w", err)
		}
		total += len(lows)
		after, first = lows[len(lows)-1], false
		if len(lows) < depChunk {
			break
		}
	}
	_, err := s.FoldDependencies(ctx)
	return total, err
}

// relinkStored relinks traces lows from the rows stored for them (their
// records and the span tables) in tx and records the differences.
func (s *Store) relinkStored(ctx context.Context, tx *sql.Tx, lows []int64) error {
	traces := make(map[int64]*depTrace, len(lows))
	for _, low := range lows {
		traces[low] = newDepTrace(low)
	}
	if err := s.readRecords(ctx, tx, lows, traces); err != nil {
		return err
	}
	if err := s.readSpanRows(ctx, tx, lows, traces); err != nil {
		return err
	}
	diff := newDepDiff()
	var recArgs []any
	for _, low := range lows {
		t := traces[low]
		rec := t.settle(diff)
		if string(rec) == string(t.raw) {
			continue
		}
		var day any
		if hour := recordHour(rec); hour >= 0 {
			day = dayOfHour(hour)
		}
		recArgs = append(recArgs, low, day, rec)
	}
	if n := len(recArgs) / 3; n > 0 {
		if _, err := tx.ExecContext(stmtname.With(ctx, stmtUpdateDepTraces),
			"INSERT INTO "+tableDepTraces+" (trace_id, day, links) VALUES "+values(3, n)+
				" ON DUPLICATE KEY UPDATE day = VALUES(day), links = VALUES(links)", recArgs...); err != nil {
			return fmt.Errorf("writing %s: %w", tableDepTraces, err)
		}
	}
	return s.applyDiff(stmtname.With(ctx, stmtDrainDepQueue), tx, diff)
}

func queryInts(ctx context.Context, db *sql.DB, q string, args ...any) ([]int64, error) {
	rows, err := db.QueryContext(stmtname.With(ctx, stmtSelectDepTraces), q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
