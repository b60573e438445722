package codec

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

const (
	v1Frontend = `{"serviceName":"frontend","ipv4":"172.17.0.13"}`
	v1Backend  = `{"serviceName":"Backend","ipv4":"172.17.0.9","port":9000}`
)

func decodeV1(t *testing.T, body string) []model.Span {
	t.Helper()
	spans, err := DecodeJSONV1([]byte(body))
	if err != nil {
		t.Fatalf("DecodeJSONV1: %v", err)
	}
	return spans
}

func TestJSONV1SharedRPCSplitsIntoClientAndServer(t *testing.T) {
	body := `[{"traceId":"5af7183fb1d4cf5f","id":"352bff9a74ca9ad2","parentId":"6b221d5bc9e6496c","name":"GET /api","timestamp":1000,"duration":500,
	 "annotations":[
	  {"timestamp":1000,"value":"cs","endpoint":` + v1Frontend + `},
	  {"timestamp":1100,"value":"sr","endpoint":` + v1Backend + `},
	  {"timestamp":1200,"value":"custom","endpoint":` + v1Backend + `},
	  {"timestamp":1400,"value":"ss","endpoint":` + v1Backend + `},
	  {"timestamp":1500,"value":"cr","endpoint":` + v1Frontend + `}],
	 "binaryAnnotations":[
	  {"key":"http.path","value":"/api","endpoint":` + v1Frontend + `},
	  {"key":"srv.version","value":"1.2","endpoint":` + v1Backend + `},
	  {"key":"http.status_code","value":200,"type":"I32","endpoint":` + v1Backend + `},
	  {"key":"sa","value":true,"endpoint":` + v1Backend + `},
	  {"key":"ca","value":true,"endpoint":{"serviceName":"frontend","ipv4":"172.17.0.13","port":53422}}]}]`
	spans := decodeV1(t, body)
	fe := &model.Endpoint{ServiceName: "frontend", IPv4: netip.MustParseAddr("172.17.0.13")}
	be := &model.Endpoint{ServiceName: "backend", IPv4: netip.MustParseAddr("172.17.0.9"), Port: 9000}
	trace := model.TraceID{Low: 0x5af7183fb1d4cf5f}
	want := []model.Span{{
		TraceID: trace, ParentID: 0x6b221d5bc9e6496c, ID: 0x352bff9a74ca9ad2, Kind: model.KindClient, Name: "get /api",
		Timestamp: 1000, Duration: 500, LocalEndpoint: fe, RemoteEndpoint: be,
		Tags: map[string]string{"http.path": "/api"},
	}, {
		TraceID: trace, ParentID: 0x6b221d5bc9e6496c, ID: 0x352bff9a74ca9ad2, Kind: model.KindServer, Name: "get /api",
		Timestamp: 1100, Duration: 300, LocalEndpoint: be,
		RemoteEndpoint: &model.Endpoint{ServiceName: "frontend", IPv4: netip.MustParseAddr("172.17.0.13"), Port: 53422},
		Annotations:    []model.Annotation{{Timestamp: 1200, Value: "custom"}},
		Tags:           map[string]string{"srv.version": "1.2"},
		Shared:         true,
	}}
	if !reflect.DeepEqual(spans, want) {
		for i := range spans {
			t.Logf("got %d: %s", i, AppendJSONV2Span(nil, &spans[i]))
		}
		t.Fatal("unexpected conversion")
	}
}

// TestJSONV1Conversions checks what the decoder hands the converter; the
// conversion rules themselves are tested in zipkin/model/v1.
func TestJSONV1Conversions(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string // JSON v2 of the result
	}{
		{"local span with lc marker",
			`[{"traceId":"1","id":"2","name":"compute","timestamp":10,"duration":5,"binaryAnnotations":[{"key":"lc","value":"","endpoint":{"serviceName":"svc"}}]}]`,
			`[{"traceId":"0000000000000001","id":"0000000000000002","name":"compute","timestamp":10,"duration":5,"localEndpoint":{"serviceName":"svc"}}]`},
		{"false boolean and non-address booleans dropped",
			`[{"traceId":"1","id":"2","binaryAnnotations":[{"key":"sa","value":false,"endpoint":{"serviceName":"db"}},{"key":"x","value":true,"endpoint":{"serviceName":"db"}}]}]`,
			`[{"traceId":"0000000000000001","id":"0000000000000002"}]`},
		{"annotation without endpoint is not core",
			`[{"traceId":"1","id":"2","annotations":[{"timestamp":10,"value":"cs"}]}]`,
			`[{"traceId":"0000000000000001","id":"0000000000000002","annotations":[{"timestamp":10,"value":"cs"}]}]`},
		{"annotation with an empty endpoint is not core",
			`[{"traceId":"1","id":"2","annotations":[{"timestamp":10,"value":"cs","endpoint":{"serviceName":""}}]}]`,
			`[{"traceId":"0000000000000001","id":"0000000000000002","annotations":[{"timestamp":10,"value":"cs"}]}]`},
		{"address with an empty endpoint is ignored",
			`[{"traceId":"1","id":"2","binaryAnnotations":[{"key":"ca","value":true,"endpoint":{}}]}]`,
			`[{"traceId":"0000000000000001","id":"0000000000000002"}]`},
		{"annotations with equal timestamps ordered by value, as Zipkin's V1Span sorts them",
			`[{"traceId":"1","id":"2","annotations":[{"timestamp":10,"value":"sr","endpoint":{"serviceName":"b"}},{"timestamp":10,"value":"cs","endpoint":{"serviceName":"a"}}]}]`,
			`[{"traceId":"0000000000000001","id":"0000000000000002","kind":"CLIENT","timestamp":10,"localEndpoint":{"serviceName":"a"}},` +
				`{"traceId":"0000000000000001","id":"0000000000000002","kind":"SERVER","timestamp":10,"localEndpoint":{"serviceName":"b"},"shared":true}]`},
		{"spans reuse no state: the next v1 span converts alone",
			`[{"traceId":"1","id":"2","annotations":[{"timestamp":10,"value":"cs","endpoint":{"serviceName":"a"}}],"binaryAnnotations":[{"key":"k","value":"v","endpoint":{"serviceName":"a"}}]},{"traceId":"1","id":"3","name":"n"}]`,
			`[{"traceId":"0000000000000001","id":"0000000000000002","kind":"CLIENT","timestamp":10,"localEndpoint":{"serviceName":"a"},"tags":{"k":"v"}},` +
				`{"traceId":"0000000000000001","id":"0000000000000003","name":"n"}]`},
		{"128-bit trace ID and debug",
			`[{"traceId":"48485a3953bb61246b221d5bc9e6496c","id":"2","debug":true,"traceIdHigh":"ignored"}]`,
			`[{"traceId":"48485a3953bb61246b221d5bc9e6496c","id":"0000000000000002","debug":true}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spans := decodeV1(t, tt.body)
			if got := string(AppendJSONV2Spans(nil, spans)); got != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestJSONV1Errors(t *testing.T) {
	tests := []struct{ span, msg string }{
		{`{"traceId":"X1","id":"1"}`, "X1 should be lower-hex encoded with no prefix at $[1].traceId reading List<Span> from json"},
		{`{"traceId":"1"}`, "Missing : id at $[1] reading List<Span> from json"},
		{`{"traceId":"1","id":"1","annotations":[{"value":"cs"}]}`, "Incomplete annotation at $[1].annotations[0] reading List<Span> from json"},
		{`{"traceId":"1","id":"1","binaryAnnotations":[{"value":"x"}]}`, "No key at $[1].binaryAnnotations[0] reading List<Span> from json"},
		{`{"traceId":"1","id":"1","annotations":[{"timestamp":1,"value":"cs","endpoint":{"port":99999}}]}`, "invalid port 99999 at $[1].annotations[0].endpoint.port reading List<Span> from json"},
	}
	for _, tt := range tests {
		body := `[{"traceId":"1","id":"1"},` + tt.span + `,{"traceId":"1","id":"3"}]`
		spans, err := DecodeJSONV1([]byte(body))
		var be *BatchError
		if !errors.As(err, &be) || err.Error() != tt.msg || len(spans) != 2 || be.Indexes()[0] != 1 {
			t.Errorf("%s:\n got %v (%d spans)\nwant %s", tt.span, err, len(spans), tt.msg)
		}
	}
}
