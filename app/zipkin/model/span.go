package model

import (
	"cmp"
	"net/netip"
	"slices"
	"sort"
	"strings"
)

// Kind is a span's role in an RPC or messaging exchange; "" means unknown.
type Kind string

// The kinds of the v2 model.
const (
	KindUnset    Kind = ""
	KindClient   Kind = "CLIENT"
	KindServer   Kind = "SERVER"
	KindProducer Kind = "PRODUCER"
	KindConsumer Kind = "CONSUMER"
)

// Valid reports whether k is unset or one of the four kinds.
func (k Kind) Valid() bool {
	switch k {
	case KindUnset, KindClient, KindServer, KindProducer, KindConsumer:
		return true
	}
	return false
}

// Endpoint is a network endpoint of a span. A zero Endpoint is "absent"
// (Normalize turns a pointer to one into nil).
type Endpoint struct {
	ServiceName string     // lower-cased by Normalize; "" when absent
	IPv4        netip.Addr // an IPv4 address, or the zero Addr when absent
	IPv6        netip.Addr // an IPv6 address, or the zero Addr when absent
	Port        int        // 1–65535; 0 when absent
}

// IsZero reports whether no field of e is set.
func (e *Endpoint) IsZero() bool {
	return e == nil || (e.ServiceName == "" && !e.IPv4.IsValid() && !e.IPv6.IsValid() && e.Port == 0)
}

// Annotation is an event on a span's timeline.
type Annotation struct {
	Timestamp int64 // epoch microseconds; required
	Value     string
}

// Span is a Zipkin v2 span.
type Span struct {
	TraceID        TraceID
	ParentID       ID // 0 for a root span
	ID             ID
	Kind           Kind
	Name           string // lower-cased by Normalize; "" when absent
	Timestamp      int64  // epoch microseconds; 0 when absent
	Duration       int64  // microseconds; 0 when absent
	LocalEndpoint  *Endpoint
	RemoteEndpoint *Endpoint
	Annotations    []Annotation      // sorted by (Timestamp, Value) by Normalize
	Tags           map[string]string // nil or empty when none
	Debug          bool
	Shared         bool
}

// LocalServiceName returns the local endpoint's service name or "".
func (s *Span) LocalServiceName() string {
	if s.LocalEndpoint == nil {
		return ""
	}
	return s.LocalEndpoint.ServiceName
}

// RemoteServiceName returns the remote endpoint's service name or "".
func (s *Span) RemoteServiceName() string {
	if s.RemoteEndpoint == nil {
		return ""
	}
	return s.RemoteEndpoint.ServiceName
}

// Normalize applies Zipkin's model rules in place: names and service names
// lower-cased; negative timestamp or duration cleared; a parent ID equal to
// the span ID cleared; Shared cleared on a CLIENT span; empty endpoints
// dropped; an IPv4-mapped IPv6 address moved to IPv4; annotations sorted by
// (timestamp, value) with exact duplicates removed; an empty tag map set to
// nil.
func (s *Span) Normalize() {
	s.Name = lower(s.Name)
	if s.Timestamp < 0 {
		s.Timestamp = 0
	}
	if s.Duration < 0 {
		s.Duration = 0
	}
	if s.ParentID == s.ID {
		s.ParentID = 0
	}
	if s.Kind == KindClient {
		s.Shared = false
	}
	s.LocalEndpoint = normalizeEndpoint(s.LocalEndpoint)
	s.RemoteEndpoint = normalizeEndpoint(s.RemoteEndpoint)
	if len(s.Annotations) > 1 {
		if !slices.IsSortedFunc(s.Annotations, compareAnnotations) {
			slices.SortStableFunc(s.Annotations, compareAnnotations)
		}
		out := s.Annotations[:1]
		for _, a := range s.Annotations[1:] {
			if a != out[len(out)-1] {
				out = append(out, a)
			}
		}
		s.Annotations = out
	}
	if len(s.Annotations) == 0 {
		s.Annotations = nil
	}
	if len(s.Tags) == 0 {
		s.Tags = nil
	}
}

// compareAnnotations orders annotations by timestamp, then value.
func compareAnnotations(a, b Annotation) int {
	if c := cmp.Compare(a.Timestamp, b.Timestamp); c != 0 {
		return c
	}
	return strings.Compare(a.Value, b.Value)
}

func normalizeEndpoint(e *Endpoint) *Endpoint {
	if e == nil {
		return nil
	}
	e.ServiceName = lower(e.ServiceName)
	if e.IPv6.IsValid() && e.IPv6.Is4In6() {
		if !e.IPv4.IsValid() {
			e.IPv4 = e.IPv6.Unmap()
		}
		e.IPv6 = netip.Addr{}
	}
	if e.IPv4.IsValid() && !e.IPv4.Is4() {
		e.IPv4 = netip.Addr{}
	}
	if e.IPv6.IsValid() && !e.IPv6.Is6() {
		e.IPv6 = netip.Addr{}
	}
	if e.Port < 0 {
		e.Port = 0
	}
	if e.IsZero() {
		return nil
	}
	return e
}

// lower lower-cases s, allocating only when s has an upper-case letter.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || c >= 0x80 {
			return strings.ToLower(s)
		}
	}
	return s
}

// SortedTagKeys returns the span's tag keys in ascending order, as Zipkin
// writes them.
func (s *Span) SortedTagKeys() []string {
	keys := make([]string, 0, len(s.Tags))
	for k := range s.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// DependencyLink is an aggregate edge of the service graph.
type DependencyLink struct {
	Parent     string // calling service
	Child      string // called service
	CallCount  int64
	ErrorCount int64 // 0 is omitted from JSON
}
