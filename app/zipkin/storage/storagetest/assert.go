package storagetest

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	"github.com/sqlpool/sqlpool/app/zipkin/storage"
)

// GetTraces runs s.GetTraces(q) and fails t on an error.
func GetTraces(t testing.TB, s storage.SpanStore, q model.QueryRequest) [][]model.Span {
	t.Helper()
	got, err := s.GetTraces(Ctx(t), q)
	if err != nil {
		t.Fatalf("GetTraces(%s): %v", Describe(q), err)
	}
	return got
}

// Deps runs s.GetDependencies(endTs, lookback) and fails t on an error.
func Deps(t testing.TB, s storage.SpanStore, endTs, lookback int64) []model.DependencyLink {
	t.Helper()
	got, err := s.GetDependencies(Ctx(t), endTs, lookback)
	if err != nil {
		t.Fatalf("GetDependencies(TODAY%+dms, %d): %v", endTs-Today, lookback, err)
	}
	return got
}

// Canonical merges a trace with Zipkin's Trace.merge rules and orders its
// spans, for comparison.
func Canonical(trace []model.Span) []model.Span {
	in := make([]model.Span, len(trace))
	for i := range trace {
		in[i] = Clone(trace[i])
	}
	out := mysqlstore.MergeTrace(in)
	sort.SliceStable(out, func(i, j int) bool { return SpanString(&out[i]) < SpanString(&out[j]) })
	return out
}

// SpanString renders a span on one line, every field shown, long tag
// values abridged.
func SpanString(s *model.Span) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{trace=%s parent=%s id=%s kind=%s name=%q ts=%d dur=%d", s.TraceID, s.ParentID, s.ID,
		s.Kind, s.Name, s.Timestamp, s.Duration)
	if s.LocalEndpoint != nil {
		fmt.Fprintf(&b, " local=%+v", *s.LocalEndpoint)
	}
	if s.RemoteEndpoint != nil {
		fmt.Fprintf(&b, " remote=%+v", *s.RemoteEndpoint)
	}
	if len(s.Annotations) > 0 {
		fmt.Fprintf(&b, " annotations=%v", s.Annotations)
	}
	if len(s.Tags) > 0 {
		keys := make([]string, 0, len(s.Tags))
		for k := range s.Tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString(" tags={")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(" ")
			}
			v := s.Tags[k]
			if len(v) > 40 {
				v = fmt.Sprintf("%.20s…(%d bytes)", v, len(v))
			}
			fmt.Fprintf(&b, "%s=%q", k, v)
		}
		b.WriteString("}")
	}
	if s.Debug {
		b.WriteString(" debug")
	}
	if s.Shared {
		b.WriteString(" shared")
	}
	b.WriteString("}")
	return b.String()
}

// TraceString renders a trace's spans, one per line, in their order.
func TraceString(trace []model.Span) string {
	parts := make([]string, len(trace))
	for i := range trace {
		parts[i] = SpanString(&trace[i])
	}
	return strings.Join(parts, "\n    ")
}

// TracesString renders traces canonically (Canonical), sorted, for
// comparison.
func TracesString(traces [][]model.Span) []string {
	out := make([]string, len(traces))
	for i, tr := range traces {
		out[i] = TraceString(Canonical(tr))
	}
	sort.Strings(out)
	return out
}

// AssertTraces checks that got holds exactly the traces want, in any
// order, each compared after Trace.merge; what names the call in the
// error.
func AssertTraces(t testing.TB, what string, got [][]model.Span, want ...[]model.Span) {
	t.Helper()
	g, w := TracesString(got), TracesString(want)
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Errorf("%s: got %d traces:\n  %s\nwant %d:\n  %s", what, len(g), strings.Join(g, "\n  "), len(w), strings.Join(w, "\n  "))
	}
}

// AssertGetTraces runs GetTraces(q) and checks its result with
// AssertTraces.
func AssertGetTraces(t testing.TB, s storage.SpanStore, q model.QueryRequest, want ...[]model.Span) {
	t.Helper()
	AssertTraces(t, fmt.Sprintf("GetTraces(%s)", Describe(q)), GetTraces(t, s, q), want...)
}

// Describe renders a request with its window relative to Today.
func Describe(q model.QueryRequest) string {
	var parts []string
	if q.ServiceName != "" {
		parts = append(parts, "service="+q.ServiceName)
	}
	if q.RemoteServiceName != "" {
		parts = append(parts, "remote="+q.RemoteServiceName)
	}
	if q.SpanName != "" {
		parts = append(parts, "span="+q.SpanName)
	}
	if len(q.AnnotationQuery) > 0 {
		parts = append(parts, "annotationQuery="+model.FormatAnnotationQuery(q.AnnotationQuery))
	}
	if q.MinDuration != 0 || q.MaxDuration != 0 {
		parts = append(parts, fmt.Sprintf("duration=[%d,%d]", q.MinDuration, q.MaxDuration))
	}
	parts = append(parts, fmt.Sprintf("endTs=TODAY%+dms lookback=%d limit=%d", q.EndTs-Today, q.Lookback, q.Limit))
	return strings.Join(parts, " ")
}

// AssertTrace runs GetTrace(id) and checks that it returns want (none when
// want is empty), compared after Trace.merge.
func AssertTrace(t testing.TB, s storage.SpanStore, id model.TraceID, want []model.Span) {
	t.Helper()
	got, err := s.GetTrace(Ctx(t), id)
	if err != nil {
		t.Fatalf("GetTrace(%s): %v", id, err)
	}
	var gotT, wantT [][]model.Span
	if len(got) > 0 {
		gotT = append(gotT, got)
	}
	if len(want) > 0 {
		wantT = append(wantT, want)
	}
	AssertTraces(t, "GetTrace("+id.String()+")", gotT, wantT...)
}

// AssertStrings checks that got is want, in order (nil and empty alike).
func AssertStrings(t testing.TB, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

// LinksString renders links sorted, for comparison.
func LinksString(ls []model.DependencyLink) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = fmt.Sprintf("%s->%s calls=%d errors=%d", l.Parent, l.Child, l.CallCount, l.ErrorCount)
	}
	sort.Strings(s)
	return strings.Join(s, "; ")
}

// AssertLinks checks that got holds exactly the links want, in any order.
func AssertLinks(t testing.TB, what string, got []model.DependencyLink, want ...model.DependencyLink) {
	t.Helper()
	if LinksString(got) != LinksString(want) {
		t.Errorf("%s = [%s], want [%s]", what, LinksString(got), LinksString(want))
	}
}

// names runs f, a name or autocomplete lookup, and fails t on an error.
func names(t testing.TB, what string, f func() ([]string, error)) []string {
	t.Helper()
	got, err := f()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return got
}
