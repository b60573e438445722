package codec

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

func TestProto3RoundTrip(t *testing.T) {
	in := realisticSpans(50)
	in[3].Debug = true
	in[4].Kind = model.KindServer
	in[4].Shared = true
	in[5].Tags["empty"] = ""
	for i := range in {
		in[i].Normalize()
	}
	body := AppendProto3Spans(nil, in)
	if got := DetectFormat(body, Proto3); got != Proto3 {
		t.Fatalf("DetectFormat = %v", got)
	}
	out, err := DecodeProto3(body)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip differs:\n in: %+v\nout: %+v", in[4], out[4])
	}
	// The same spans through JSON give the same result.
	viaJSON, err := DecodeJSONV2(AppendJSONV2Spans(nil, out))
	if err != nil || !reflect.DeepEqual(viaJSON, out) {
		t.Fatalf("JSON and proto3 disagree: %v", err)
	}
}

// pbSpan builds a Span message from raw fields for the error tests.
type pbField func([]byte) []byte

func pbBytes(num protowire.Number, v []byte) pbField {
	return func(b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
	}
}

func pbVarint(num protowire.Number, v uint64) pbField {
	return func(b []byte) []byte {
		return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
	}
}

func pbMsg(fields ...pbField) []byte {
	var b []byte
	for _, f := range fields {
		b = f(b)
	}
	return b
}

func pbList(spans ...[]byte) []byte {
	var b []byte
	for _, s := range spans {
		b = protowire.AppendTag(b, pbListSpans, protowire.BytesType)
		b = protowire.AppendBytes(b, s)
	}
	return b
}

var (
	id8  = []byte{0, 0, 0, 0, 0, 0, 0, 1}
	id16 = []byte{0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1}
)

func TestProto3Leniency(t *testing.T) {
	ep := pbMsg(pbBytes(pbEndpointServiceName, []byte("FrontEnd")),
		pbBytes(pbEndpointIPv4, []byte{1, 2, 3}), // wrong length: dropped
		pbBytes(pbEndpointIPv6, netip.MustParseAddr("::ffff:10.0.0.1").AsSlice()),
		pbVarint(pbEndpointPort, uint64(0xffffffffffffffff)), // -1: absent
		pbVarint(99, 1)) // unknown
	ann := func(ts uint64, v string) []byte {
		var b []byte
		if ts != 0 {
			b = protowire.AppendFixed64(protowire.AppendTag(b, 1, protowire.Fixed64Type), ts)
		}
		if v != "" {
			b = protowire.AppendString(protowire.AppendTag(b, 2, protowire.BytesType), v)
		}
		return b
	}
	span := pbMsg(pbBytes(pbTraceID, id16), pbBytes(pbID, id8),
		pbBytes(pbParentID, make([]byte, 8)), // all zeros: absent
		pbVarint(pbKind, 9),                  // unknown kind: ignored
		pbBytes(pbName, []byte("GET")),
		pbVarint(pbTimestamp, 5), // wrong wire type: ignored
		pbBytes(pbLocalEndpoint, ep),
		pbBytes(pbRemoteEndpoint, nil), // empty: absent
		pbBytes(pbAnnotations, ann(0, "no timestamp")),
		pbBytes(pbAnnotations, ann(7, "")),
		pbBytes(pbAnnotations, ann(8, "ok")),
		pbBytes(pbTags, pbMsg(pbBytes(pbMapValue, []byte("no key")))),
		pbBytes(pbTags, pbMsg(pbBytes(pbMapKey, []byte("k")))),
		pbVarint(pbDebug, 1),
		pbVarint(77, 3))
	spans, err := DecodeProto3(pbList(span))
	if err != nil {
		t.Fatal(err)
	}
	s := spans[0]
	want := model.Span{
		TraceID:       model.TraceID{High: 2, Low: 1},
		ID:            1,
		Name:          "get",
		LocalEndpoint: &model.Endpoint{ServiceName: "frontend", IPv4: netip.MustParseAddr("10.0.0.1")},
		Annotations:   []model.Annotation{{Timestamp: 8, Value: "ok"}},
		Tags:          map[string]string{"k": ""},
		Debug:         true,
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got %+v %+v\nwant %+v %+v", s, s.LocalEndpoint, want, want.LocalEndpoint)
	}
}

func TestProto3Errors(t *testing.T) {
	good := pbMsg(pbBytes(pbTraceID, id8), pbBytes(pbID, id8))
	tests := []struct {
		name string
		span []byte
		msg  string
	}{
		{"trace ID of 4 bytes", pbMsg(pbBytes(pbTraceID, []byte{1, 2, 3, 4}), pbBytes(pbID, id8)), "trace_id must be 8 or 16 bytes but was 4 at spans[1].trace_id"},
		{"all-zero trace ID", pbMsg(pbBytes(pbTraceID, make([]byte, 16)), pbBytes(pbID, id8)), "traceId is all zeros at spans[1].trace_id"},
		{"all-zero span ID", pbMsg(pbBytes(pbTraceID, id8), pbBytes(pbID, make([]byte, 8))), "id is all zeros at spans[1].id"},
		{"span ID of 16 bytes", pbMsg(pbBytes(pbTraceID, id8), pbBytes(pbID, id16)), "id must be 8 bytes but was 16 at spans[1].id"},
		{"parent ID of 2 bytes", pbMsg(pbBytes(pbTraceID, id8), pbBytes(pbID, id8), pbBytes(pbParentID, []byte{1, 2})), "parent_id must be 8 bytes but was 2 at spans[1].parent_id"},
		{"missing IDs", pbMsg(pbBytes(pbName, []byte("x"))), "Missing : traceId id at spans[1]"},
		{"port too large", pbMsg(pbBytes(pbTraceID, id8), pbBytes(pbID, id8), pbBytes(pbRemoteEndpoint, pbMsg(pbVarint(pbEndpointPort, 70000)))), "invalid port 70000 at spans[1].remote_endpoint.port"},
		{"corrupt inside the span", append(pbMsg(pbBytes(pbTraceID, id8), pbBytes(pbID, id8)), 0x2a, 0x05, 'a'), "Malformed (unexpected EOF at byte"},
		{"corrupt inside an endpoint", pbMsg(pbBytes(pbTraceID, id8), pbBytes(pbID, id8), pbBytes(pbLocalEndpoint, []byte{0x0a, 0x09})), "Malformed (unexpected EOF at byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := pbList(good, tt.span, good)
			spans, err := DecodeProto3(body)
			var be *BatchError
			if !errors.As(err, &be) {
				t.Fatalf("err %v, want *BatchError", err)
			}
			if !strings.HasPrefix(err.Error(), tt.msg) || !strings.HasSuffix(err.Error(), " reading List<Span> from proto3") {
				t.Errorf("message %q, want prefix %q", err.Error(), tt.msg)
			}
			if be.Malformed || len(be.Errors) != 1 || be.Errors[0].Index != 1 || len(spans) != 2 {
				t.Errorf("errors %+v malformed %v good %d", be.Errors, be.Malformed, len(spans))
			}
		})
	}
}

func TestProto3MalformedList(t *testing.T) {
	good := pbList(pbMsg(pbBytes(pbTraceID, id8), pbBytes(pbID, id8)))
	for _, body := range [][]byte{
		append(append([]byte{}, good...), 0x0a, 0x40, 1), // length beyond the end
		append(append([]byte{}, good...), 0x0a),          // tag without value
		append(append([]byte{}, good...), 0xff),          // truncated tag varint
	} {
		spans, err := DecodeProto3(body)
		var be *BatchError
		if !errors.As(err, &be) || !be.Malformed || len(spans) != 1 || be.Errors[0].Index != 1 {
			t.Errorf("% x: spans %d err %v", body, len(spans), err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "Malformed (") {
			t.Errorf("message %q", err)
		}
	}
	if spans, err := DecodeProto3(nil); spans != nil || err != nil {
		t.Errorf("empty body: %v %v", spans, err)
	}
}
