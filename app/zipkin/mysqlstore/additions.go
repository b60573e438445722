package mysqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/stmtname"
)

// Schema additions: three optional tables, not in Zipkin's mysql.sql, that
// make the name lookups, getTraces by service and the tag and annotation
// search fast on large tables.
// CreateSchema creates them (and fills them from the spans already stored);
// Open detects them, and the store then writes them in the same
// transaction as the spans and reads them instead of scanning
// zipkin_annotations. Without them the store runs Zipkin's queries.
//
//   - zipkin_names: one row per (kind, local service, name): kind 0 marks a
//     local service (name ""), kind 1 a span name recorded by that service,
//     kind 2 a remote service name called by it. getServiceNames,
//     getSpanNames and getRemoteServiceNames read its primary key.
//   - zipkin_service_spans: one row per span with a local service and a
//     timestamp, keyed (service_name, start_ts, trace ID, span ID), so that
//     getTraces(serviceName, window, limit) reads the newest spans of the
//     service backwards along the key and stops after limit traces.
//   - zipkin_tags: the tag and annotation search (getTraces with an
//     annotationQuery); tags.go describes it.
const (
	tableNames        = "zipkin_names"
	tableServiceSpans = "zipkin_service_spans"

	ddlNames = "CREATE TABLE IF NOT EXISTS " + tableNames + ` (
  kind TINYINT NOT NULL,
  service_name VARCHAR(255) NOT NULL,
  name VARCHAR(255) NOT NULL,
  PRIMARY KEY (kind, service_name, name)
)` + tableOptions

	ddlServiceSpans = "CREATE TABLE IF NOT EXISTS " + tableServiceSpans + ` (
  service_name VARCHAR(255) NOT NULL,
  start_ts BIGINT NOT NULL,
  trace_id_high BIGINT NOT NULL DEFAULT 0,
  trace_id BIGINT NOT NULL,
  span_id BIGINT NOT NULL,
  PRIMARY KEY (service_name, start_ts, trace_id_high, trace_id, span_id)
)` + tableOptions

	probeNames        = "SELECT kind FROM " + tableNames + " LIMIT 1"
	probeServiceSpans = "SELECT span_id FROM " + tableServiceSpans + " LIMIT 1"
)

// Kinds of zipkin_names rows.
const (
	nameService = 0
	nameSpan    = 1
	nameRemote  = 2
)

// Statement names for the SQL timers.
const (
	stmtInsertNames        = "insert zipkin_names"
	stmtInsertServiceSpans = "insert zipkin_service_spans"
	stmtSelectFastTraceIDs = "select trace ids (zipkin_service_spans)"
)

// Queries on the additions.
const (
	sqlFastServiceNames = "SELECT service_name FROM " + tableNames + " WHERE kind = 0"
	sqlFastNames        = "SELECT name FROM " + tableNames + " WHERE kind = ? AND service_name = ?"
)

// AdditionsDDL returns the CREATE TABLE statements of the optional schema
// additions (zipkin_names, zipkin_service_spans, zipkin_tags) that
// CreateSchema runs after SchemaDDL. docs/design/zipkin.md describes them.
func AdditionsDDL() []string { return []string{ddlNames, ddlServiceSpans, ddlTags} }

// Additions reports which schema additions Open found (and uses).
type Additions struct {
	Names        bool // zipkin_names: name lookups
	ServiceSpans bool // zipkin_service_spans: getTraces by service
	Tags         bool // zipkin_tags: the autocomplete values, and getTraces by annotationQuery (tag and annotation search) without TagIndexes
	TagIndexes   bool // zipkin_annotations' indexes a_key (a_key, a_timestamp) and a_key_value: getTraces by annotationQuery, with no second copy of each tag
}

// Additions returns the schema additions the store found and uses.
func (s *Store) Additions() Additions {
	return Additions{Names: s.add.names, ServiceSpans: s.add.serviceSpans, Tags: s.add.tags, TagIndexes: s.add.annIndex}
}

// additions is the store's view of the optional tables plus the cache of
// names known to be stored.
type additions struct {
	names, serviceSpans, tags bool
	annIndex                  bool                    // zipkin_annotations has the tag search indexes a_key_value and a_key (a_key, a_timestamp)
	tagsSQL                   [len(batchSizes)]string // INSERTs of zipkin_tags

	mu    sync.Mutex
	known map[nameRow]struct{} // names committed; cleared when it grows past maxKnownNames
}

// maxKnownNames bounds the cache of stored names.
const maxKnownNames = 100_000

type nameRow struct {
	kind          int8
	service, name string
}

type serviceSpanRow struct {
	service           string
	ts, high, low, id int64
}

// additionRows are the rows of the additions a batch writes.
type additionRows struct {
	names []nameRow
	spans []serviceSpanRow
	tags  []tagRow
}

// detectAdditions probes for the optional tables. A table that cannot be
// probed for any reason is treated as absent: the store then runs Zipkin's
// queries.
func (s *Store) detectAdditions(ctx context.Context) {
	s.add.names = s.tableUsable(ctx, probeNames)
	s.add.serviceSpans = s.tableUsable(ctx, probeServiceSpans)
	s.add.tags = s.tableUsable(ctx, probeTags)
	s.add.annIndex = s.hasTagIndexes(ctx)
	s.add.tagsSQL = tagsSQL()
	s.add.known = map[nameRow]struct{}{}
	if !s.add.annIndex && s.add.tags {
		s.log.InfoContext(ctx, "mysqlstore: zipkin_annotations lacks the tag search indexes; tag search reads zipkin_tags, which every write fills (a second copy of each tag): "+
			"ALTER TABLE zipkin_annotations DROP INDEX a_key, ADD INDEX a_key (a_key, a_timestamp), ADD INDEX a_key_value (a_key, a_value(64), a_timestamp) makes it unnecessary")
	}
	if !s.add.names || !s.add.serviceSpans || !s.add.tags && !s.add.annIndex {
		s.log.InfoContext(ctx, "mysqlstore: schema additions missing; the lookups they serve (names, getTraces by service, tag search) run Zipkin's queries (slow on large tables): run with -init-schema to add them",
			"zipkin_names", s.add.names, "zipkin_service_spans", s.add.serviceSpans, "zipkin_tags", s.add.tags)
	}
}

// hasTagIndexes reports whether zipkin_annotations has the tag search
// indexes of CreateSchema's DDL: a_key_value (a_key, a_value, a_timestamp)
// and a_key (a_key, a_timestamp).
func (s *Store) hasTagIndexes(ctx context.Context) bool {
	rows, err := s.db.QueryContext(ctx, "SELECT index_name, column_name FROM information_schema.statistics"+
		" WHERE table_schema = DATABASE() AND table_name = '"+tableAnnotations+"' AND index_name IN ('a_key', 'a_key_value') ORDER BY index_name, seq_in_index")
	if err != nil {
		return false
	}
	defer rows.Close()
	got := map[string]string{}
	for rows.Next() {
		var idx, col string
		if err := rows.Scan(&idx, &col); err != nil {
			return false
		}
		if got[idx] != "" {
			got[idx] += ","
		}
		got[idx] += strings.ToLower(col)
	}
	return rows.Err() == nil && got["a_key"] == "a_key,a_timestamp" && got["a_key_value"] == "a_key,a_value,a_timestamp"
}

func (s *Store) tableUsable(ctx context.Context, q string) bool {
	r, err := s.probe(ctx, q)
	return err == nil && r == probeOK
}

// collectAdditions adds the addition rows of one valid span to b.
func (s *Store) collectAdditions(b *batch, sp *model.Span) {
	if s.add.tags {
		if b.add == nil {
			b.add = &additionRows{}
		}
		b.add.tags = s.collectTags(b.add.tags, sp)
	}
	if !s.add.names && !s.add.serviceSpans || sp.LocalEndpoint == nil {
		return
	}
	svc := sanitizeVarchar(sp.LocalEndpoint.ServiceName)
	if svc == "" {
		return
	}
	if b.add == nil {
		b.add = &additionRows{}
	}
	if s.add.names {
		b.add.names = append(b.add.names, nameRow{nameService, svc, ""})
		if n := nameOrEmpty(sp.Name); n != "" {
			b.add.names = append(b.add.names, nameRow{nameSpan, svc, n})
		}
		if s.feat.remoteServiceName {
			if n := nameOrEmpty(sp.RemoteServiceName()); n != "" {
				b.add.names = append(b.add.names, nameRow{nameRemote, svc, n})
			}
		}
	}
	if ts := max(sp.Timestamp, 0); s.add.serviceSpans && ts != 0 {
		r := serviceSpanRow{service: svc, ts: ts, low: int64(sp.TraceID.Low), id: int64(sp.ID)}
		if s.feat.traceIDHigh {
			r.high = int64(sp.TraceID.High)
		}
		b.add.spans = append(b.add.spans, r)
	}
}

// writeAdditions inserts the batch's addition rows (INSERT IGNORE, in key
// order) in the batch's transaction, skipping names already known to be
// stored.
func (s *Store) writeAdditions(ctx context.Context, tx *sql.Tx, b *batch) error {
	if b.add == nil {
		return nil
	}
	names := s.unknownNames(b.add.names)
	if len(names) > 0 {
		args := make([]any, 0, 3*len(names))
		for _, n := range names {
			args = append(args, int64(n.kind), n.service, n.name)
		}
		s.stats.statements.Add(1)
		if _, err := tx.ExecContext(stmtname.With(ctx, stmtInsertNames),
			"INSERT IGNORE INTO "+tableNames+" (kind, service_name, name) VALUES "+values(3, len(names)), args...); err != nil {
			return err
		}
	}
	if rows := b.add.spans; len(rows) > 0 {
		sortServiceSpanRows(rows)
		args := make([]any, 0, 5*len(rows))
		bytes := make([]int, 0, len(rows))
		for _, r := range rows {
			args = append(args, r.service, r.ts, r.high, r.low, r.id)
			bytes = append(bytes, 80+2*len(r.service))
		}
		if err := s.execChunks(stmtname.With(ctx, stmtInsertServiceSpans), tx, &s.w.serviceSpans, 5, args, bytes); err != nil {
			return err
		}
	}
	return s.writeTags(ctx, tx, b.add.tags)
}

func sortServiceSpanRows(rows []serviceSpanRow) {
	slices.SortFunc(rows, func(a, b serviceSpanRow) int {
		return cmp.Or(strings.Compare(a.service, b.service), cmp.Compare(a.ts, b.ts), cmp.Compare(a.high, b.high),
			cmp.Compare(a.low, b.low), cmp.Compare(a.id, b.id))
	})
}

// serviceSpansSQL returns the INSERT statements of zipkin_service_spans,
// indexed like batchSizes.
func serviceSpansSQL() (out [len(batchSizes)]string) {
	for i, n := range batchSizes {
		out[i] = "INSERT IGNORE INTO " + tableServiceSpans +
			" (service_name, start_ts, trace_id_high, trace_id, span_id) VALUES " + values(5, n)
	}
	return out
}

// unknownNames returns the distinct names of rows not yet known to be
// stored, in key order.
func (s *Store) unknownNames(rows []nameRow) []nameRow {
	if len(rows) == 0 {
		return nil
	}
	s.add.mu.Lock()
	var out []nameRow
	for _, r := range rows {
		if _, ok := s.add.known[r]; !ok {
			out = append(out, r)
		}
	}
	s.add.mu.Unlock()
	slices.SortFunc(out, func(a, b nameRow) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), strings.Compare(a.service, b.service), strings.Compare(a.name, b.name))
	})
	return slices.Compact(out)
}

// rememberNames records the names of a committed batch as stored.
func (s *Store) rememberNames(b *batch) {
	if b.add == nil || len(b.add.names) == 0 {
		return
	}
	s.add.mu.Lock()
	if len(s.add.known)+len(b.add.names) > maxKnownNames {
		clear(s.add.known)
	}
	for _, r := range b.add.names {
		s.add.known[r] = struct{}{}
	}
	s.add.mu.Unlock()
}

// fastNames answers a name lookup from zipkin_names; ok is false when the
// table is not in use.
func (s *Store) fastNames(ctx context.Context, stmt string, kind int, service string) (names []string, ok bool, err error) {
	if !s.add.names {
		return nil, false, nil
	}
	if kind == nameService {
		names, err = s.selectNames(ctx, stmt, sqlFastServiceNames)
	} else {
		names, err = s.selectNames(ctx, stmt, sqlFastNames, int64(kind), service)
	}
	return names, true, err
}

// fastTraceIDs is getTraces' first step on zipkin_service_spans, for a
// request with a service name and no annotation query; ok is false when it
// does not apply. It reads the service's spans in the window newest first
// (joined with zipkin_spans when the request filters on span name, remote
// service or duration, all on the same span as in Zipkin's query) and keeps
// the first Limit distinct traces: the newest by their newest matching
// span, which is Zipkin's ORDER BY MAX(start_ts) DESC LIMIT (newestTraces).
func (s *Store) fastTraceIDs(ctx context.Context, q *model.QueryRequest) (keys []traceKey, ok bool, err error) {
	if !s.add.serviceSpans || q.ServiceName == "" || len(q.AnnotationQuery) > 0 {
		return nil, false, nil
	}
	var b strings.Builder
	b.WriteString("SELECT x.trace_id_high, x.trace_id, x.start_ts FROM " + tableServiceSpans + " x")
	var args []any
	join := q.SpanName != "" || q.RemoteServiceName != "" || q.MinDuration != 0
	if join {
		b.WriteString(" JOIN " + tableSpans + " s ON s.trace_id = x.trace_id AND s.id = x.span_id")
		if s.feat.traceIDHigh {
			b.WriteString(" AND s.trace_id_high = x.trace_id_high")
		}
	}
	b.WriteString(" WHERE x.service_name = ? AND x.start_ts BETWEEN ? AND ?")
	begin, end := q.WindowMicros()
	args = append(args, q.ServiceName, begin, end)
	args = appendSpanFilters(&b, args, q)
	b.WriteString(" ORDER BY x.start_ts DESC LIMIT ?")
	// A trace has several spans of a service: without a filter read 8 ×
	// Limit spans first; with one, the rows read are those that match,
	// fewer per trace, each checked on its zipkin_spans row.
	first := 8 * q.Limit
	if join {
		first = 2 * q.Limit
	}
	keys, err = newestTraces(stmtname.With(ctx, stmtSelectFastTraceIDs), s.db, b.String(), args, 2, first, q.Limit)
	return keys, true, err
}

// createAdditions creates the additions that do not exist yet and fills a
// new one from the spans already stored, so that lookups on it miss
// nothing written before.
func createAdditions(ctx context.Context, db *sql.DB) error {
	for _, a := range []struct{ probe, ddl string }{{probeNames, ddlNames}, {probeServiceSpans, ddlServiceSpans}, {probeTags, ddlTags}} {
		existed := rowsOK(ctx, db, a.probe)
		if _, err := db.ExecContext(ctx, a.ddl); err != nil {
			return fmt.Errorf("mysqlstore: creating the schema additions (%.50s…): %w", a.ddl, err)
		}
		if existed {
			continue
		}
		for _, q := range backfill(ctx, db, a.ddl) {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("mysqlstore: filling the schema additions from stored spans (%.60s…): %w", q, err)
			}
		}
	}
	return nil
}

func rowsOK(ctx context.Context, db *sql.DB, q string) bool {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return false
	}
	for rows.Next() {
	}
	return rows.Close() == nil && rows.Err() == nil
}

// backfill returns the statements that fill an addition from the stored
// spans, with the same conditions as Zipkin's queries (an annotation row of
// the local service with a_type <> 0).
func backfill(ctx context.Context, db *sql.DB, ddl string) []string {
	join := namesJoinHigh
	high := "s.trace_id_high"
	if !rowsOK(ctx, db, probeTraceIDHigh) {
		join, high = namesJoinNoHigh, "0"
	}
	if ddl == ddlTags {
		return backfillTags(high, join)
	}
	names := ddl == ddlNames
	local := " WHERE a.endpoint_service_name IS NOT NULL AND a.endpoint_service_name <> '' AND a.a_type <> 0"
	if !names {
		return []string{"INSERT IGNORE INTO " + tableServiceSpans + " (service_name, start_ts, trace_id_high, trace_id, span_id)" +
			" SELECT DISTINCT a.endpoint_service_name, s.start_ts, " + high + ", s.trace_id, s.id FROM " + tableSpans + join +
			local + " AND s.start_ts IS NOT NULL AND s.start_ts <> 0"}
	}
	q := []string{
		"INSERT IGNORE INTO " + tableNames + " (kind, service_name, name) SELECT DISTINCT 0, endpoint_service_name, ''" +
			" FROM " + tableAnnotations + " WHERE endpoint_service_name IS NOT NULL AND endpoint_service_name <> '' AND a_type <> 0",
		"INSERT IGNORE INTO " + tableNames + " (kind, service_name, name) SELECT DISTINCT 1, a.endpoint_service_name, s.name FROM " +
			tableSpans + join + local + " AND s.name <> ''",
	}
	if rowsOK(ctx, db, probeRemoteServiceName) {
		q = append(q, "INSERT IGNORE INTO "+tableNames+" (kind, service_name, name) SELECT DISTINCT 2, a.endpoint_service_name, s.remote_service_name FROM "+
			tableSpans+join+local+" AND s.remote_service_name IS NOT NULL AND s.remote_service_name <> ''")
	}
	return q
}
