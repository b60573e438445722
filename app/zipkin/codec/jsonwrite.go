package codec

import (
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// AppendJSONV2Spans appends spans as a JSON v2 list (the body of GET
// /api/v2/trace/{id}) to b. A nil or empty list is written as [].
func AppendJSONV2Spans(b []byte, spans []model.Span) []byte {
	b = append(b, '[')
	for i := range spans {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONV2Span(b, &spans[i])
	}
	return append(b, ']')
}

// AppendJSONV2Traces appends a list of traces, each a list of spans, as
// GET /api/v2/traces answers: [[span,...],...].
func AppendJSONV2Traces(b []byte, traces [][]model.Span) []byte {
	b = append(b, '[')
	for i, t := range traces {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONV2Spans(b, t)
	}
	return append(b, ']')
}

// AppendJSONV2Span appends one span as a JSON v2 object with Zipkin's
// field order: traceId, parentId, id, kind, name, timestamp, duration,
// localEndpoint, remoteEndpoint, annotations (sorted by timestamp, then
// value), tags (sorted by key), debug and shared. Absent fields (zero
// values; timestamp and duration ≤ 0; empty endpoints; false flags) are
// left out. The span is not modified.
func AppendJSONV2Span(b []byte, s *model.Span) []byte {
	b = append(b, `{"traceId":"`...)
	b = s.TraceID.AppendHex(b)
	b = append(b, '"')
	if s.ParentID != 0 {
		b = append(b, `,"parentId":"`...)
		b = s.ParentID.AppendHex(b)
		b = append(b, '"')
	}
	b = append(b, `,"id":"`...)
	b = s.ID.AppendHex(b)
	b = append(b, '"')
	if s.Kind != "" {
		b = append(b, `,"kind":`...)
		b = appendJSONString(b, string(s.Kind))
	}
	if s.Name != "" {
		b = append(b, `,"name":`...)
		b = appendJSONString(b, s.Name)
	}
	if s.Timestamp > 0 {
		b = append(b, `,"timestamp":`...)
		b = strconv.AppendInt(b, s.Timestamp, 10)
	}
	if s.Duration > 0 {
		b = append(b, `,"duration":`...)
		b = strconv.AppendInt(b, s.Duration, 10)
	}
	if !s.LocalEndpoint.IsZero() {
		b = append(b, `,"localEndpoint":`...)
		b = appendEndpoint(b, s.LocalEndpoint)
	}
	if !s.RemoteEndpoint.IsZero() {
		b = append(b, `,"remoteEndpoint":`...)
		b = appendEndpoint(b, s.RemoteEndpoint)
	}
	if len(s.Annotations) > 0 {
		b = append(b, `,"annotations":[`...)
		for i, a := range sortedAnnotations(s.Annotations) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"timestamp":`...)
			b = strconv.AppendInt(b, a.Timestamp, 10)
			b = append(b, `,"value":`...)
			b = appendJSONString(b, a.Value)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(s.Tags) > 0 {
		b = append(b, `,"tags":{`...)
		var buf [16]string
		for i, k := range sortedKeys(buf[:0], s.Tags) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, s.Tags[k])
		}
		b = append(b, '}')
	}
	if s.Debug {
		b = append(b, `,"debug":true`...)
	}
	if s.Shared {
		b = append(b, `,"shared":true`...)
	}
	return append(b, '}')
}

func appendEndpoint(b []byte, e *model.Endpoint) []byte {
	b = append(b, '{')
	sep := false
	field := func(name string) {
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = append(b, name...)
	}
	if e.ServiceName != "" {
		field(`"serviceName":`)
		b = appendJSONString(b, e.ServiceName)
	}
	if e.IPv4.IsValid() {
		field(`"ipv4":"`)
		b = e.IPv4.WithZone("").AppendTo(b)
		b = append(b, '"')
	}
	if e.IPv6.IsValid() {
		field(`"ipv6":"`)
		b = e.IPv6.WithZone("").AppendTo(b)
		b = append(b, '"')
	}
	if e.Port > 0 {
		field(`"port":`)
		b = strconv.AppendInt(b, int64(e.Port), 10)
	}
	return append(b, '}')
}

func annotationLess(a, b model.Annotation) int {
	switch {
	case a.Timestamp < b.Timestamp:
		return -1
	case a.Timestamp > b.Timestamp:
		return 1
	case a.Value < b.Value:
		return -1
	case a.Value > b.Value:
		return 1
	}
	return 0
}

// sortedAnnotations returns anns if sorted, else a sorted copy.
func sortedAnnotations(anns []model.Annotation) []model.Annotation {
	if slices.IsSortedFunc(anns, annotationLess) {
		return anns
	}
	c := slices.Clone(anns)
	slices.SortStableFunc(c, annotationLess)
	return c
}

func sortedKeys(buf []string, m map[string]string) []string {
	for k := range m {
		buf = append(buf, k)
	}
	slices.Sort(buf)
	return buf
}

// AppendDependencyLinks appends links as GET /api/v2/dependencies answers:
// [{"parent":"a","child":"b","callCount":1,"errorCount":1},...], with
// errorCount only when positive.
func AppendDependencyLinks(b []byte, links []model.DependencyLink) []byte {
	b = append(b, '[')
	for i := range links {
		l := &links[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"parent":`...)
		b = appendJSONString(b, l.Parent)
		b = append(b, `,"child":`...)
		b = appendJSONString(b, l.Child)
		b = append(b, `,"callCount":`...)
		b = strconv.AppendInt(b, l.CallCount, 10)
		if l.ErrorCount > 0 {
			b = append(b, `,"errorCount":`...)
			b = strconv.AppendInt(b, l.ErrorCount, 10)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// AppendStrings appends ss as a JSON list of strings (the names and
// autocomplete endpoints). A nil list is written as [].
func AppendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Quotes, backslashes and
// control characters are escaped, as are U+2028 and U+2029 (which break
// JavaScript parsers); invalid UTF-8 becomes U+FFFD (written as
// itself, so that re-encoding decoded output is stable), so the output is
// always valid JSON whatever the span held.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\uFFFD"...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
