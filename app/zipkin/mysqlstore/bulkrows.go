package mysqlstore

import (
	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// BulkTable is one table's rows as Accept writes them: Columns names the
// columns of each row of Rows, in order. A nil value is SQL NULL; the other
// values are int64, string or []byte.
type BulkTable struct {
	Table   string
	Columns []string
	Rows    [][]any
}

// BulkRows returns the rows Accept would write for spans, table by table
// (zipkin_spans, zipkin_annotations, then the schema additions in use),
// each in its table's key order, without writing anything. It is for bulk
// loaders (the query benchmark's), which write a table at a time with
// LOAD DATA: the tables then hold what ingest would have stored, provided
// no span shares its trace and span ID with another span of the load or a
// stored one (Accept merges such rows with ON DUPLICATE KEY UPDATE; a bulk
// load keeps one of them). Spans must be normalised; invalid spans are left
// out and reported as Accept reports them.
func (s *Store) BulkRows(spans []model.Span) ([]BulkTable, error) {
	b, invalid := s.buildBatch(spans)
	var err error
	if invalid != nil {
		err = invalid
	}
	spanCols := []string{"trace_id", "id", "name"}
	if s.feat.traceIDHigh {
		spanCols = append([]string{"trace_id_high"}, spanCols...)
	}
	if s.feat.remoteServiceName {
		spanCols = append(spanCols, "remote_service_name")
	}
	spanCols = append(spanCols, "parent_id", "debug", "start_ts", "duration")
	annCols := []string{"trace_id", "span_id", "a_key", "a_value", "a_type", "a_timestamp", "endpoint_ipv4"}
	if s.feat.traceIDHigh {
		annCols = append([]string{"trace_id_high"}, annCols...)
	}
	if s.feat.ipv6 {
		annCols = append(annCols, "endpoint_ipv6")
	}
	annCols = append(annCols, "endpoint_port", "endpoint_service_name")

	split := func(args []any, cols int) [][]any {
		out := make([][]any, 0, len(args)/cols)
		for i := 0; i+cols <= len(args); i += cols {
			out = append(out, args[i:i+cols:i+cols])
		}
		return out
	}
	spanRows := split(b.spanArgs, len(spanCols))
	spanRows = append(spanRows, split(b.sharedArgs, len(spanCols))...)
	out := []BulkTable{
		{Table: tableSpans, Columns: spanCols, Rows: spanRows},
		{Table: tableAnnotations, Columns: annCols, Rows: split(b.annArgs, len(annCols))},
	}
	if b.add == nil {
		return out, err
	}
	if s.add.names {
		names := s.unknownNames(b.add.names)
		t := BulkTable{Table: tableNames, Columns: []string{"kind", "service_name", "name"}}
		for _, n := range names {
			t.Rows = append(t.Rows, []any{int64(n.kind), n.service, n.name})
		}
		s.rememberNames(b)
		out = append(out, t)
	}
	if s.add.serviceSpans {
		t := BulkTable{Table: tableServiceSpans, Columns: []string{"service_name", "start_ts", "trace_id_high", "trace_id", "span_id"}}
		sortServiceSpanRows(b.add.spans)
		for _, r := range b.add.spans {
			t.Rows = append(t.Rows, []any{r.service, r.ts, r.high, r.low, r.id})
		}
		out = append(out, t)
	}
	if s.add.tags {
		t := BulkTable{Table: tableTags, Columns: []string{"kind", "a_key", "a_value", "start_ts", "trace_id_high", "trace_id", "span_id", "service_name"}}
		sortTagRows(b.add.tags)
		for _, r := range b.add.tags {
			t.Rows = append(t.Rows, []any{int64(r.kind), r.key, []byte(r.value), r.ts, r.high, r.low, r.id, r.service})
		}
		out = append(out, t)
	}
	return out, err
}
