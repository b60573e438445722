package model

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"
)

func TestNormalize(t *testing.T) {
	s := Span{
		TraceID:        TraceID{Low: 1},
		ParentID:       2,
		ID:             2,
		Kind:           KindClient,
		Name:           "GET /Ä",
		Timestamp:      -1,
		Duration:       -1,
		LocalEndpoint:  &Endpoint{ServiceName: "FrontEnd", IPv6: netip.MustParseAddr("::ffff:1.2.3.4"), Port: -1},
		RemoteEndpoint: &Endpoint{Port: -5},
		Annotations:    []Annotation{{Timestamp: 2, Value: "b"}, {Timestamp: 1, Value: "z"}, {Timestamp: 2, Value: "a"}, {Timestamp: 2, Value: "b"}},
		Tags:           map[string]string{},
		Shared:         true,
	}
	s.Normalize()
	want := Span{
		TraceID:       TraceID{Low: 1},
		ID:            2,
		Kind:          KindClient,
		Name:          "get /ä",
		LocalEndpoint: &Endpoint{ServiceName: "frontend", IPv4: netip.MustParseAddr("1.2.3.4")},
		Annotations:   []Annotation{{Timestamp: 1, Value: "z"}, {Timestamp: 2, Value: "a"}, {Timestamp: 2, Value: "b"}},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got %+v %+v\nwant %+v %+v", s, s.LocalEndpoint, want, want.LocalEndpoint)
	}
}

// TestNormalizeNormalisedSpanDoesNotAllocate guards the decode hot path:
// the codecs normalise every span they read.
func TestNormalizeNormalisedSpanDoesNotAllocate(t *testing.T) {
	s := Span{
		TraceID:       TraceID{Low: 1},
		ID:            2,
		Name:          "get",
		LocalEndpoint: &Endpoint{ServiceName: "a"},
		Annotations:   []Annotation{{Timestamp: 1, Value: "a"}, {Timestamp: 2, Value: "b"}, {Timestamp: 3, Value: "c"}},
		Tags:          map[string]string{"k": "v"},
	}
	if n := testing.AllocsPerRun(100, s.Normalize); n != 0 {
		t.Fatalf("Normalize allocated %v times", n)
	}
}

func TestParseTraceIDAllZerosKeepsInput(t *testing.T) {
	in := "00000000000000000000000000000000"
	_, err := ParseTraceID(in)
	var ie *IDError
	if !errors.As(err, &ie) || ie.Value != in || ie.Msg != "traceId is all zeros" {
		t.Fatalf("%#v", err)
	}
}
