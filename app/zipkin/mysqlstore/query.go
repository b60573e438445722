package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	v1 "github.com/sqlpool/sqlpool/app/zipkin/model/v1"
	"github.com/sqlpool/sqlpool/stmtname"
)

// traceKey is a trace ID as stored: both halves as unsigned values.
type traceKey struct{ high, low uint64 }

func keyOf(id model.TraceID) traceKey { return traceKey{id.High, id.Low} }

// strict reports whether trace IDs are matched on all 128 bits: Zipkin's
// STRICT_TRACE_ID, on a schema that stores the high bits. A schema without
// trace_id_high stores only the low 64 bits, so lookups there match those
// (Zipkin would filter every span out of a 128-bit lookup instead).
func (s *Store) strict() bool {
	return !s.opts.DisableStrictTraceID && s.feat.traceIDHigh
}

// GetTraces returns the traces matching q, newest first (by the latest
// span timestamp in the window), at most q.Limit of them, each as the spans
// stored for it, including spans outside the window. q must be normalised
// (QueryRequest.Normalize); an invalid request is a *model.QueryError. As in
// Zipkin, every condition of q must hold on one span: its local service,
// remote service, name, duration and every annotation-query term. A span
// without a timestamp never qualifies a trace, nor does a span without any
// annotation row (a span with no endpoint, annotation or tag). With
// DisableSearch it returns nothing. A remote-service query on a schema
// without zipkin_spans.remote_service_name is a *model.QueryError, as in
// Zipkin.
func (s *Store) GetTraces(ctx context.Context, q model.QueryRequest) ([][]model.Span, error) {
	if err := q.Normalize(); err != nil {
		return nil, err
	}
	if s.opts.DisableSearch {
		return nil, nil
	}
	if q.RemoteServiceName != "" && !s.feat.remoteServiceName {
		return nil, &model.QueryError{Msg: "remoteService=" + q.RemoteServiceName +
			" unsupported due to missing column " + tableSpans + ".remote_service_name"}
	}
	keys, err := s.selectTraceIDs(ctx, &q)
	if err != nil || len(keys) == 0 {
		return nil, err
	}
	strict := s.strict()
	traces, err := s.fetchTraces(ctx, keys, strict)
	if err != nil {
		return nil, err
	}
	if strict {
		traces = refilterClashes(traces, &q)
	}
	return traces, nil
}

// selectTraceIDs runs getTraces' first step and returns the matching trace
// IDs, newest first.
func (s *Store) selectTraceIDs(ctx context.Context, q *model.QueryRequest) ([]traceKey, error) {
	if keys, ok, err := s.fastTraceIDs(ctx, q); ok {
		return keys, err
	}
	if keys, ok, err := s.fastTagTraceIDs(ctx, q); ok {
		return keys, err
	}
	high := s.feat.traceIDHigh
	var b strings.Builder
	args := make([]any, 0, 8+3*len(q.AnnotationQuery))
	if high {
		b.WriteString(tidSelect)
	} else {
		b.WriteString(tidSelectNoHigh)
	}
	writeJoin := func(alias string) {
		b.WriteString(tidJoin)
		b.WriteString(alias)
		if high {
			b.WriteString(tidOn1)
			b.WriteString(alias)
			b.WriteString(tidOn2)
		} else {
			b.WriteString(tidOnNoHigh)
		}
		b.WriteString(alias)
		b.WriteString(tidOn3)
		b.WriteString(alias)
		b.WriteString(tidOn4)
	}
	writeJoin("a")
	// Terms in key order, so that one query always has one text.
	terms := make([]string, 0, len(q.AnnotationQuery))
	for k := range q.AnnotationQuery {
		terms = append(terms, k)
	}
	sort.Strings(terms)
	if len(terms) > len(annotationAliases) {
		terms = terms[:len(annotationAliases)]
	}
	for i, key := range terms {
		alias := annotationAliases[i]
		writeJoin(alias)
		b.WriteString(" AND ")
		b.WriteString(alias)
		b.WriteString(tidKey)
		args = append(args, key)
		if v := q.AnnotationQuery[key]; v != "" {
			b.WriteString(" AND ")
			b.WriteString(alias)
			b.WriteString(tidTypeValue1)
			b.WriteString(alias)
			b.WriteString(tidTypeValue2)
			args = append(args, []byte(v))
		}
		if q.ServiceName != "" {
			b.WriteString(" AND ")
			b.WriteString(alias)
			b.WriteString(tidService)
			args = append(args, q.ServiceName)
		}
	}
	begin, end := q.WindowMicros()
	b.WriteString(tidWhere)
	args = append(args, begin, end)
	if q.ServiceName != "" {
		b.WriteString(tidLocalService)
		args = append(args, q.ServiceName)
	}
	args = appendSpanFilters(&b, args, q)
	if high {
		b.WriteString(tidTail)
	} else {
		b.WriteString(tidTailNoHigh)
	}
	args = append(args, q.Limit)

	rows, err := s.read.QueryContext(stmtname.With(ctx, stmtSelectTraceIDs), b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: select trace ids: %w", err)
	}
	defer rows.Close()
	var keys []traceKey
	for rows.Next() {
		var hi, lo int64
		var maxTs sql.NullInt64
		if err := rows.Scan(&hi, &lo, &maxTs); err != nil {
			return nil, fmt.Errorf("mysqlstore: select trace ids: %w", err)
		}
		keys = append(keys, traceKey{uint64(hi), uint64(lo)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysqlstore: select trace ids: %w", err)
	}
	return keys, nil
}

// refilterClashes drops, among traces whose IDs share their low 64 bits,
// those that do not match q as a whole trace (Zipkin's QueryRequest.test):
// with strict trace IDs such traces are distinct, and the SQL alone cannot
// tell which of them matched.
func refilterClashes(traces [][]model.Span, q *model.QueryRequest) [][]model.Span {
	lows := make(map[uint64]int, len(traces))
	for _, t := range traces {
		lows[t[0].TraceID.Low]++
	}
	out := traces[:0]
	for _, t := range traces {
		if lows[t[0].TraceID.Low] > 1 && !q.Test(t) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// GetTrace returns the spans stored for one trace ID. With strict trace IDs
// (the default) a 64-bit ID finds only spans stored with a 64-bit ID and a
// 128-bit ID only spans with all 128 bits; otherwise the low 64 bits decide
// and a trace reported with both lengths comes back whole. It returns nil
// when nothing is stored.
func (s *Store) GetTrace(ctx context.Context, id model.TraceID) ([]model.Span, error) {
	if id.IsZero() {
		return nil, nil
	}
	traces, err := s.fetchTraces(ctx, []traceKey{keyOf(id)}, s.strict())
	if err != nil || len(traces) == 0 {
		return nil, err
	}
	return traces[0], nil
}

// GetTracesByIDs returns the traces found among ids (duplicates ignored),
// in the order of ids, with GetTrace's matching rules.
func (s *Store) GetTracesByIDs(ctx context.Context, ids []model.TraceID) ([][]model.Span, error) {
	strict := s.strict()
	seen := make(map[traceKey]bool, len(ids))
	keys := make([]traceKey, 0, len(ids))
	for _, id := range ids {
		if id.IsZero() {
			continue
		}
		k := keyOf(id)
		if !strict {
			k.high = 0
		}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	return s.fetchTraces(ctx, keys, strict)
}

// fetchTraces reads the spans and annotations of the given traces and
// returns them as v2 spans grouped by trace, in the order of keys (traces
// with nothing stored are left out). byPair matches all 128 bits of each
// ID; otherwise the low 64 bits, and traces are grouped on them.
func (s *Store) fetchTraces(ctx context.Context, keys []traceKey, byPair bool) ([][]model.Span, error) {
	spans, err := s.readSpans(ctx, keys, byPair)
	if err != nil {
		return nil, err
	}
	group := func(id model.TraceID) traceKey {
		if byPair {
			return keyOf(id)
		}
		return traceKey{low: id.Low}
	}
	byTrace := make(map[traceKey][]model.Span, len(keys))
	for _, sp := range spans {
		k := group(sp.TraceID)
		byTrace[k] = append(byTrace[k], sp)
	}
	out := make([][]model.Span, 0, len(byTrace))
	for _, k := range keys {
		if !byPair {
			k.high = 0
		}
		if t, ok := byTrace[k]; ok {
			out = append(out, t)
			delete(byTrace, k)
		}
	}
	return out, nil
}

// spanKey identifies a stored span row.
type spanKey struct {
	trace traceKey
	id    uint64
}

// readSpans reads the span rows and annotation rows of the traces in keys
// (in chunks of maxIn) and converts them to v2 spans.
func (s *Store) readSpans(ctx context.Context, keys []traceKey, byPair bool) ([]model.Span, error) {
	var rows []*v1.Span
	index := make(map[spanKey]*v1.Span)
	for start := 0; start < len(keys); start += maxIn {
		chunk := keys[start:min(start+maxIn, len(keys))]
		n := len(rows)
		var err error
		rows, err = s.selectSpanRows(ctx, chunk, byPair, rows)
		if err != nil {
			return nil, err
		}
		if len(rows) == n {
			continue
		}
		for _, r := range rows[n:] {
			index[spanKey{keyOf(r.TraceID), uint64(r.ID)}] = r
		}
		if err := s.selectAnnotationRows(ctx, chunk, byPair, index); err != nil {
			return nil, err
		}
	}
	var conv v1.Converter
	out := make([]model.Span, 0, len(rows))
	for _, r := range rows {
		out = conv.Convert(r, out)
	}
	return out, nil
}

func (s *Store) selectSpanRows(ctx context.Context, keys []traceKey, byPair bool, out []*v1.Span) ([]*v1.Span, error) {
	cond, args := traceIDCondition(keys, byPair)
	query := "SELECT " + s.spanColumns() + " FROM " + tableSpans + " WHERE " + cond
	rows, err := s.read.QueryContext(stmtname.With(ctx, stmtSelectSpans), query, args...)
	if err != nil {
		return out, fmt.Errorf("mysqlstore: select spans: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			hi, lo, id      int64
			name            sql.NullString
			parent, ts, dur sql.NullInt64
			debug           any
		)
		if err := rows.Scan(&hi, &lo, &id, &name, &parent, &debug, &ts, &dur); err != nil {
			return out, fmt.Errorf("mysqlstore: select spans: %w", err)
		}
		out = append(out, &v1.Span{
			TraceID:   model.TraceID{High: uint64(hi), Low: uint64(lo)},
			ID:        model.ID(uint64(id)),
			ParentID:  model.ID(uint64(parent.Int64)),
			Name:      name.String,
			Timestamp: max(ts.Int64, 0),
			Duration:  max(dur.Int64, 0),
			Debug:     truthy(debug),
		})
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("mysqlstore: select spans: %w", err)
	}
	return out, nil
}

// truthy decodes a BIT(1) value as the driver returns it: bytes (MySQL's
// BIT encoding) or an integer.
func truthy(v any) bool {
	switch x := v.(type) {
	case []byte:
		for _, c := range x {
			if c != 0 && c != '0' {
				return true
			}
		}
	case int64:
		return x != 0
	case uint64:
		return x != 0
	case bool:
		return x
	case string:
		return x != "" && x != "0" && x != "\x00"
	}
	return false
}

// selectAnnotationRows reads the annotation rows of the traces in keys, in
// Zipkin's order (timestamp, then key), onto the spans of index. Rows of
// spans not read (a trace that clashes on its low bits under a non-strict
// lookup is read whole, so none are lost) are ignored, as in Zipkin.
func (s *Store) selectAnnotationRows(ctx context.Context, keys []traceKey, byPair bool, index map[spanKey]*v1.Span) error {
	cond, args := traceIDCondition(keys, byPair)
	query := "SELECT " + s.annotationColumns() + " FROM " + tableAnnotations + " WHERE " + cond +
		" ORDER BY a_timestamp, a_key"
	rows, err := s.read.QueryContext(stmtname.With(ctx, stmtSelectAnnotations), query, args...)
	if err != nil {
		return fmt.Errorf("mysqlstore: select annotations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			hi, lo, spanID int64
			r              annotationRow
			ts, port, ipv4 sql.NullInt64
			svc            sql.NullString
			aType          int64
		)
		if err := rows.Scan(&hi, &lo, &spanID, &r.key, &r.value, &aType, &ts, &ipv4, &r.ipv6, &port, &svc); err != nil {
			return fmt.Errorf("mysqlstore: select annotations: %w", err)
		}
		sp := index[spanKey{traceKey{uint64(hi), uint64(lo)}, uint64(spanID)}]
		if sp == nil {
			continue
		}
		r.aType = int(aType)
		r.ts = ts.Int64
		r.port = port.Int64
		r.ipv4, r.ipv4Valid = int32(ipv4.Int64), ipv4.Valid
		r.serviceName = svc.String
		addRow(sp, &r)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("mysqlstore: select annotations: %w", err)
	}
	return nil
}
