package mysqlstore

import (
	"strings"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// SQL of the read path. Every identifier comes from these constants; every
// value is a parameter. Statements whose shape depends on the request (IN
// lists, optional joins and conditions) are assembled from the fragments
// below in a fixed order, so that one request shape always yields the same
// text and the pool's statement cache serves it; IN lists are padded to one
// of a few sizes (inSizes) for the same reason.

// Statement names for the SQL timers (stmtname.With).
const (
	stmtSelectTraceIDs       = "select trace ids"
	stmtSelectSpans          = "select spans"
	stmtSelectAnnotations    = "select annotations"
	stmtSelectServiceNames   = "select service names"
	stmtSelectSpanNames      = "select span names"
	stmtSelectRemoteNames    = "select remote service names"
	stmtSelectAutocomplete   = "select autocomplete values"
	stmtSelectDependencies   = "select dependencies"
	stmtSelectDependencySpan = "select dependency spans"
)

// Span and annotation columns as the reader scans them. Without
// trace_id_high (schemas before 2016) the high bits read as 0; without
// endpoint_ipv6 the address reads as NULL.
const (
	spanColumns       = "trace_id_high, trace_id, id, name, parent_id, debug, start_ts, duration"
	spanColumnsNoHigh = "0, trace_id, id, name, parent_id, debug, start_ts, duration"

	annotationColumnsTail   = ", trace_id, span_id, a_key, a_value, a_type, a_timestamp, endpoint_ipv4, "
	annotationColumnsSuffix = ", endpoint_port, endpoint_service_name"
)

func (s *Store) spanColumns() string {
	if s.feat.traceIDHigh {
		return spanColumns
	}
	return spanColumnsNoHigh
}

func (s *Store) annotationColumns() string {
	high, ipv6 := "0", "NULL"
	if s.feat.traceIDHigh {
		high = "trace_id_high"
	}
	if s.feat.ipv6 {
		ipv6 = "endpoint_ipv6"
	}
	return high + annotationColumnsTail + ipv6 + annotationColumnsSuffix
}

// inSizes are the IN-list lengths statements are prepared for: a list is
// padded (by repeating its last value) to the next size, and a longer one
// is split. Padding never changes a result: IN and OR are idempotent.
var inSizes = [...]int{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}

// maxIn is the longest IN list in one statement.
const maxIn = 1024

// paddedSize returns the size of inSizes that n (1..maxIn) is padded to.
func paddedSize(n int) int {
	for _, size := range inSizes {
		if n <= size {
			return size
		}
	}
	return maxIn
}

// placeholders returns "?, ?, …" with n placeholders.
func placeholders(n int) string {
	var b strings.Builder
	b.Grow(3 * n)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('?')
	}
	return b.String()
}

// traceIDCondition returns a WHERE condition that selects the rows of the
// given trace IDs in zipkin_spans or zipkin_annotations (both name the
// columns trace_id_high and trace_id), padded to a size of inSizes, and its
// arguments. byPair (strict trace IDs on a schema with trace_id_high)
// matches both halves as an OR of equalities, which MySQL and MariaDB turn
// into index ranges on the primary key (a row constructor IN is not
// range-optimised before MySQL 5.7.3, Zipkin #1897); otherwise only the low
// 64 bits are matched.
func traceIDCondition(ids []traceKey, byPair bool) (string, []any) {
	n := paddedSize(len(ids))
	var b strings.Builder
	var args []any
	if byPair {
		args = make([]any, 0, 2*n)
		b.Grow(36 * n)
		for i := 0; i < n; i++ {
			id := ids[min(i, len(ids)-1)]
			if i > 0 {
				b.WriteString(" OR ")
			}
			b.WriteString("(trace_id_high = ? AND trace_id = ?)")
			args = append(args, int64(id.high), int64(id.low))
		}
		return b.String(), args
	}
	args = make([]any, 0, n)
	for i := 0; i < n; i++ {
		args = append(args, int64(ids[min(i, len(ids)-1)].low))
	}
	return "trace_id IN (" + placeholders(n) + ")", args
}

// Trace-ID query (getTraces step 1), assembled in this order:
//
//	SELECT s.trace_id_high, s.trace_id, MAX(s.start_ts) FROM zipkin_spans s
//	JOIN zipkin_annotations a ON <join a>
//	[JOIN zipkin_annotations aN ON <join aN> AND aN.a_key = ? [AND aN.a_type = 6 AND aN.a_value = ?] [AND aN.endpoint_service_name = ?]]…
//	WHERE s.start_ts BETWEEN ? AND ?
//	[AND a.endpoint_service_name = ? AND a.a_type <> 0]
//	[AND s.remote_service_name = ?] [AND s.name = ?]
//	[AND s.duration BETWEEN ? AND ? | AND s.duration >= ?]
//	GROUP BY s.trace_id_high, s.trace_id ORDER BY MAX(s.start_ts) DESC LIMIT ?
const (
	tidSelect       = "SELECT s.trace_id_high, s.trace_id, MAX(s.start_ts) FROM " + tableSpans + " s"
	tidSelectNoHigh = "SELECT 0, s.trace_id, MAX(s.start_ts) FROM " + tableSpans + " s"
	tidJoin         = " JOIN " + tableAnnotations + " "
	// joinOnHigh/joinOnLow follow an alias: "a ON s.trace_id_high = a.trace_id_high AND …".
	tidOn1          = " ON s.trace_id_high = "
	tidOn2          = ".trace_id_high AND s.trace_id = "
	tidOnNoHigh     = " ON s.trace_id = "
	tidOn3          = ".trace_id AND s.id = "
	tidOn4          = ".span_id"
	tidKey          = ".a_key = ?"
	tidTypeValue1   = ".a_type = 6 AND "
	tidTypeValue2   = ".a_value = ?"
	tidService      = ".endpoint_service_name = ?"
	tidWhere        = " WHERE s.start_ts BETWEEN ? AND ?"
	tidLocalService = " AND a.endpoint_service_name = ? AND a.a_type <> 0"
	tidRemote       = " AND s.remote_service_name = ?"
	tidName         = " AND s.name = ?"
	tidDurRange     = " AND s.duration BETWEEN ? AND ?"
	tidDurMin       = " AND s.duration >= ?"
	tidTail         = " GROUP BY s.trace_id_high, s.trace_id ORDER BY MAX(s.start_ts) DESC LIMIT ?"
	tidTailNoHigh   = " GROUP BY s.trace_id ORDER BY MAX(s.start_ts) DESC LIMIT ?"
)

// annotationAliases are the aliases of the per-term joins (a0 … a99; the
// model caps an annotation query at 100 terms).
var annotationAliases = func() [100]string {
	var a [100]string
	for i := range a {
		a[i] = "a" + itoa(i)
	}
	return a
}()

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// Names, autocomplete and dependencies.
const (
	sqlServiceNames = "SELECT DISTINCT endpoint_service_name FROM " + tableAnnotations +
		" WHERE endpoint_service_name IS NOT NULL AND endpoint_service_name <> '' AND a_type <> 0"

	namesJoinHigh   = " s JOIN " + tableAnnotations + " a ON s.trace_id_high = a.trace_id_high AND s.trace_id = a.trace_id AND s.id = a.span_id"
	namesJoinNoHigh = " s JOIN " + tableAnnotations + " a ON s.trace_id = a.trace_id AND s.id = a.span_id"
	namesWhere      = " WHERE a.endpoint_service_name = ? AND a.a_type <> 0"

	sqlSpanNamesHead   = "SELECT DISTINCT s.name FROM " + tableSpans
	sqlSpanNamesTail   = " AND s.name <> ''"
	sqlRemoteNamesHead = "SELECT DISTINCT s.remote_service_name FROM " + tableSpans
	sqlRemoteNamesTail = " AND s.remote_service_name IS NOT NULL AND s.remote_service_name <> ''"

	sqlSpanNames         = sqlSpanNamesHead + namesJoinHigh + namesWhere + sqlSpanNamesTail
	sqlSpanNamesNoHigh   = sqlSpanNamesHead + namesJoinNoHigh + namesWhere + sqlSpanNamesTail
	sqlRemoteNames       = sqlRemoteNamesHead + namesJoinHigh + namesWhere + sqlRemoteNamesTail
	sqlRemoteNamesNoHigh = sqlRemoteNamesHead + namesJoinNoHigh + namesWhere + sqlRemoteNamesTail

	sqlAutocompleteValues = "SELECT DISTINCT a_value FROM " + tableAnnotations + " WHERE a_type = 6 AND a_key = ?"

	sqlDependencies = "SELECT parent, child, call_count, error_count FROM " + tableDependencies +
		" WHERE day BETWEEN ? AND ?"
	sqlDependenciesNoErrors = "SELECT parent, child, call_count, 0 FROM " + tableDependencies +
		" WHERE day BETWEEN ? AND ?"

	// The on-demand linker reads, for every span of every trace with a span
	// in the window, the service names of its core annotations, addresses,
	// "lc" marker and "error" tag; grouped on the low 64 bits of the trace
	// ID so that 64- and 128-bit halves of one trace link together, and
	// ordered by trace and span as the linker consumes them.
	depSpansHead = "SELECT DISTINCT "
	depSpansHigh = "s.trace_id_high"
	depSpansBody = ", s.trace_id, s.parent_id, s.id, a.a_key, a.a_type, a.endpoint_service_name FROM " + tableSpans +
		" s LEFT JOIN " + tableAnnotations + " a ON s.trace_id = a.trace_id AND s.id = a.span_id" +
		" AND a.a_key IN (?, ?, ?, ?, ?, ?, ?, ?, ?)" +
		" WHERE s.trace_id IN (SELECT trace_id FROM " + tableSpans + " WHERE start_ts BETWEEN ? AND ?)" +
		" ORDER BY s.trace_id, s.id"
	sqlDependencySpans       = depSpansHead + depSpansHigh + depSpansBody
	sqlDependencySpansNoHigh = depSpansHead + "0" + depSpansBody
)

// dependencyKeys are the annotation keys the on-demand linker reads.
var dependencyKeys = [...]any{"lc", "cs", "ca", "sr", "sa", "ma", "mr", "ms", "error"}

// appendSpanFilters adds the conditions on the span row s that every trace-ID query shares:
// remote service, span name and duration, with their arguments.
func appendSpanFilters(b *strings.Builder, args []any, q *model.QueryRequest) []any {
	if q.RemoteServiceName != "" {
		b.WriteString(tidRemote)
		args = append(args, q.RemoteServiceName)
	}
	if q.SpanName != "" {
		b.WriteString(tidName)
		args = append(args, q.SpanName)
	}
	switch {
	case q.MinDuration != 0 && q.MaxDuration != 0:
		b.WriteString(tidDurRange)
		args = append(args, q.MinDuration, q.MaxDuration)
	case q.MinDuration != 0:
		b.WriteString(tidDurMin)
		args = append(args, q.MinDuration)
	}
	return args
}
