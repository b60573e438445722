package otlp

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// DecodeProto decodes a binary ExportTraceServiceRequest.
func DecodeProto(body []byte) (*coltracepb.ExportTraceServiceRequest, error) {
	req := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(body, req); err != nil {
		return nil, fmt.Errorf("malformed ExportTraceServiceRequest protobuf: %v", err)
	}
	return req, nil
}

// DecodeJSON decodes an ExportTraceServiceRequest in the OTLP JSON
// encoding: the proto3 JSON mapping, unknown fields ignored, except that
// traceId, spanId and parentSpanId (of spans and links) are hex strings,
// case-insensitive, not base64.
//
// It reads them with the stock proto3 JSON parser, which takes them for
// base64: a 32-character hex trace ID decodes as 24 bytes and a
// 16-character span ID as 12, and encoding those bytes back to base64
// gives the hex text again, which is then hex-decoded. An ID of any other
// length is left as the parser decoded it, so ToSpans rejects its span
// (wrong length); text that is not valid base64 at all (e.g. 5 characters)
// fails the whole request.
func DecodeJSON(body []byte) (*coltracepb.ExportTraceServiceRequest, error) {
	req := &coltracepb.ExportTraceServiceRequest{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, req); err != nil {
		return nil, fmt.Errorf("malformed ExportTraceServiceRequest JSON: %v", err)
	}
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				sp.TraceId = hexID(sp.TraceId, 16)
				sp.SpanId = hexID(sp.SpanId, 8)
				sp.ParentSpanId = hexID(sp.ParentSpanId, 8)
				for _, l := range sp.GetLinks() {
					l.TraceId = hexID(l.TraceId, 16)
					l.SpanId = hexID(l.SpanId, 8)
				}
			}
		}
	}
	return req, nil
}

// hexID turns the base64 reading of a hex ID of n bytes back into the ID;
// anything else is returned unchanged (and has the wrong length).
func hexID(b []byte, n int) []byte {
	if len(b) != 2*n*3/4 {
		return b
	}
	text := base64.StdEncoding.EncodeToString(b)
	id, err := hex.DecodeString(text)
	if err != nil {
		return b
	}
	return id
}
