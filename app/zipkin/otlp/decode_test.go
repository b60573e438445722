package otlp

import (
	"bytes"
	"strings"
	"testing"
)

// TestDecodeJSONHexIDs: OTLP JSON carries IDs as hex (either case), not
// base64; an ID of the wrong length rejects its span, not the request.
func TestDecodeJSONHexIDs(t *testing.T) {
	body := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"s"}}]},
	  "scopeSpans":[{"scope":{"name":"x"},"spans":[
	    {"traceId":"0102030405060708090A0B0C0D0E0F10","spanId":"000000000000002a","parentSpanId":"0000000000000007",
	     "name":"a","kind":2,"startTimeUnixNano":"1700000000000000000","endTimeUnixNano":1700000000000001000,
	     "links":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0000000000000001"}],"unknownField":1},
	    {"traceId":"0102030405060708090a0b0c0d0e0f","spanId":"000000000000002b","name":"short"}
	  ]}]}]}`
	req, err := DecodeJSON([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	sp := req.ResourceSpans[0].ScopeSpans[0].Spans[0]
	if !bytes.Equal(sp.TraceId, tid) || !bytes.Equal(sp.SpanId, sid) || !bytes.Equal(sp.ParentSpanId, pid) ||
		!bytes.Equal(sp.Links[0].TraceId, tid) {
		t.Fatalf("ids %x %x %x", sp.TraceId, sp.SpanId, sp.ParentSpanId)
	}
	res := ToSpans(req.ResourceSpans)
	if len(res.Spans) != 1 || res.Rejected != 1 || res.Spans[0].Kind != "SERVER" || res.Spans[0].Duration != 1 {
		t.Fatalf("got %+v rejected %d %q", res.Spans, res.Rejected, res.Message)
	}
	if _, err := DecodeJSON([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"abcde"}]}]}]}`)); err == nil ||
		!strings.Contains(err.Error(), "malformed") {
		t.Fatalf("5-character id: %v", err)
	}
	if _, err := DecodeProto([]byte{0x0a, 0xff}); err == nil {
		t.Fatal("malformed protobuf decoded")
	}
}
