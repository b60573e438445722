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
// the ingest path, so that neither a Spark job (zipkin-dependencies) nor
// on-demand linking of every span in the window is needed.
//
// A trace counts once, on the UTC day of its earliest span timestamp
// (start_ts), with the links Zipkin's DependencyLinker finds in the whole
// trace — what the pre-aggregated variant of Zipkin's ITDependencies
// expects of the job. Each write transaction that stores spans of a trace
// recomputes that trace's links from every span stored for it and records
// the difference from what was counted before:
//
//   - zipkin_dependency_traces holds, per trace (low 64 bits of the ID, as
//     linking groups traces), what was counted: its day, its links and the
//     high halves of its ID seen so far. Its row is the trace's lock: the
//     transaction upserts it first (seq = seq + 1), so that concurrent
//     batches of one trace take turns, and on Galera they conflict at
//     certification and one is retried.
//   - zipkin_dependency_pending receives the differences (new links minus
//     the links counted before, per day, parent and child), keyed by trace
//     and seq; nothing else writes it, so the ingest path never updates a
//     hot row.
//   - Folding moves the pending rows into zipkin_dependencies (one
//     transaction: lock them, add their sums with an upsert, delete them,
//     delete rows whose count reached 0). The store folds after a write
//     once Options.DependencyFoldInterval has passed since the last fold,
//     and on FoldDependencies.
//
// A span stored twice changes nothing (the recomputed links are the same,
// the difference empty); a child stored before its parent is linked when
// the parent arrives (its trace is recomputed then); a span that moves a
// trace to an earlier day moves its links. GetDependencies sums
// zipkin_dependencies and the pending rows, so it answers with every
// committed batch; Zipkin's own readers of zipkin_dependencies see a batch
// after the next fold.
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
)` + tableOptions

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
)

// depChunk bounds the traces one aggregation statement names.
const depChunk = 100

// foldChunk bounds the pending rows one fold transaction moves.
const foldChunk = 5000

// defaultFoldInterval is Options.DependencyFoldInterval's zero value.
const defaultFoldInterval = time.Second

// DependencyAggregationDDL returns the CREATE TABLE statements of the
// dependency aggregator's two tables (zipkin_dependency_traces,
// zipkin_dependency_pending), which CreateSchema runs after the additions.
func DependencyAggregationDDL() []string { return []string{ddlDepTraces, ddlDepPending} }

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
	pending   bool          // zipkin_dependency_pending is usable: GetDependencies adds it
	aggregate bool          // both tables usable, zipkin_dependencies exists and aggregation is not disabled
	lastFold  atomic.Int64  // time.Now().UnixNano() of the last fold's start
	folding   chan struct{} // a one-slot semaphore: one fold at a time per Store
}

// detectAggregation probes the aggregator's tables. Aggregation runs when
// both exist, zipkin_dependencies has error_count and trace_id_high is
// present, and Options.DisableDependencyAggregation is false.
func (s *Store) detectAggregation(ctx context.Context) {
	s.deps.folding = make(chan struct{}, 1)
	traces := s.tableUsable(ctx, probeDepTraces)
	s.deps.traces = traces
	s.deps.pending = s.tableUsable(ctx, probeDepPending) && s.feat.dependencies
	s.deps.aggregate = traces && s.deps.pending && s.feat.errorCount && !s.opts.DisableDependencyAggregation
	switch {
	case s.opts.DisableDependencyAggregation:
		s.log.InfoContext(ctx, "mysqlstore: dependency aggregation disabled; zipkin_dependencies is read as it is and dependencies are linked from spans when it has no row")
	case !s.deps.aggregate:
		s.log.InfoContext(ctx, "mysqlstore: dependency aggregation off: its tables are missing (run with -init-schema to add them); dependencies are linked from spans on each request",
			tableDepTraces, traces, tableDepPending, s.deps.pending, "zipkin_dependencies.error_count", s.feat.errorCount)
	}
}

// DependencyAggregation reports whether the store keeps zipkin_dependencies
// current from its writes (see Options.DisableDependencyAggregation).
func (s *Store) DependencyAggregation() bool { return s.deps.aggregate }

// collectDeps records the traces of a batch's valid spans for aggregation:
// the low halves of their IDs (the aggregation key) and each high half seen.
func (s *Store) collectDeps(b *batch, sp *model.Span) {
	if !s.deps.aggregate {
		return
	}
	if b.deps == nil {
		b.deps = map[int64][]int64{}
	}
	low := int64(sp.TraceID.Low)
	high := int64(0)
	if s.feat.traceIDHigh {
		high = int64(sp.TraceID.High)
	}
	if !slices.Contains(b.deps[low], high) {
		b.deps[low] = append(b.deps[low], high)
	}
}

// depRecord is what zipkin_dependency_traces.links holds for one trace:
// the day its links were counted on ("" for none), the links, and the high
// halves of its ID stored so far.
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

func encodeRecord(day string, highs []int64, links []model.DependencyLink) []byte {
	r := depRecord{Day: day, Highs: highs}
	for _, l := range links {
		r.Links = append(r.Links, [4]any{l.Parent, l.Child, l.CallCount, l.ErrorCount})
	}
	b, _ := json.Marshal(r) // strings, numbers: cannot fail
	return b
}

// depDelta is one difference to add to a day's link.
type depDelta struct {
	day, parent, child string
	calls, errs        int64
}

// aggregateDeps recomputes the links of the batch's traces in the batch's
// transaction and records the differences (see the comment at the top of
// this file). It runs after the batch's rows are written, so the spans it
// reads include them; own says that the transaction wrote spans of every
// trace in traces (a batch's, not BackfillDependencies'), which its reads
// must then see (txLostError).
func (s *Store) aggregateDeps(ctx context.Context, tx *sql.Tx, traces map[int64][]int64, own bool) error {
	if len(traces) == 0 {
		return nil
	}
	lows := make([]int64, 0, len(traces))
	for low := range traces {
		lows = append(lows, low)
	}
	slices.Sort(lows) // one lock order for every batch
	for start := 0; start < len(lows); start += depChunk {
		if err := s.aggregateChunk(ctx, tx, lows[start:min(start+depChunk, len(lows))], traces, own); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) aggregateChunk(ctx context.Context, tx *sql.Tx, lows []int64, batchHighs map[int64][]int64, own bool) error {
	args := make([]any, len(lows))
	for i, low := range lows {
		args[i] = low
	}
	// 1. Lock: the trace rows, created when new, seq counted up.
	s.stats.statements.Add(1)
	if _, err := tx.ExecContext(stmtname.With(ctx, stmtLockDepTraces),
		"INSERT INTO "+tableDepTraces+" (trace_id) VALUES "+values(1, len(lows))+
			" ON DUPLICATE KEY UPDATE seq = seq + 1", args...); err != nil {
		return fmt.Errorf("locking %s: %w", tableDepTraces, err)
	}
	// 2. What was counted before. The first read of the transaction comes
	// after the locks, so its snapshot sees every batch that held them.
	type traceState struct {
		seq    int64
		raw    []byte
		old    depRecord
		highs  []int64
		links  []model.DependencyLink
		firstT int64 // earliest start_ts, 0 when none
		seen   bool  // step 3 read spans of it
	}
	state := make(map[int64]*traceState, len(lows))
	rows, err := tx.QueryContext(stmtname.With(ctx, stmtSelectDepTraces),
		"SELECT trace_id, seq, links FROM "+tableDepTraces+" WHERE trace_id IN ("+placeholders(len(lows))+")", args...)
	if err != nil {
		return fmt.Errorf("reading %s: %w", tableDepTraces, err)
	}
	for rows.Next() {
		var low, seq int64
		var raw []byte
		if err := rows.Scan(&low, &seq, &raw); err != nil {
			rows.Close()
			return fmt.Errorf("reading %s: %w", tableDepTraces, err)
		}
		rec, err := decodeRecord(raw)
		if err != nil {
			rows.Close()
			return err
		}
		st := &traceState{seq: seq, raw: slices.Clone(raw), old: rec}
		st.highs = slices.Clone(rec.Highs)
		for _, h := range batchHighs[low] {
			if !slices.Contains(st.highs, h) {
				st.highs = append(st.highs, h)
			}
		}
		slices.Sort(st.highs)
		state[low] = st
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return fmt.Errorf("reading %s: %w", tableDepTraces, err)
	}
	rows.Close()
	if len(state) != len(lows) {
		// Step 1 wrote a row for every trace in this transaction.
		return s.txLost(ctx, fmt.Sprintf("%s: %d of the %d rows it had just written", tableDepTraces, len(state), len(lows)))
	}
	// 3. Every span of those traces, linked per trace.
	var where strings.Builder
	var sargs []any
	sargs = append(sargs, dependencyKeys[:]...)
	if s.feat.traceIDHigh {
		for _, low := range lows {
			st := state[low]
			if st == nil {
				continue
			}
			for _, h := range st.highs {
				if len(sargs) > len(dependencyKeys) {
					where.WriteString(" OR ")
				}
				where.WriteString("(s.trace_id_high = ? AND s.trace_id = ?)")
				sargs = append(sargs, h, low)
			}
		}
	} else {
		where.WriteString("s.trace_id IN (" + placeholders(len(lows)) + ")")
		sargs = append(sargs, args...)
	}
	if len(sargs) == len(dependencyKeys) {
		return nil
	}
	high := "s.trace_id_high"
	if !s.feat.traceIDHigh {
		high = "0"
	}
	q := "SELECT DISTINCT " + high + ", s.trace_id, s.parent_id, s.id, a.a_key, a.a_type, a.endpoint_service_name, s.start_ts FROM " +
		tableSpans + " s LEFT JOIN " + tableAnnotations + " a ON s.trace_id = a.trace_id AND s.id = a.span_id" +
		" AND a.a_key IN (?, ?, ?, ?, ?, ?, ?, ?, ?) WHERE " + where.String() + " ORDER BY s.trace_id, s.id"
	s.stats.statements.Add(1)
	srows, err := tx.QueryContext(stmtname.With(ctx, stmtSelectTraceSpans), q, sargs...)
	if err != nil {
		return fmt.Errorf("reading the spans of %d traces: %w", len(lows), err)
	}
	err = scanDependencyRows(srows, true, func(trace model.TraceID, spans []model.Span, firstTs int64) {
		st := state[int64(trace.Low)]
		if st == nil {
			return
		}
		var l dependencyLinker
		l.putTrace(spans)
		st.links, st.firstT, st.seen = l.links, firstTs, true
	})
	srows.Close()
	if err != nil {
		return fmt.Errorf("reading the spans of %d traces: %w", len(lows), err)
	}
	if own {
		seen := 0
		for _, st := range state {
			if st.seen {
				seen++
			}
		}
		if seen != len(lows) {
			// The batch wrote spans of every trace in this transaction.
			return s.txLost(ctx, fmt.Sprintf("%s: spans of %d of the %d traces it had just written", tableSpans, seen, len(lows)))
		}
	}
	// 4. Differences, and the new records.
	var pendArgs, recArgs []any
	nPend, nRec := 0, 0
	for _, low := range lows {
		st := state[low]
		if st == nil {
			continue
		}
		day := ""
		if st.firstT > 0 {
			day = epochDay(floorDiv(st.firstT, 1000))
		}
		if day == "" {
			st.links = nil // a trace without a timestamp is on no day
		}
		deltas := diffLinks(st.old, day, st.links)
		for i, d := range deltas {
			pendArgs = append(pendArgs, low, st.seq, int64(i), d.day, d.parent, d.child, d.calls, d.errs)
			nPend++
		}
		raw := encodeRecord(day, st.highs, st.links)
		if string(raw) != string(st.raw) {
			var dayArg any
			if day != "" {
				dayArg = day
			}
			recArgs = append(recArgs, low, st.seq, dayArg, raw)
			nRec++
		}
	}
	const pendCols, recCols = 8, 4
	for start := 0; start < nPend; start += 500 {
		n := min(500, nPend-start)
		s.stats.statements.Add(1)
		if _, err := tx.ExecContext(stmtname.With(ctx, stmtInsertDepPending),
			"INSERT INTO "+tableDepPending+" (trace_id, seq, n, day, parent, child, call_count, error_count) VALUES "+
				values(pendCols, n), pendArgs[start*pendCols:(start+n)*pendCols]...); err != nil {
			return fmt.Errorf("writing %s: %w", tableDepPending, err)
		}
	}
	if nRec > 0 {
		s.stats.statements.Add(1)
		if _, err := tx.ExecContext(stmtname.With(ctx, stmtUpdateDepTraces),
			"INSERT INTO "+tableDepTraces+" (trace_id, seq, day, links) VALUES "+values(recCols, nRec)+
				" ON DUPLICATE KEY UPDATE day = VALUES(day), links = VALUES(links)", recArgs...); err != nil {
			return fmt.Errorf("writing %s: %w", tableDepTraces, err)
		}
	}
	return nil
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

// diffLinks returns what to add to zipkin_dependencies so that it counts
// links on day instead of what old counted, in a stable order.
func diffLinks(old depRecord, day string, links []model.DependencyLink) []depDelta {
	type key struct{ day, parent, child string }
	sum := map[key]*depDelta{}
	var order []key
	add := func(d, p, c string, calls, errs int64) {
		k := key{d, p, c}
		x := sum[k]
		if x == nil {
			x = &depDelta{day: d, parent: p, child: c}
			sum[k] = x
			order = append(order, k)
		}
		x.calls += calls
		x.errs += errs
	}
	if old.Day != "" {
		for _, l := range old.parse {
			add(old.Day, l.parent, l.child, -l.calls, -l.errs)
		}
	}
	if day != "" {
		for _, l := range links {
			add(day, l.Parent, l.Child, l.CallCount, l.ErrorCount)
		}
	}
	var out []depDelta
	for _, k := range order {
		if d := sum[k]; d.calls != 0 || d.errs != 0 {
			out = append(out, *d)
		}
	}
	return out
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// maybeFold folds the pending differences when Options.DependencyFoldInterval
// has passed since the last fold and no other fold of this Store runs. A
// failed fold is logged: the differences stay pending (GetDependencies
// counts them) and the next fold moves them.
func (s *Store) maybeFold(ctx context.Context) {
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
	if _, err := s.foldOnce(ctx); err != nil {
		s.log.WarnContext(ctx, "mysqlstore: folding zipkin_dependency_pending into zipkin_dependencies failed; the differences stay pending and are counted by GetDependencies",
			"err", err)
	}
}

// FoldDependencies moves every pending difference of the dependency
// aggregator into zipkin_dependencies, so that Zipkin's own readers of the
// table see every batch stored so far. It returns the number of pending
// rows it moved. The store also folds by itself after writes (see
// Options.DependencyFoldInterval); calling this is needed only before
// handing the table to another reader, or in tests. Without aggregation it
// does nothing.
func (s *Store) FoldDependencies(ctx context.Context) (int, error) {
	if !s.deps.aggregate {
		return 0, nil
	}
	s.deps.folding <- struct{}{}
	defer func() { <-s.deps.folding }()
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
// cutoff cut (epoch microseconds): their spans are gone or going, and the
// links they counted stay in zipkin_dependencies. Spans of such a trace
// arriving later are counted as a new trace. Without the table it does
// nothing.
func (s *Store) purgeDependencyTraces(ctx context.Context, cut int64, batch int) error {
	if !s.deps.traces {
		return nil
	}
	day := epochDay(floorDiv(cut, 1000) - dayMillis)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := s.db.ExecContext(stmtname.With(ctx, stmtPurgeDepTraces),
			"DELETE FROM "+tableDepTraces+" WHERE day < ? LIMIT ?", day, batch)
		if err != nil {
			return fmt.Errorf("mysqlstore: retention: deleting %s rows before %s: %w", tableDepTraces, day, err)
		}
		if n, err := res.RowsAffected(); err != nil || n < int64(batch) {
			return nil
		}
	}
}

// BackfillDependencies runs the aggregator over the traces already stored
// (in chunks of 100 traces, one transaction each, ordered by trace ID), so
// that days written before the aggregator's tables existed — or by a bulk
// loader that wrote the span tables directly — are counted as if their
// spans had arrived through Accept, and then folds. A trace already
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
		if s.feat.traceIDHigh { // their high halves
			largs := make([]any, len(lows))
			for i, l := range lows {
				largs[i] = l
			}
			rows, err := s.db.QueryContext(stmtname.With(ctx, stmtSelectDepTraces), "SELECT DISTINCT trace_id_high, trace_id FROM "+
				tableAnnotations+" WHERE trace_id IN ("+placeholders(len(lows))+")", largs...)
			if err != nil {
				return total, fmt.Errorf("mysqlstore: backfilling dependencies: %w", err)
			}
			clear(traces)
			for rows.Next() {
				var h, low int64
				if err := rows.Scan(&h, &low); err != nil {
					rows.Close()
					return total, fmt.Errorf("mysqlstore: backfilling dependencies: %w", err)
				}
				traces[low] = append(traces[low], h)
			}
			err = rows.Err()
			rows.Close()
			if err != nil {
				return total, fmt.Errorf("mysqlstore: backfilling dependencies: %w", err)
			}
		}
		if err := retry.Tx(ctx, s.db, nil, s.writePolicy(), func(ctx context.Context, tx *sql.Tx) error {
			return s.aggregateDeps(ctx, tx, traces, false)
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
