package codec_test

import (
	"errors"
	"fmt"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

func ExampleDecodeJSONV2() {
	body := []byte(`[
	  {"traceId":"5af7183fb1d4cf5f","id":"1","name":"GET","localEndpoint":{"serviceName":"Frontend"}},
	  {"traceId":"5AF7183FB1D4CF5F","id":"2"},
	  {"traceId":"5af7183fb1d4cf5f","id":"3","tags":{"error":null}}
	]`)
	spans, err := codec.DecodeJSONV2(body)
	// An HTTP server answers 400 with err.Error() and stores nothing.
	fmt.Println(err)
	// A library user may keep the valid spans and see which were not.
	var be *codec.BatchError
	if errors.As(err, &be) {
		fmt.Println("invalid:", be.Indexes())
	}
	for _, s := range spans {
		fmt.Println("valid:", s.ID, s.Name, s.LocalServiceName())
	}
	// Output:
	// 5AF7183FB1D4CF5F should be lower-hex encoded with no prefix at $[1].traceId; No value at $[2].tags.error reading List<Span> from json (2 invalid spans)
	// invalid: [1 2]
	// valid: 0000000000000001 get frontend
}

func ExampleAppendJSONV2Spans() {
	spans := []model.Span{{
		TraceID:       model.TraceID{Low: 0x5af7183fb1d4cf5f},
		ID:            0x352bff9a74ca9ad2,
		Kind:          model.KindServer,
		Name:          "get /api",
		Timestamp:     1700000000000000,
		Duration:      1500,
		LocalEndpoint: &model.Endpoint{ServiceName: "backend", Port: 8080},
		Tags:          map[string]string{"http.path": "/api", "http.method": "GET"},
	}}
	fmt.Println(string(codec.AppendJSONV2Spans(nil, spans)))
	fmt.Println(string(codec.AppendDependencyLinks(nil, []model.DependencyLink{{Parent: "frontend", Child: "backend", CallCount: 3}})))
	// Output:
	// [{"traceId":"5af7183fb1d4cf5f","id":"352bff9a74ca9ad2","kind":"SERVER","name":"get /api","timestamp":1700000000000000,"duration":1500,"localEndpoint":{"serviceName":"backend","port":8080},"tags":{"http.method":"GET","http.path":"/api"}}]
	// [{"parent":"frontend","child":"backend","callCount":3}]
}

func ExampleCheckFormat() {
	v1 := []byte(`[{"traceId":"1","id":"2","binaryAnnotations":[]}]`)
	fmt.Printf("%q\n", codec.CheckFormat(codec.JSONV2, v1).Error())
	// Output:
	// "Expected a JSON_V2 encoded list, but received: JSON_V1\n"
}

// Proto3 (Content-Type application/x-protobuf) carries the same spans as
// JSON v2: AppendProto3Spans writes Zipkin's ListOfSpans, DecodeProto3
// reads it.
func ExampleDecodeProto3() {
	spans, _ := codec.DecodeJSONV2String(`[{"traceId":"5af7183fb1d4cf5f","id":"6b221d5bc9e6496c","name":"get","kind":"SERVER","localEndpoint":{"serviceName":"frontend"}}]`)
	back, err := codec.DecodeProto3(codec.AppendProto3Spans(nil, spans))
	fmt.Println(string(codec.AppendJSONV2Spans(nil, back)), err)
	// Output:
	// [{"traceId":"5af7183fb1d4cf5f","id":"6b221d5bc9e6496c","kind":"SERVER","name":"get","localEndpoint":{"serviceName":"frontend"}}] <nil>
}

// JSON v1 (POST /api/v1/spans) is converted to v2 as Zipkin does: a span
// with the client's and the server's annotations becomes two spans.
func ExampleDecodeJSONV1() {
	spans, err := codec.DecodeJSONV1String(`[{"traceId":"5af7183fb1d4cf5f","id":"6b221d5bc9e6496c","name":"get","annotations":[
		{"timestamp":1000,"value":"cs","endpoint":{"serviceName":"frontend"}},
		{"timestamp":1100,"value":"sr","endpoint":{"serviceName":"backend"}},
		{"timestamp":1900,"value":"ss","endpoint":{"serviceName":"backend"}},
		{"timestamp":2000,"value":"cr","endpoint":{"serviceName":"frontend"}}]}]`)
	fmt.Println(string(codec.AppendJSONV2Spans(nil, spans)), err)
	// Output:
	// [{"traceId":"5af7183fb1d4cf5f","id":"6b221d5bc9e6496c","kind":"CLIENT","name":"get","timestamp":1000,"duration":1000,"localEndpoint":{"serviceName":"frontend"}},{"traceId":"5af7183fb1d4cf5f","id":"6b221d5bc9e6496c","kind":"SERVER","name":"get","timestamp":1100,"duration":800,"localEndpoint":{"serviceName":"backend"},"shared":true}] <nil>
}
