package collector

import (
	"errors"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// TestDecode: formats are told apart as Zipkin's SpanBytesDecoderDetector
// tells them (v2 on `Endpoint"` or `"tags"`, else v1; proto3 on 10 and a
// non-zero byte; thrift refused; a bare object and other bytes refused).
func TestDecode(t *testing.T) {
	sp := model.Span{TraceID: model.TraceID{Low: 1}, ID: 2, Name: "op", Timestamp: 1, Duration: 1,
		LocalEndpoint: &model.Endpoint{ServiceName: "svc"}}
	proto := codec.AppendProto3Spans(nil, []model.Span{sp})
	for _, tc := range []struct {
		name   string
		msg    []byte
		format codec.Format
		spans  int
		err    bool
	}{
		{"empty", nil, codec.FormatUnknown, 0, false},
		{"v2 endpoint", codec.AppendJSONV2Spans(nil, []model.Span{sp}), codec.JSONV2, 1, false},
		{"v2 tags", []byte(`[{"traceId":"1","id":"2","tags":{"a":"b"}}]`), codec.JSONV2, 1, false},
		{"v1", []byte(`[{"traceId":"1","id":"2","name":"op","binaryAnnotations":[{"key":"a","value":"b"}]}]`), codec.JSONV1, 1, false},
		{"ambiguous is v1", []byte(`[{"traceId":"1","id":"2","name":"op","timestamp":1,"duration":1}]`), codec.JSONV1, 1, false},
		{"proto3", proto, codec.Proto3, 1, false},
		{"thrift list", []byte{12, 0, 0, 0, 1}, codec.Thrift, 0, true},
		{"thrift single span", []byte{11, 0, 1}, codec.Thrift, 0, true},
		{"proto3 tag then 0", []byte{10, 0}, codec.Thrift, 0, true},
		{"object", []byte(`{"traceId":"1"}`), codec.FormatUnknown, 0, true},
		{"text", []byte("hello"), codec.FormatUnknown, 0, true},
		{"malformed", []byte(`[{"traceId":`), codec.JSONV1, 0, true},
		{"one byte", []byte(`[`), codec.JSONV1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spans, format, err := Decode(tc.msg)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if format != tc.format {
				t.Errorf("format %v, want %v", format, tc.format)
			}
			if err == nil && len(spans) != tc.spans {
				t.Errorf("%d spans, want %d", len(spans), tc.spans)
			}
			if tc.format == codec.Thrift && !errors.Is(err, ErrThrift) {
				t.Errorf("thrift: err %v, want ErrThrift", err)
			}
		})
	}
}
