package server

import (
	"errors"
	"strings"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// decodeSpans picks the format a POST says it carries — on /api/v2/spans
// proto3 when the Content-Type names protobuf, else JSON v2 (with or
// without a Content-Type, as Zipkin); on /api/v1/spans JSON v1 — checks
// that the body looks like it with Zipkin's messages ("Expected a JSON_V2
// encoded list, but received: JSON_V1\n"), and decodes and validates every
// span. Any error is answered with 400 and its message.
func decodeSpans(ep endpointKind, contentType string, body []byte) ([]model.Span, error) {
	spans, _, err := decodeSpansFormat(ep, contentType, body)
	return spans, err
}

// decodeSpansFormat is decodeSpans that also returns the format decoded.
func decodeSpansFormat(ep endpointKind, contentType string, body []byte) ([]model.Span, codec.Format, error) {
	ct := strings.ToLower(contentType)
	want := codec.JSONV2
	switch {
	case ep == v1Endpoint && strings.Contains(ct, "thrift"):
		return nil, codec.Thrift, errors.New("THRIFT encoded spans are not supported by this server; send JSON_V1, JSON_V2 or PROTO3")
	case ep == v1Endpoint:
		want = codec.JSONV1
	case strings.Contains(ct, "protobuf"):
		want = codec.Proto3
	}
	if err := codec.CheckFormat(want, body); err != nil {
		return nil, want, err
	}
	var spans []model.Span
	var err error
	switch want {
	case codec.Proto3:
		spans, err = codec.DecodeProto3(body)
	case codec.JSONV1:
		spans, err = codec.DecodeJSONV1(body)
	default:
		spans, err = codec.DecodeJSONV2(body)
	}
	return spans, want, err
}
