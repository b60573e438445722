package model

import (
	"errors"
	"math"
	"sort"
	"strings"
)

// DefaultLookback is Zipkin's QUERY_LOOKBACK default: one day, in
// milliseconds.
const DefaultLookback int64 = 86_400_000

// DefaultLimit is the v2 API's default trace limit.
const DefaultLimit = 10

// maxAnnotationQueryTerms bounds ParseAnnotationQuery as Zipkin does.
const maxAnnotationQueryTerms = 100

// QueryRequest is a getTraces query with Zipkin's semantics. Build one with
// its fields set and call Normalize, which applies Zipkin's rules and
// reports a *QueryError for invalid input; the store assumes a normalised
// request.
type QueryRequest struct {
	ServiceName       string // local service; "" = any
	RemoteServiceName string // "" = any
	SpanName          string // "" = any ("all" is normalised to "")
	// AnnotationQuery maps a key to a value: "" means "an annotation with
	// this value or a tag with this key exists"; otherwise "tag key = value".
	// All entries must match the same span.
	AnnotationQuery map[string]string
	MinDuration     int64 // microseconds; 0 = no bound
	MaxDuration     int64 // microseconds; 0 = no bound; only with MinDuration
	EndTs           int64 // epoch milliseconds; required (> 0)
	Lookback        int64 // milliseconds; required (> 0)
	Limit           int   // maximum traces; required (> 0)
}

// QueryError is an invalid query. Its message is Zipkin's, which the HTTP
// API returns with status 400.
type QueryError struct{ Msg string }

func (e *QueryError) Error() string { return e.Msg }

// IsQueryError reports whether err is (or wraps) a *QueryError.
func IsQueryError(err error) bool {
	var q *QueryError
	return errors.As(err, &q)
}

// Normalize lower-cases the names, turns span name "all" into "", and
// validates the request with Zipkin's rules and messages.
func (q *QueryRequest) Normalize() error {
	q.ServiceName = lower(strings.TrimSpace(q.ServiceName))
	q.RemoteServiceName = lower(strings.TrimSpace(q.RemoteServiceName))
	q.SpanName = lower(strings.TrimSpace(q.SpanName))
	if q.SpanName == "all" {
		q.SpanName = ""
	}
	if len(q.AnnotationQuery) == 0 {
		q.AnnotationQuery = nil
	}
	switch {
	case q.EndTs <= 0:
		return &QueryError{"endTs <= 0"}
	case q.Limit <= 0:
		return &QueryError{"limit <= 0"}
	case q.Lookback <= 0:
		return &QueryError{"lookback <= 0"}
	case q.MinDuration < 0:
		return &QueryError{"minDuration <= 0"}
	case q.MinDuration == 0 && q.MaxDuration != 0:
		return &QueryError{"maxDuration is only valid with minDuration"}
	case q.MaxDuration != 0 && q.MaxDuration < q.MinDuration:
		return &QueryError{"maxDuration < minDuration"}
	}
	return nil
}

// WindowMicros returns the inclusive [begin, end] bounds of span timestamps
// the query covers, in epoch microseconds.
// Instants past the int64 range of microseconds (year 294,247) are the
// largest int64.
func (q *QueryRequest) WindowMicros() (begin, end int64) {
	return MillisToMicros(max(q.EndTs-q.Lookback, 0)), MillisToMicros(q.EndTs)
}

// MillisToMicros converts epoch milliseconds to epoch microseconds,
// saturating at the int64 range instead of wrapping around.
func MillisToMicros(ms int64) int64 {
	switch {
	case ms > math.MaxInt64/1000:
		return math.MaxInt64
	case ms < math.MinInt64/1000:
		return math.MinInt64
	}
	return ms * 1000
}

// ParseAnnotationQuery parses Zipkin's annotationQuery syntax, e.g.
// "error and http.method=GET": terms separated by " and " (at most 100); a
// term without '=' is a key that must exist (it does not replace an earlier
// key=value term); "k=v" requires tag k to equal v (the last one wins).
// Keys and values are trimmed; an empty key is ignored. It returns nil for
// an empty query.
func ParseAnnotationQuery(s string) map[string]string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	m := make(map[string]string)
	for i, term := range strings.Split(s, " and ") {
		if i == maxAnnotationQueryTerms {
			break
		}
		k, v, hasEq := strings.Cut(term, "=")
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		if !hasEq {
			if _, ok := m[k]; !ok {
				m[k] = ""
			}
			continue
		}
		m[k] = strings.TrimSpace(v)
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// FormatAnnotationQuery is ParseAnnotationQuery's inverse (keys sorted).
func FormatAnnotationQuery(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" and ")
		}
		b.WriteString(k)
		if v := m[k]; v != "" {
			b.WriteByte('=')
			b.WriteString(v)
		}
	}
	return b.String()
}

// Test reports whether a trace (its spans, in any order) matches the query
// as Zipkin's QueryRequest.test does: the trace's timestamp (the root's, or
// else the earliest) lies in the window, and among the spans of the
// requested local service some span matches each condition (service, remote
// service, span name, each annotation term, duration). Stores use it to
// re-filter traces that share the low 64 bits of their IDs.
func (q *QueryRequest) Test(spans []Span) bool {
	var ts int64
	for i := range spans {
		s := &spans[i]
		if s.Timestamp == 0 {
			continue
		}
		if s.ParentID == 0 {
			ts = s.Timestamp
			break
		}
		if ts == 0 || ts > s.Timestamp {
			ts = s.Timestamp
		}
	}
	begin, end := q.WindowMicros()
	if ts == 0 || ts < begin || ts > end {
		return false
	}
	testedDuration := q.MinDuration == 0 && q.MaxDuration == 0
	serviceMatched := q.ServiceName == ""
	remoteMatched := q.RemoteServiceName == ""
	nameMatched := q.SpanName == ""
	remaining := make(map[string]string, len(q.AnnotationQuery))
	for k, v := range q.AnnotationQuery {
		remaining[k] = v
	}
	for i := range spans {
		s := &spans[i]
		if q.ServiceName != "" && q.ServiceName != s.LocalServiceName() {
			continue
		}
		serviceMatched = true
		for _, a := range s.Annotations {
			if v, ok := remaining[a.Value]; ok && v == "" {
				delete(remaining, a.Value)
			}
		}
		for k, tv := range s.Tags {
			if v, ok := remaining[k]; ok && (v == "" || v == tv) {
				delete(remaining, k)
			}
		}
		if !remoteMatched && q.RemoteServiceName == s.RemoteServiceName() {
			remoteMatched = true
		}
		if !nameMatched && q.SpanName == s.Name {
			nameMatched = true
		}
		if !testedDuration {
			if q.MaxDuration != 0 {
				testedDuration = s.Duration >= q.MinDuration && s.Duration <= q.MaxDuration
			} else {
				testedDuration = s.Duration >= q.MinDuration
			}
		}
	}
	return serviceMatched && remoteMatched && nameMatched && len(remaining) == 0 && testedDuration
}
