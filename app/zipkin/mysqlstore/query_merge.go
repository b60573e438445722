package mysqlstore

import (
	"sort"
	"strings"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// mergeTrace merges the fragments of one trace as Zipkin's Trace.merge
// does: spans sorted by ID, then non-shared before shared and client before
// other kinds, then by local endpoint; consecutive spans with the same ID,
// the same shared flag and compatible local endpoints merged into one (the
// first fragment's set fields win, tags and annotations are united); the
// longest trace ID used throughout; a SERVER span following a CLIENT span
// with its ID marked shared; a shared span without parent given its
// client's parent. The input is not modified.
func mergeTrace(spans []model.Span) []model.Span {
	out := make([]model.Span, len(spans))
	for i := range spans {
		out[i] = cloneSpan(&spans[i])
	}
	if len(out) <= 1 {
		return out
	}
	sort.SliceStable(out, func(i, j int) bool { return mergeLess(&out[i], &out[j]) })

	traceID := out[0].TraceID
	for i := 1; i < len(out); i++ {
		if traceID.High == 0 {
			traceID = out[i].TraceID
		}
	}

	var last *model.Span
	for i := 0; i < len(out); i++ {
		sp := &out[i]
		sp.TraceID = traceID
		var local endpointTracker
		tracking := false
		for i+1 < len(out) {
			next := &out[i+1]
			if next.ID != sp.ID {
				break
			}
			if !tracking {
				tracking = true
				local.tryMerge(sp.LocalEndpoint)
			}
			if sp.Shared == next.Shared && local.tryMerge(next.LocalEndpoint) {
				mergeSpan(sp, next)
				out = append(out[:i+1], out[i+2:]...)
				continue
			}
			break
		}
		if last != nil && last.ID == sp.ID {
			if last.Kind == model.KindClient && sp.Kind == model.KindServer && !sp.Shared {
				sp.Shared = true
			}
			if sp.Shared && sp.ParentID == 0 && last.ParentID != 0 {
				sp.ParentID = last.ParentID
			}
		}
		sp.Normalize()
		last = sp
	}
	return out
}

func cloneSpan(s *model.Span) model.Span {
	c := *s
	c.LocalEndpoint = copyEndpoint(s.LocalEndpoint)
	c.RemoteEndpoint = copyEndpoint(s.RemoteEndpoint)
	if s.Annotations != nil {
		c.Annotations = append([]model.Annotation(nil), s.Annotations...)
	}
	if s.Tags != nil {
		c.Tags = make(map[string]string, len(s.Tags))
		for k, v := range s.Tags {
			c.Tags[k] = v
		}
	}
	return c
}

// mergeSpan fills sp's absent fields from next and unites their
// annotations, tags and flags (Zipkin's Span.Builder.merge).
func mergeSpan(sp, next *model.Span) {
	if sp.ParentID == 0 {
		sp.ParentID = next.ParentID
	}
	if sp.Kind == "" {
		sp.Kind = next.Kind
	}
	if sp.Name == "" {
		sp.Name = next.Name
	}
	if sp.Timestamp == 0 {
		sp.Timestamp = next.Timestamp
	}
	if sp.Duration == 0 {
		sp.Duration = next.Duration
	}
	sp.LocalEndpoint = mergeEndpoint(sp.LocalEndpoint, next.LocalEndpoint)
	sp.RemoteEndpoint = mergeEndpoint(sp.RemoteEndpoint, next.RemoteEndpoint)
	sp.Annotations = append(sp.Annotations, next.Annotations...)
	if len(next.Tags) > 0 {
		if sp.Tags == nil {
			sp.Tags = make(map[string]string, len(next.Tags))
		}
		for k, v := range next.Tags {
			sp.Tags[k] = v
		}
	}
	sp.Debug = sp.Debug || next.Debug
	sp.Shared = sp.Shared || next.Shared
}

func mergeEndpoint(a, b *model.Endpoint) *model.Endpoint {
	if a == nil {
		return copyEndpoint(b)
	}
	if b == nil {
		return a
	}
	if a.ServiceName == "" {
		a.ServiceName = b.ServiceName
	}
	if !a.IPv4.IsValid() {
		a.IPv4 = b.IPv4
	}
	if !a.IPv6.IsValid() {
		a.IPv6 = b.IPv6
	}
	if a.Port == 0 {
		a.Port = b.Port
	}
	return a
}

// endpointTracker decides whether endpoint fragments describe one endpoint:
// no field set on both sides may differ.
type endpointTracker struct {
	model.Endpoint
}

func (t *endpointTracker) tryMerge(e *model.Endpoint) bool {
	if e == nil {
		return true
	}
	if t.ServiceName != "" && e.ServiceName != "" && t.ServiceName != e.ServiceName ||
		t.IPv4.IsValid() && e.IPv4.IsValid() && t.IPv4 != e.IPv4 ||
		t.IPv6.IsValid() && e.IPv6.IsValid() && t.IPv6 != e.IPv6 ||
		t.Port != 0 && e.Port != 0 && t.Port != e.Port {
		return false
	}
	mergeEndpoint(&t.Endpoint, e)
	return true
}

func mergeLess(a, b *model.Span) bool {
	if a.ID != b.ID {
		return a.ID < b.ID
	}
	if c := compareShared(a, b); c != 0 {
		return c < 0
	}
	return compareEndpoint(a.LocalEndpoint, b.LocalEndpoint) < 0
}

// compareShared orders non-shared before shared and, among non-shared
// spans, clients first.
func compareShared(a, b *model.Span) int {
	switch {
	case a.Shared && b.Shared:
		return 0
	case a.Shared:
		return 1
	case b.Shared:
		return -1
	}
	ac, bc := a.Kind == model.KindClient, b.Kind == model.KindClient
	switch {
	case ac == bc:
		return 0
	case ac:
		return -1
	}
	return 1
}

// compareEndpoint orders absent endpoints first, then by service name,
// IPv4 and IPv6 with absent values last.
func compareEndpoint(a, b *model.Endpoint) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	if c := compareAbsentLast(a.ServiceName, b.ServiceName); c != 0 {
		return c
	}
	if c := compareAbsentLast(addrString(a.IPv4), addrString(b.IPv4)); c != 0 {
		return c
	}
	return compareAbsentLast(addrString(a.IPv6), addrString(b.IPv6))
}

func addrString(a interface {
	IsValid() bool
	String() string
}) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

func compareAbsentLast(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "":
		return 1
	case b == "":
		return -1
	}
	return strings.Compare(a, b)
}

func copyEndpoint(e *model.Endpoint) *model.Endpoint {
	if e == nil {
		return nil
	}
	c := *e
	return &c
}
