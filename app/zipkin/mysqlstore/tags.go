package mysqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/stmtname"
)

// The tag-search addition: zipkin_tags, one optional table that makes
// getTraces with an annotationQuery (Zipkin's tag and annotation search:
// "error", "http.method=GET") read the newest matching spans along a key
// instead of joining zipkin_annotations over the whole window.
//
// Each span writes, next to its zipkin_annotations rows:
//
//   - a key row (kind 0, empty a_value) for each distinct annotation value and
//     tag key: what the term "key" matches (a zipkin_annotations row with
//     that a_key, of any type);
//   - a value row (kind 1) for each tag with a non-empty value: what the
//     term "key=value" matches (a_type 6 and that a_value). A value longer
//     than maxTagValue bytes is stored as its first maxTagValue+1 bytes, so
//     that it never equals a value the table is searched for; a longer
//     search value runs Zipkin's query.
//
// Keys Zipkin writes itself are not indexed: the core annotations (cs, cr,
// sr, ss, ms, ws, mr, wr), the address rows (sa, ca, ma, whose endpoint is
// the remote one) and the "lc" marker (reservedTagKey). A term on such a
// key, or on a key that is not plain ASCII (utf8_general_ci folds accents,
// so "çs" matches "cs"), is answered by Zipkin's query joins. Each row
// carries the span's local service (the empty string without one), its
// timestamp (-1 without one: never in a window) and its IDs; the key is
// (kind, a_key, a_value, start_ts, trace ID, span ID, service), so a term
// reads its newest spans backwards along the key and stops after limit
// traces. GetValues (autocomplete) reads the value rows of its key.
const (
	tableTags = "zipkin_tags"

	// tagIndexPrefix is the a_value prefix of index a_key_value, in bytes.
	tagIndexPrefix = "64"

	ddlTags = "CREATE TABLE IF NOT EXISTS " + tableTags + ` (
  kind TINYINT NOT NULL,
  a_key VARCHAR(255) NOT NULL,
  a_value VARBINARY(256) NOT NULL,
  start_ts BIGINT NOT NULL,
  trace_id_high BIGINT NOT NULL DEFAULT 0,
  trace_id BIGINT NOT NULL,
  span_id BIGINT NOT NULL,
  service_name VARCHAR(255) NOT NULL,
  PRIMARY KEY (kind, a_key, a_value, start_ts, trace_id_high, trace_id, span_id, service_name)
)` + tableOptions

	probeTags = "SELECT span_id FROM " + tableTags + " LIMIT 1"

	stmtInsertTags        = "insert zipkin_tags"
	stmtSelectTagTraceIDs = "select trace ids (zipkin_tags)"

	tagKindKey   = 0
	tagKindValue = 1

	// maxTagValue is the longest tag value zipkin_tags matches exactly.
	maxTagValue = 255

	tagCols = 8

	// noTimestamp is the start_ts of the rows of a span without a
	// timestamp: outside every window (windows start at 0 or later), and
	// still found by the autocomplete values.
	noTimestamp = -1
)

// reservedKeys are the zipkin_annotations keys zipkin_tags leaves out.
var reservedKeys = map[string]bool{
	"cs": true, "cr": true, "sr": true, "ss": true, "ms": true, "ws": true, "mr": true, "wr": true,
	"sa": true, "ca": true, "ma": true, "lc": true,
}

// reservedTagKey reports whether zipkin_tags leaves key out: a core
// annotation, address or "lc" key in any case, with any trailing spaces
// (utf8_general_ci compares case-insensitively and pads with spaces).
func reservedTagKey(key string) bool {
	return reservedKeys[strings.ToLower(strings.TrimRight(key, " "))]
}

// tagSearchable reports whether the term key[=value] can be read from
// zipkin_tags: a plain-ASCII key that is not reserved and, if a value is
// given, a value of at most maxTagValue bytes.
func tagSearchable(key, value string) bool {
	if key == "" || len(value) > maxTagValue || reservedTagKey(key) {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] >= 0x80 {
			return false
		}
	}
	return true
}

type tagRow struct {
	kind              int8
	key, value        string
	ts, high, low, id int64
	service           string
}

// collectTags adds the zipkin_tags rows of one valid span to rows. With
// the annotation indexes (annIndex) tag search reads zipkin_annotations,
// and zipkin_tags keeps only the value rows of the autocomplete keys, for
// GetValues.
func (s *Store) collectTags(rows []tagRow, sp *model.Span) []tagRow {
	if s.add.annIndex {
		if len(s.opts.AutocompleteKeys) == 0 {
			return rows
		}
		ts := max(sp.Timestamp, 0)
		if ts == 0 {
			ts = noTimestamp
		}
		svc := ""
		if sp.LocalEndpoint != nil {
			svc = sanitizeVarchar(sp.LocalEndpoint.ServiceName)
		}
		for k, v := range sp.Tags {
			if !s.autocompleteKeyFold(k) {
				continue
			}
			k = sanitizeVarchar(k)
			if reservedTagKey(k) {
				continue
			}
			if v = blobValue(v); v != "" {
				if len(v) > maxTagValue {
					v = v[:maxTagValue+1]
				}
				r := tagRow{kind: tagKindValue, key: k, value: v, ts: ts, low: int64(sp.TraceID.Low), id: int64(sp.ID), service: svc}
				if s.feat.traceIDHigh {
					r.high = int64(sp.TraceID.High)
				}
				rows = append(rows, r)
			}
		}
		return rows
	}
	ts := max(sp.Timestamp, 0)
	if ts == 0 {
		ts = noTimestamp
	}
	svc := ""
	if sp.LocalEndpoint != nil {
		svc = sanitizeVarchar(sp.LocalEndpoint.ServiceName)
	}
	base := tagRow{ts: ts, low: int64(sp.TraceID.Low), id: int64(sp.ID), service: svc}
	if s.feat.traceIDHigh {
		base.high = int64(sp.TraceID.High)
	}
	for _, a := range sp.Annotations {
		if k := sanitizeVarchar(a.Value); !reservedTagKey(k) {
			r := base
			r.kind, r.key = tagKindKey, k
			rows = append(rows, r)
		}
	}
	for k, v := range sp.Tags {
		k = sanitizeVarchar(k)
		if reservedTagKey(k) {
			continue
		}
		r := base
		r.kind, r.key = tagKindKey, k
		rows = append(rows, r)
		if v = blobValue(v); v != "" {
			if len(v) > maxTagValue {
				v = v[:maxTagValue+1]
			}
			r.kind, r.value = tagKindValue, v
			rows = append(rows, r)
		}
	}
	return rows
}

// writeTags inserts rows (INSERT IGNORE, in key order) in tx.
func (s *Store) writeTags(ctx context.Context, tx *sql.Tx, rows []tagRow) error {
	if len(rows) == 0 {
		return nil
	}
	sortTagRows(rows)
	args := make([]any, 0, tagCols*len(rows))
	bytes := make([]int, 0, len(rows))
	for _, r := range rows {
		args = append(args, int64(r.kind), r.key, []byte(r.value), r.ts, r.high, r.low, r.id, r.service)
		bytes = append(bytes, 120+2*(len(r.key)+len(r.value)+len(r.service)))
	}
	return s.execChunks(stmtname.With(ctx, stmtInsertTags), tx, &s.add.tagsSQL, tagCols, args, bytes)
}

func sortTagRows(rows []tagRow) {
	slices.SortFunc(rows, func(a, b tagRow) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), strings.Compare(a.key, b.key), strings.Compare(a.value, b.value),
			cmp.Compare(a.ts, b.ts), cmp.Compare(a.high, b.high), cmp.Compare(a.low, b.low), cmp.Compare(a.id, b.id),
			strings.Compare(a.service, b.service))
	})
}

// tagsSQL returns the INSERT statements of zipkin_tags, indexed like
// batchSizes.
func tagsSQL() (out [len(batchSizes)]string) {
	for i, n := range batchSizes {
		out[i] = "INSERT IGNORE INTO " + tableTags +
			" (kind, a_key, a_value, start_ts, trace_id_high, trace_id, span_id, service_name) VALUES " + values(tagCols, n)
	}
	return out
}

// backfillTags returns the statements that fill zipkin_tags from the stored
// spans: the rows the write path would have written for them, with each
// span's stored start_ts.
func backfillTags(high, join string) []string {
	cols := " (kind, a_key, a_value, start_ts, trace_id_high, trace_id, span_id, service_name)"
	from := " FROM " + tableSpans + join +
		" WHERE a.a_key NOT IN ('cs', 'cr', 'sr', 'ss', 'ms', 'ws', 'mr', 'wr', 'sa', 'ca', 'ma', 'lc')"
	return []string{
		"INSERT IGNORE INTO " + tableTags + cols +
			" SELECT DISTINCT 0, a.a_key, '', IF(s.start_ts > 0, s.start_ts, -1), " + high + ", s.trace_id, s.id, COALESCE(a.endpoint_service_name, '')" + from,
		"INSERT IGNORE INTO " + tableTags + cols +
			" SELECT DISTINCT 1, a.a_key, LEFT(a.a_value, " + itoa(maxTagValue+1) + "), IF(s.start_ts > 0, s.start_ts, -1), " + high +
			", s.trace_id, s.id, COALESCE(a.endpoint_service_name, '')" + from +
			" AND a.a_type = 6 AND a.a_value IS NOT NULL AND a.a_value <> ''",
	}
}

// fastTagTraceIDs is getTraces' first step on zipkin_tags, for a request
// with an annotation query that has at least one term zipkin_tags holds;
// ok is false when it does not apply. It reads that term's spans in the
// window newest first (of the service, when the request names one), checks
// the request's other terms on the same span in zipkin_annotations with
// Zipkin's joins and its span name, remote service and duration on the
// span's zipkin_spans row, and keeps the first Limit distinct traces, as
// fastTraceIDs does.
func (s *Store) fastTagTraceIDs(ctx context.Context, q *model.QueryRequest) (keys []traceKey, ok bool, err error) {
	if s.add.annIndex && len(q.AnnotationQuery) > 0 {
		return s.annIndexTraceIDs(ctx, q)
	}
	if !s.add.tags || len(q.AnnotationQuery) == 0 {
		return nil, false, nil
	}
	terms := make([]string, 0, len(q.AnnotationQuery))
	for k := range q.AnnotationQuery {
		terms = append(terms, k)
	}
	sort.Strings(terms)
	if len(terms) > len(annotationAliases) {
		terms = terms[:len(annotationAliases)]
	}
	drive := -1
	for i, k := range terms {
		if tagSearchable(k, q.AnnotationQuery[k]) {
			drive = i
			break
		}
	}
	if drive < 0 {
		return nil, false, nil
	}
	high := s.feat.traceIDHigh
	var b strings.Builder
	var args []any
	b.WriteString("SELECT x.trace_id_high, x.trace_id, x.start_ts FROM " + tableTags + " x")
	onSpan := func(alias, spanCol string) {
		b.WriteString(" ON " + alias + ".trace_id = x.trace_id AND " + alias + "." + spanCol + " = x.span_id")
		if high {
			b.WriteString(" AND " + alias + ".trace_id_high = x.trace_id_high")
		}
	}
	if q.SpanName != "" || q.RemoteServiceName != "" || q.MinDuration != 0 {
		b.WriteString(" JOIN " + tableSpans + " s")
		onSpan("s", "id")
	}
	for i, key := range terms {
		if i == drive {
			continue
		}
		alias := annotationAliases[i]
		b.WriteString(" JOIN " + tableAnnotations + " " + alias)
		onSpan(alias, "span_id")
		b.WriteString(" AND " + alias + tidKey)
		args = append(args, key)
		if v := q.AnnotationQuery[key]; v != "" {
			b.WriteString(" AND " + alias + tidTypeValue1 + alias + tidTypeValue2)
			args = append(args, []byte(v))
		}
		if q.ServiceName != "" {
			b.WriteString(" AND " + alias + tidService)
			args = append(args, q.ServiceName)
		}
	}
	key, value := terms[drive], q.AnnotationQuery[terms[drive]]
	kind := tagKindKey
	if value != "" {
		kind = tagKindValue
	}
	begin, end := q.WindowMicros()
	b.WriteString(" WHERE x.kind = ? AND x.a_key = ? AND x.a_value = ? AND x.start_ts BETWEEN ? AND ?")
	endArg := len(args) + 4
	args = append(args, kind, key, []byte(value), begin, end)
	if q.ServiceName != "" {
		b.WriteString(" AND x.service_name = ?")
		args = append(args, q.ServiceName)
	}
	args = appendSpanFilters(&b, args, q)
	b.WriteString(" ORDER BY x.start_ts DESC LIMIT ?")
	keys, err = newestTraces(stmtname.With(ctx, stmtSelectTagTraceIDs), s.read, b.String(), args, endArg, 2*q.Limit, q.Limit)
	return keys, true, err
}

// newestTraces runs query, which selects trace_id_high, trace_id and the
// column it orders by (newest first: ORDER BY col DESC LIMIT ?) and bounds
// that column above by args[endArg], and keeps the first limit distinct
// traces: those with the newest matching rows. It reads first rows at
// first (at least limit), then goes on below the last value read, reading
// four times more each time, so that no row is read twice except the few
// that share the last value read (they are read again and deduplicated).
// Reading only as many matching rows as the answer needs matters when a
// filter is checked on another table's row (a join per row): at 10M spans
// those rows are mostly random page reads.
func newestTraces(ctx context.Context, db *sql.DB, query string, args []any, endArg, first, limit int) ([]traceKey, error) {
	args = append(slices.Clip(args), nil) // the LIMIT
	keys := make([]traceKey, 0, limit)
	seen := make(map[traceKey]struct{}, limit)
	n := max(first, limit)
	for {
		args[len(args)-1] = n
		rows, err := db.QueryContext(ctx, query, args...)
		if err != nil {
			return nil, fmt.Errorf("mysqlstore: select trace ids: %w", err)
		}
		read := 0
		var last int64
		for rows.Next() {
			read++
			var hi, lo int64
			var at sql.NullInt64
			if err := rows.Scan(&hi, &lo, &at); err != nil {
				rows.Close()
				return nil, fmt.Errorf("mysqlstore: select trace ids: %w", err)
			}
			last = at.Int64
			k := traceKey{uint64(hi), uint64(lo)}
			if _, dup := seen[k]; !dup && len(keys) < limit {
				seen[k] = struct{}{}
				keys = append(keys, k)
			}
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("mysqlstore: select trace ids: %w", err)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("mysqlstore: select trace ids: %w", err)
		}
		if len(keys) >= limit || read < n {
			return keys, nil
		}
		// Go on from the last value read (inclusive: rows sharing it may
		// not all have been read). When every row read had the bound's
		// value, only a larger read makes progress.
		if end, ok := args[endArg].(int64); !ok || last < end {
			args[endArg] = last
		}
		n *= 4
	}
}

// sqlNextValue reads a key's next tag value from zipkin_tags' primary key:
// one index dive per distinct value (MariaDB does not turn a DISTINCT on
// this key into a loose index scan; it reads every row of the key).
const sqlNextValue = "SELECT a_value FROM " + tableTags + " WHERE kind = 1 AND a_key = ? AND a_value > ? ORDER BY a_value LIMIT 1"

// fastValues answers GetValues from zipkin_tags, skipping from one distinct
// value to the next; ok is false when the table is not in use or cannot
// answer exactly: a key it does not hold, or a value longer than
// maxTagValue bytes among the answers (stored cut).
func (s *Store) fastValues(ctx context.Context, key string) (values []string, ok bool, err error) {
	if !s.add.tags || !tagSearchable(key, "") {
		return nil, false, nil
	}
	ctx = stmtname.With(ctx, stmtSelectAutocomplete)
	last := []byte{}
	for {
		var v []byte
		err := s.read.QueryRowContext(ctx, sqlNextValue, key, last).Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			break
		}
		if err != nil {
			return nil, true, fmt.Errorf("mysqlstore: %s: %w", stmtSelectAutocomplete, err)
		}
		if len(v) > maxTagValue {
			return nil, false, nil
		}
		values = append(values, string(v))
		last = v
	}
	return sortedUnique(values), true, nil
}

// autocompleteKeyFold reports whether GetValues may ask for key's values:
// an autocomplete key equal to it under utf8_general_ci (case and
// trailing spaces ignored).
func (s *Store) autocompleteKeyFold(key string) bool {
	key = strings.TrimRight(key, " ")
	for _, k := range s.opts.AutocompleteKeys {
		if strings.EqualFold(strings.TrimRight(k, " "), key) {
			return true
		}
	}
	return false
}

// annIndexTraceIDs is getTraces' first step for a request with an
// annotation query on a schema with the tag search indexes of
// zipkin_annotations (a_key_value, a_key): it reads the newest rows of the
// first term along an index — key=value: a_key_value, the tag rows (a_type
// 6) with that value; key: a_key, the rows of that key of any type, each
// at its own a_timestamp — joined with the span's zipkin_spans row, whose
// start_ts must be in the window, checks the request's other terms and its
// span name, remote service and duration on the same span with Zipkin's
// joins, and keeps the first Limit distinct traces. A tag row's
// a_timestamp is its span's timestamp, so for tags the order is the
// span's; a timeline annotation is ordered by its own timestamp.
func (s *Store) annIndexTraceIDs(ctx context.Context, q *model.QueryRequest) ([]traceKey, bool, error) {
	terms := make([]string, 0, len(q.AnnotationQuery))
	for k := range q.AnnotationQuery {
		terms = append(terms, k)
	}
	sort.Strings(terms)
	if len(terms) > len(annotationAliases) {
		return nil, false, nil
	}
	for _, k := range terms {
		// Zipkin's joins answer the reserved keys (address rows carry the
		// remote endpoint) and keys utf8_general_ci folds onto them.
		if !tagSearchable(k, "") {
			return nil, false, nil
		}
	}
	// Drive with a key=value term when there is one: its rows are fewer.
	drive := 0
	for i, k := range terms {
		if q.AnnotationQuery[k] != "" {
			drive = i
			break
		}
	}
	high := s.feat.traceIDHigh
	var b strings.Builder
	var args []any
	onSpan := func(alias, spanCol string) {
		b.WriteString(" ON " + alias + ".trace_id = x.trace_id AND " + alias + "." + spanCol + " = x.span_id")
		if high {
			b.WriteString(" AND " + alias + ".trace_id_high = x.trace_id_high")
		}
	}
	key, value := terms[drive], q.AnnotationQuery[terms[drive]]
	index := "a_key"
	if value != "" {
		index = "a_key_value"
	}
	hi := "x.trace_id_high"
	if !high {
		hi = "0"
	}
	b.WriteString("SELECT " + hi + ", x.trace_id, x.a_timestamp FROM " + tableAnnotations + " x FORCE INDEX (" + index + ") JOIN " + tableSpans + " s")
	onSpan("s", "id")
	for i, k := range terms {
		if i == drive {
			continue
		}
		alias := annotationAliases[i]
		b.WriteString(" JOIN " + tableAnnotations + " " + alias)
		onSpan(alias, "span_id")
		b.WriteString(" AND " + alias + tidKey)
		args = append(args, k)
		if v := q.AnnotationQuery[k]; v != "" {
			b.WriteString(" AND " + alias + tidTypeValue1 + alias + tidTypeValue2)
			args = append(args, []byte(v))
		}
		if q.ServiceName != "" {
			b.WriteString(" AND " + alias + tidService)
			args = append(args, q.ServiceName)
		}
	}
	begin, end := q.WindowMicros()
	b.WriteString(" WHERE x.a_key = ?")
	args = append(args, key)
	if value != "" {
		b.WriteString(" AND x.a_value = ? AND x.a_type = 6")
		args = append(args, []byte(value))
	}
	b.WriteString(" AND x.a_timestamp BETWEEN ? AND ? AND s.start_ts BETWEEN ? AND ?")
	endArg := len(args) + 1
	args = append(args, max(begin, 1), end, begin, end)
	if q.ServiceName != "" {
		b.WriteString(" AND x.endpoint_service_name = ?")
		args = append(args, q.ServiceName)
	}
	args = appendSpanFilters(&b, args, q)
	b.WriteString(" ORDER BY x.a_timestamp DESC LIMIT ?")
	keys, err := newestTraces(stmtname.With(ctx, stmtSelectTagTraceIDs), s.read, b.String(), args, endArg, 2*q.Limit, q.Limit)
	return keys, true, err
}
