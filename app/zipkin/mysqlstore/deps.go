package mysqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/stmtname"
)

const dayMillis = 86_400_000

// GetDependencies returns the service graph of the window [endTs-lookback,
// endTs] (epoch milliseconds), each parent→child pair once with its call
// and error counts summed.
//
// With the store's dependency aggregator (deps_aggregate.go) a trace
// counts in the hour of its earliest span timestamp, and the window is
// taken in whole hours: from the hour of endTs-lookback to the hour before
// endTs when endTs is on an hour boundary, else the hour of endTs. A
// window on hour boundaries therefore gives exactly the links of the
// traces that start in it. Whole UTC days in the window are read from
// zipkin_dependencies (so rows written by Zipkin's zipkin-dependencies job
// count), the hours of a partial day from zipkin_dependency_hours (or from
// the day's zipkin_dependencies rows, rounded out to the day, when that
// table has no row for the day); writes the aggregator has not drained yet
// are added in the same snapshot, so a read right after a write sees it.
//
// Without the aggregator it reads zipkin_dependencies (written by Zipkin's
// zipkin-dependencies job or any other), summing the rows of every UTC day
// the window touches, from the day of endTs-lookback to the day of endTs
// inclusive. In both cases, when there is no row for the window, the links
// are computed on the fly from the spans of every trace with a span in the
// window, with Zipkin's DependencyLinker rules (the whole trace is used,
// including spans outside the window). This per-window fallback differs
// from Zipkin, which decides once per process whether the table has any
// row at all.
//
// endTs <= 0 and lookback <= 0 are *model.QueryError "endTs <= 0" and
// "lookback <= 0".
func (s *Store) GetDependencies(ctx context.Context, endTs, lookback int64) ([]model.DependencyLink, error) {
	if endTs <= 0 {
		return nil, &model.QueryError{Msg: "endTs <= 0"}
	}
	if lookback <= 0 {
		return nil, &model.QueryError{Msg: "lookback <= 0"}
	}
	if s.deps.aggregate {
		links, err := s.aggregatedDependencies(ctx, endTs, lookback)
		if err != nil || len(links) > 0 {
			return links, err
		}
	} else if s.feat.dependencies {
		links, err := s.selectDependencies(ctx, endTs, lookback)
		if err != nil || len(links) > 0 {
			return links, err
		}
	}
	return s.linkDependencies(ctx, endTs, lookback)
}

// Bounds of the DATE type: days outside are clamped to them, so that an
// endTs past year 9999 (or a lookback reaching before year 1000) selects
// the days that can exist instead of failing with "Incorrect datetime
// value" (go-mysql-server) or matching nothing by accident.
const (
	minDateMillis = -30_610_224_000_000 // 1000-01-01T00:00:00Z
	maxDateMillis = 253_402_214_400_000 // 9999-12-31T00:00:00Z
)

// epochDay formats the UTC day of an epoch-millisecond instant as a DATE,
// clamped to 1000-01-01 … 9999-12-31.
func epochDay(ms int64) string {
	ms = min(max(ms, minDateMillis), maxDateMillis)
	day := ms - ((ms%dayMillis)+dayMillis)%dayMillis
	return time.UnixMilli(day).UTC().Format(time.DateOnly)
}

func (s *Store) selectDependencies(ctx context.Context, endTs, lookback int64) ([]model.DependencyLink, error) {
	q := sqlDependencies
	if !s.feat.errorCount {
		q = sqlDependenciesNoErrors
	}
	rows, err := s.read.QueryContext(stmtname.With(ctx, stmtSelectDependencies), q,
		epochDay(endTs-lookback), epochDay(endTs))
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: select dependencies: %w", err)
	}
	defer rows.Close()
	var links []model.DependencyLink
	for rows.Next() {
		var l model.DependencyLink
		var calls, errs sql.NullInt64
		if err := rows.Scan(&l.Parent, &l.Child, &calls, &errs); err != nil {
			return nil, fmt.Errorf("mysqlstore: select dependencies: %w", err)
		}
		l.CallCount, l.ErrorCount = calls.Int64, errs.Int64
		links = append(links, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysqlstore: select dependencies: %w", err)
	}
	if s.deps.pending {
		pending, err := s.selectPending(ctx, epochDay(endTs-lookback), epochDay(endTs))
		if err != nil {
			return nil, err
		}
		links = append(links, pending...)
	}
	merged := mergeLinks(links)
	out := merged[:0]
	for _, l := range merged {
		if l.CallCount > 0 { // a link whose differences cancelled out
			out = append(out, l)
		}
	}
	return out, nil
}

// hourMillis is one hour in milliseconds.
const hourMillis = 3_600_000

// WindowHours returns the epoch hours a dependency window [endTs-lookback,
// endTs] (epoch milliseconds) covers: from the hour of endTs-lookback to
// the hour before endTs when endTs is on an hour boundary, else the hour of
// endTs. A trace counts in the window when the hour of its earliest span
// timestamp is in [first, last]. The memory store uses the same rule.
func WindowHours(endTs, lookback int64) (first, last int64) {
	first = floorDiv(endTs-lookback, hourMillis)
	last = max(floorDiv(endTs-1, hourMillis), first)
	return first, last
}

// TraceHour returns the epoch hour a trace counts in: that of its earliest
// span timestamp (epoch microseconds, 0 for none); ok is false when no
// span has a timestamp (the trace counts in no window).
func TraceHour(spans []model.Span) (hour int64, ok bool) {
	first := int64(0)
	for i := range spans {
		if ts := spans[i].Timestamp; ts > 0 && (first == 0 || ts < first) {
			first = ts
		}
	}
	if first == 0 {
		return 0, false
	}
	return hourOf(first), true
}

// aggregatedDependencies answers GetDependencies from the aggregator's
// tables and queue, in one snapshot.
func (s *Store) aggregatedDependencies(ctx context.Context, endTs, lookback int64) ([]model.DependencyLink, error) {
	h0, h1 := WindowHours(endTs, lookback)
	// Clamp to the days DATE can hold.
	h0 = max(h0, floorDiv(minDateMillis, hourMillis))
	h1 = min(h1, floorDiv(maxDateMillis, hourMillis)+23)
	if h1 < h0 {
		return nil, nil
	}
	d0, d1 := dayOfHour(h0), dayOfHour(h1)
	dayFirstHour := func(h int64) int64 { return h - ((h%24)+24)%24 }
	full := func(day string, h int64) bool { // h is an hour of day
		start := dayFirstHour(h)
		return start >= h0 && start+23 <= h1
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: select dependencies: %w", err)
	}
	defer tx.Rollback()
	type pair = [2]string
	dayLinks := map[string]map[pair]*[2]int64{}
	addTo := func(m map[string]map[pair]*[2]int64, day, p, c string, calls, errs int64) {
		x := m[day]
		if x == nil {
			x = map[pair]*[2]int64{}
			m[day] = x
		}
		v := x[pair{p, c}]
		if v == nil {
			v = new([2]int64)
			x[pair{p, c}] = v
		}
		v[0] += calls
		v[1] += errs
	}
	rows, err := tx.QueryContext(stmtname.With(ctx, stmtSelectDependencies),
		"SELECT day, parent, child, call_count, error_count FROM "+tableDependencies+" WHERE day BETWEEN ? AND ?", d0, d1)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: select dependencies: %w", err)
	}
	for rows.Next() {
		var day any
		var p, c string
		var calls, errs sql.NullInt64
		if err := rows.Scan(&day, &p, &c, &calls, &errs); err != nil {
			rows.Close()
			return nil, fmt.Errorf("mysqlstore: select dependencies: %w", err)
		}
		d, err := dayString(day)
		if err != nil {
			rows.Close()
			return nil, err
		}
		addTo(dayLinks, d, p, c, calls.Int64, errs.Int64)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: select dependencies: %w", err)
	}
	if s.deps.pending {
		rows, err := tx.QueryContext(stmtname.With(ctx, stmtSelectDepPending),
			"SELECT day, parent, child, call_count, error_count FROM "+tableDepPending+" WHERE day BETWEEN ? AND ?", d0, d1)
		if err != nil {
			return nil, fmt.Errorf("mysqlstore: select pending dependencies: %w", err)
		}
		for rows.Next() {
			var day any
			var p, c string
			var calls, errs int64
			if err := rows.Scan(&day, &p, &c, &calls, &errs); err != nil {
				rows.Close()
				return nil, fmt.Errorf("mysqlstore: select pending dependencies: %w", err)
			}
			d, err := dayString(day)
			if err != nil {
				rows.Close()
				return nil, err
			}
			addTo(dayLinks, d, p, c, calls, errs)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("mysqlstore: select pending dependencies: %w", err)
		}
	}
	// The partial days (at most the first and the last): their hours.
	hourLinks := map[string]map[pair]*[2]int64{} // per day, the hours in the window
	hasHours := map[string]bool{}
	var partial []int64 // an hour of each partial day
	if !full(d0, h0) {
		partial = append(partial, h0)
	}
	if d1 != d0 && !full(d1, h1) {
		partial = append(partial, h1)
	}
	if s.deps.hours {
		for _, h := range partial {
			start := dayFirstHour(h)
			rows, err := tx.QueryContext(stmtname.With(ctx, stmtSelectDependencies),
				"SELECT hour, parent, child, call_count, error_count FROM "+tableDepHours+" WHERE hour BETWEEN ? AND ?", start, start+23)
			if err != nil {
				return nil, fmt.Errorf("mysqlstore: select dependency hours: %w", err)
			}
			day := dayOfHour(h)
			for rows.Next() {
				var hour, calls, errs int64
				var p, c string
				if err := rows.Scan(&hour, &p, &c, &calls, &errs); err != nil {
					rows.Close()
					return nil, fmt.Errorf("mysqlstore: select dependency hours: %w", err)
				}
				hasHours[day] = true
				if hour >= h0 && hour <= h1 {
					addTo(hourLinks, day, p, c, calls, errs)
				}
			}
			err = rows.Err()
			rows.Close()
			if err != nil {
				return nil, fmt.Errorf("mysqlstore: select dependency hours: %w", err)
			}
		}
	}
	// Writes not drained yet.
	diff, err := s.queuedDiff(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: select dependencies: %w", err)
	}
	for k, v := range diff.days {
		if k.day >= d0 && k.day <= d1 {
			addTo(dayLinks, k.day, k.parent, k.child, v[0], v[1])
		}
	}
	if s.deps.hours {
		for k, v := range diff.hours {
			day := dayOfHour(k.hour)
			if slices.ContainsFunc(partial, func(h int64) bool { return dayOfHour(h) == day }) {
				hasHours[day] = true
				if k.hour >= h0 && k.hour <= h1 {
					addTo(hourLinks, day, k.parent, k.child, v[0], v[1])
				}
			}
		}
	}
	for _, h := range partial {
		day := dayOfHour(h)
		if hasHours[day] {
			dayLinks[day] = hourLinks[day]
		}
	}
	var links []model.DependencyLink
	days := make([]string, 0, len(dayLinks))
	for d := range dayLinks {
		days = append(days, d)
	}
	slices.Sort(days)
	for _, d := range days {
		pairs := make([]pair, 0, len(dayLinks[d]))
		for p := range dayLinks[d] {
			pairs = append(pairs, p)
		}
		slices.SortFunc(pairs, func(a, b pair) int { return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1])) })
		for _, p := range pairs {
			v := dayLinks[d][p]
			links = append(links, model.DependencyLink{Parent: p[0], Child: p[1], CallCount: v[0], ErrorCount: v[1]})
		}
	}
	merged := mergeLinks(links)
	out := merged[:0]
	for _, l := range merged {
		if l.CallCount > 0 { // a link whose differences cancelled out
			out = append(out, l)
		}
	}
	return out, nil
}

// depSpan collects the service names a span's annotation rows carry, per
// key, as Zipkin's DependencyLinkV2SpanIterator does.
type depSpan struct {
	id, parent                     model.ID
	lc, ca, cs, ma, mr, ms, sa, sr string
	isError                        bool
}

// span turns the collected names into the minimal v2 span the linker
// needs: a server (sr; remote ca), a client-ish span (sa; local ca or lc,
// kind CLIENT only with cs), a server known from cs alone, a consumer (mr)
// or a producer (ms), each with the broker (ma) as remote.
func (d *depSpan) span(trace model.TraceID) model.Span {
	ca := d.ca
	if ca == "" { // the client address is more authoritative than cs
		ca = d.cs
	}
	if d.sa != "" && d.sa == ca { // Finagle names both sides of a socket alike
		ca = ""
	}
	sp := model.Span{TraceID: trace, ID: d.id, ParentID: d.parent}
	if d.isError {
		sp.Tags = map[string]string{"error": ""}
	}
	switch {
	case d.sr != "":
		sp.Kind, sp.LocalEndpoint, sp.RemoteEndpoint = model.KindServer, ep(d.sr), ep(ca)
	case d.sa != "":
		local := ca
		if local == "" { // no kind: the local name is "lc", the remote "sa"
			local = d.lc
		}
		if d.cs != "" {
			sp.Kind = model.KindClient
		}
		sp.LocalEndpoint, sp.RemoteEndpoint = ep(local), ep(d.sa)
	case d.cs != "":
		sp.Kind, sp.LocalEndpoint = model.KindServer, ep(ca)
	case d.mr != "":
		sp.Kind, sp.LocalEndpoint, sp.RemoteEndpoint = model.KindConsumer, ep(d.mr), ep(d.ma)
	case d.ms != "":
		sp.Kind, sp.LocalEndpoint, sp.RemoteEndpoint = model.KindProducer, ep(d.ms), ep(d.ma)
	}
	if sp.ParentID == sp.ID {
		sp.ParentID = 0
	}
	return sp
}

func ep(service string) *model.Endpoint {
	if service == "" {
		return nil
	}
	return &model.Endpoint{ServiceName: service}
}

// linkDependencies computes links on the fly: it streams the dependency
// rows of every trace with a span in the window, ordered by trace and span,
// and feeds each trace to the linker as soon as it is complete.
func (s *Store) linkDependencies(ctx context.Context, endTs, lookback int64) ([]model.DependencyLink, error) {
	q := sqlDependencySpans
	if !s.feat.traceIDHigh {
		q = sqlDependencySpansNoHigh
	}
	begin := model.MillisToMicros(max(endTs-lookback, 0))
	args := append(dependencyKeys[:len(dependencyKeys):len(dependencyKeys)], begin, model.MillisToMicros(endTs))
	rows, err := s.read.QueryContext(stmtname.With(ctx, stmtSelectDependencySpan), q, args...)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: select dependency spans: %w", err)
	}
	defer rows.Close()
	var linker dependencyLinker
	err = scanDependencyRows(rows, false, func(_ model.TraceID, spans []model.Span, _ int64) {
		linker.putTrace(spans)
	})
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: select dependency spans: %w", err)
	}
	return linker.links, nil
}

// scanDependencyRows reads dependency rows (trace_id_high, trace_id,
// parent_id, id, a_key, a_type, endpoint_service_name, and start_ts when
// withTs) ordered by trace and span, and calls put with the minimal spans of
// each trace (grouped on the low 64 bits of its ID) and, with withTs, the
// earliest start_ts of its spans (0 when none has one). The spans slice is
// reused after put returns.
func scanDependencyRows(rows *sql.Rows, withTs bool, put func(trace model.TraceID, spans []model.Span, firstTs int64)) error {
	var (
		trace   model.TraceID
		spans   []model.Span
		cur     *depSpan
		started bool
		firstTs int64
	)
	flushSpan := func() {
		if cur != nil {
			spans = append(spans, cur.span(trace))
			cur = nil
		}
	}
	flushTrace := func() {
		flushSpan()
		put(trace, spans, firstTs)
		spans = spans[:0]
		firstTs = 0
	}
	for rows.Next() {
		var (
			hi, lo, id int64
			parent     sql.NullInt64
			key, svc   sql.NullString
			aType      sql.NullInt64
			ts         sql.NullInt64
		)
		dest := []any{&hi, &lo, &parent, &id, &key, &aType, &svc}
		if withTs {
			dest = append(dest, &ts)
		}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		// Traces are grouped on the low 64 bits only, so that 64- and
		// 128-bit halves of one trace are one trace (never counted twice).
		if !started || uint64(lo) != trace.Low {
			if started {
				flushTrace()
			}
			started = true
			trace = model.TraceID{High: uint64(hi), Low: uint64(lo)}
		}
		if ts.Valid && ts.Int64 > 0 && (firstTs == 0 || ts.Int64 < firstTs) {
			firstTs = ts.Int64
		}
		if cur == nil || uint64(id) != uint64(cur.id) {
			flushSpan()
			cur = &depSpan{id: model.ID(uint64(id)), parent: model.ID(uint64(parent.Int64))}
		}
		if !key.Valid || svc.String == "" {
			continue // neither client nor server
		}
		switch key.String {
		case "lc":
			cur.lc = svc.String
		case "ca":
			cur.ca = svc.String
		case "cs":
			cur.cs = svc.String
		case "ma":
			cur.ma = svc.String
		case "mr":
			cur.mr = svc.String
		case "ms":
			cur.ms = svc.String
		case "sa":
			cur.sa = svc.String
		case "sr":
			cur.sr = svc.String
		case "error":
			// A span is in error when it has the tag, not an annotation.
			if aType.Int64 == aTypeString {
				cur.isError = true
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if started {
		flushTrace()
	}
	return nil
}
