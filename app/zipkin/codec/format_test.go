package codec

import "testing"

func TestCheckFormat(t *testing.T) {
	proto := AppendProto3Spans(nil, realisticSpans(1))
	tests := []struct {
		want Format
		body string
		msg  string // "" = accepted
	}{
		{JSONV2, `[{"traceId":"1","id":"2","localEndpoint":{"serviceName":"a"}}]`, ""},
		{JSONV2, `[{"traceId":"1","id":"2","binaryAnnotations":[]}]`, "Expected a JSON_V2 encoded list, but received: JSON_V1\n"},
		{JSONV1, `[{"traceId":"1","id":"2","binaryAnnotations":[]}]`, ""},
		{JSONV1, `[{"traceId":"1","id":"2","remoteEndpoint":{}}]`, "Expected a JSON_V1 encoded list, but received: JSON_V2\n"},
		{JSONV1, `[{"traceId":"1","id":"2","tags":{}}]`, "Expected a JSON_V1 encoded list, but received: JSON_V2\n"},
		{JSONV1, `[{"traceId":"1","id":"2"}]`, ""}, // ambiguous: accepted by both
		{JSONV2, `[{"traceId":"1","id":"2"}]`, ""},
		{JSONV2, "[]", ""},
		{JSONV2, "", ""},
		{JSONV2, "\x01\x02\x03\x04", "Expected a JSON_V2 encoded list\n"},
		{JSONV1, `{"traceId":"1"}`, "Expected a JSON_V1 encoded list\n"},
		{JSONV2, " [ ]", "Expected a JSON_V2 encoded list\n"}, // Zipkin sniffs the first byte
		{JSONV2, "\x0a\x00", "Expected a JSON_V2 encoded list\n"},
		{Proto3, string(proto), ""},
		{JSONV2, string(proto), "Expected a JSON_V2 encoded list, but received: PROTO3\n"},
		{Proto3, `[{"traceId":"1","id":"2"}]`, "Expected a PROTO3 encoded list, but received: JSON_V2\n"},
		{JSONV2, "\x0c\x00\x00\x00\x01", "Expected a JSON_V2 encoded list, but received: THRIFT\n"},
	}
	for _, tt := range tests {
		err := CheckFormat(tt.want, []byte(tt.body))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.msg {
			t.Errorf("CheckFormat(%v, %.30q) = %q, want %q", tt.want, tt.body, got, tt.msg)
		}
	}
	if JSONV1.String() != "JSON_V1" || Format(99).String() != "UNKNOWN" {
		t.Error("Format.String")
	}
}
