package otlp

import (
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

var (
	tid = []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	sid = []byte{0, 0, 0, 0, 0, 0, 0, 0x2a}
	pid = []byte{0, 0, 0, 0, 0, 0, 0, 0x07}
)

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func kv(k string, v *commonpb.AnyValue) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: v}
}

func intV(i int64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: i}}
}
func dblV(f float64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: f}}
}
func boolV(b bool) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: b}}
}
func strV(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}
func arrV(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
}
func mapV(kvs ...*commonpb.KeyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: kvs}}}
}

// one wraps a span in a request with a resource (service.name "Svc") and a
// scope.
func one(sp *tracepb.Span, res ...*commonpb.KeyValue) []*tracepb.ResourceSpans {
	if res == nil {
		res = []*commonpb.KeyValue{str("service.name", "Svc")}
	}
	return []*tracepb.ResourceSpans{{
		Resource:   &resourcepb.Resource{Attributes: res},
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: "lib", Version: "1.2"}, Spans: []*tracepb.Span{sp}}},
	}}
}

func base() *tracepb.Span {
	return &tracepb.Span{TraceId: tid, SpanId: sid, Name: "GET /x",
		StartTimeUnixNano: 1_700_000_000_000_001_499, EndTimeUnixNano: 1_700_000_000_000_001_499 + 2_500}
}

func baseTags(extra map[string]string) map[string]string {
	m := map[string]string{"service.name": "Svc", "otel.scope.name": "lib", "otel.scope.version": "1.2"}
	for k, v := range extra {
		if v == "<deleted>" {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

func TestToSpans(t *testing.T) {
	wantBase := func() model.Span {
		return model.Span{
			TraceID:       model.TraceID{High: 0x0102030405060708, Low: 0x090a0b0c0d0e0f10},
			ID:            0x2a,
			Name:          "get /x",
			Timestamp:     1_700_000_000_000_001, // 1_499 ns rounds down
			Duration:      3,                     // 2.5 µs rounds up, as zipkin-go
			LocalEndpoint: &model.Endpoint{ServiceName: "svc"},
			Tags:          baseTags(nil),
		}
	}
	tests := []struct {
		name   string
		span   func(*tracepb.Span)
		res    []*commonpb.KeyValue
		want   func(*model.Span)
		reject string
	}{
		{name: "base", span: func(*tracepb.Span) {}, want: func(*model.Span) {}},
		{name: "parent", span: func(s *tracepb.Span) { s.ParentSpanId = pid }, want: func(w *model.Span) { w.ParentID = 7 }},
		{name: "zero parent is none", span: func(s *tracepb.Span) { s.ParentSpanId = make([]byte, 8) }, want: func(*model.Span) {}},
		{name: "kind server", span: func(s *tracepb.Span) { s.Kind = tracepb.Span_SPAN_KIND_SERVER }, want: func(w *model.Span) { w.Kind = model.KindServer }},
		{name: "kind consumer", span: func(s *tracepb.Span) { s.Kind = tracepb.Span_SPAN_KIND_CONSUMER }, want: func(w *model.Span) { w.Kind = model.KindConsumer }},
		{name: "kind internal", span: func(s *tracepb.Span) { s.Kind = tracepb.Span_SPAN_KIND_INTERNAL }, want: func(*model.Span) {}},
		{name: "kind client without peer", span: func(s *tracepb.Span) { s.Kind = tracepb.Span_SPAN_KIND_CLIENT }, want: func(w *model.Span) { w.Kind = model.KindClient }},
		{name: "sub-microsecond duration", span: func(s *tracepb.Span) { s.EndTimeUnixNano = s.StartTimeUnixNano + 1 }, want: func(w *model.Span) { w.Duration = 1 }},
		{name: "end before start", span: func(s *tracepb.Span) { s.EndTimeUnixNano = s.StartTimeUnixNano - 1 }, want: func(w *model.Span) { w.Duration = 0 }},
		{name: "no start", span: func(s *tracepb.Span) { s.StartTimeUnixNano = 0 }, want: func(w *model.Span) { w.Timestamp, w.Duration = 0, 0 }},
		{name: "status error", span: func(s *tracepb.Span) {
			s.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "boom"}
		}, want: func(w *model.Span) {
			w.Tags = baseTags(map[string]string{"otel.status_code": "ERROR", "error": "boom"})
		}},
		{name: "status error, message from exception event", span: func(s *tracepb.Span) {
			s.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR}
			s.Events = []*tracepb.Span_Event{{Name: "exception", TimeUnixNano: s.StartTimeUnixNano,
				Attributes: []*commonpb.KeyValue{str("exception.type", "E"), str("exception.message", "bad thing")}}}
		}, want: func(w *model.Span) {
			w.Tags = baseTags(map[string]string{"otel.status_code": "ERROR", "error": "bad thing"})
			w.Annotations = []model.Annotation{{Timestamp: w.Timestamp, Value: `exception: {"exception.message":"bad thing","exception.type":"E"}`}}
		}},
		{name: "exception event alone is not an error", span: func(s *tracepb.Span) {
			s.Events = []*tracepb.Span_Event{{Name: "exception", TimeUnixNano: s.StartTimeUnixNano, Attributes: []*commonpb.KeyValue{str("exception.message", "handled")}}}
		}, want: func(w *model.Span) {
			w.Annotations = []model.Annotation{{Timestamp: w.Timestamp, Value: `exception: {"exception.message":"handled"}`}}
		}},
		{name: "status ok removes error attribute", span: func(s *tracepb.Span) {
			s.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
			s.Attributes = []*commonpb.KeyValue{kv("error", boolV(false))}
		}, want: func(w *model.Span) { w.Tags = baseTags(map[string]string{"otel.status_code": "OK"}) }},
		{name: "unset status removes error attribute", span: func(s *tracepb.Span) {
			s.Attributes = []*commonpb.KeyValue{str("error", "x")}
		}, want: func(*model.Span) {}},
		{name: "attribute values", span: func(s *tracepb.Span) {
			s.Attributes = []*commonpb.KeyValue{
				kv("b", boolV(true)), kv("i", intV(-7)), kv("d", dblV(1.5)), kv("big", dblV(1e21)), kv("nan", dblV(math.NaN())),
				kv("ss", arrV(strV("a"), strV("b"))), kv("is", arrV(intV(1), intV(2))), kv("bs", arrV(boolV(true))),
				kv("ds", arrV(dblV(0.5))), kv("empty", arrV()), kv("mixed", arrV(strV("a"), intV(1))),
				kv("map", mapV(str("k", "v"), kv("n", intV(1)))),
				kv("bytes", &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{1, 255}}}),
				kv("nil", &commonpb.AnyValue{}),
			}
		}, want: func(w *model.Span) {
			w.Tags = baseTags(map[string]string{"b": "true", "i": "-7", "d": "1.5", "big": "1e+21", "nan": "NaN",
				"ss": `["a","b"]`, "is": "[1,2]", "bs": "[true]", "ds": "[0.5]", "empty": "[]", "mixed": `["a",1]`,
				"map": `{"k":"v","n":1}`, "bytes": "[1,255]", "nil": ""})
		}},
		{name: "resource attribute wins over span attribute", span: func(s *tracepb.Span) {
			s.Attributes = []*commonpb.KeyValue{str("env", "span")}
		}, res: []*commonpb.KeyValue{str("service.name", "Svc"), str("env", "res")},
			want: func(w *model.Span) { w.Tags = baseTags(map[string]string{"env": "res"}) }},
		{name: "no service.name", span: func(*tracepb.Span) {}, res: []*commonpb.KeyValue{str("process.executable.name", "app")},
			want: func(w *model.Span) {
				w.LocalEndpoint = &model.Endpoint{ServiceName: "unknown_service:app"}
				w.Tags = baseTags(map[string]string{"service.name": "<deleted>", "process.executable.name": "app"})
			}},
		{name: "dropped counts", span: func(s *tracepb.Span) {
			s.DroppedAttributesCount, s.DroppedEventsCount, s.DroppedLinksCount = 1, 2, 3
		}, want: func(w *model.Span) {
			w.Tags = baseTags(map[string]string{"otel.dropped_attributes_count": "1", "otel.dropped_events_count": "2", "otel.dropped_links_count": "3"})
		}},
		{name: "attributes above MaxAttributes dropped and counted", span: func(s *tracepb.Span) {
			s.DroppedAttributesCount = 1
			for i := range MaxAttributes + 5 {
				s.Attributes = append(s.Attributes, kv(fmt.Sprintf("a%04d", i), intV(int64(i))))
			}
		}, want: func(w *model.Span) {
			extra := map[string]string{"otel.dropped_attributes_count": "6"}
			for i := range MaxAttributes {
				extra[fmt.Sprintf("a%04d", i)] = strconv.Itoa(i)
			}
			w.Tags = baseTags(extra)
		}},
		{name: "links and trace state not kept", span: func(s *tracepb.Span) {
			s.TraceState = "a=b"
			s.Links = []*tracepb.Span_Link{{TraceId: tid, SpanId: pid}}
		}, want: func(*model.Span) {}},
		{name: "events sorted, no attributes", span: func(s *tracepb.Span) {
			s.Events = []*tracepb.Span_Event{{Name: "b", TimeUnixNano: s.StartTimeUnixNano + 2000}, {Name: "a", TimeUnixNano: s.StartTimeUnixNano}}
		}, want: func(w *model.Span) {
			w.Annotations = []model.Annotation{{Timestamp: w.Timestamp, Value: "a"}, {Timestamp: w.Timestamp + 2, Value: "b"}}
		}},
		{name: "remote peer.service beats server.address", span: func(s *tracepb.Span) {
			s.Kind = tracepb.Span_SPAN_KIND_CLIENT
			s.Attributes = []*commonpb.KeyValue{str("server.address", "db.local"), str("peer.service", "MySQL")}
		}, want: func(w *model.Span) {
			w.Kind = model.KindClient
			w.RemoteEndpoint = &model.Endpoint{ServiceName: "mysql"}
			w.Tags = baseTags(map[string]string{"server.address": "db.local", "peer.service": "MySQL"})
		}},
		{name: "remote network.peer.address with port", span: func(s *tracepb.Span) {
			s.Kind = tracepb.Span_SPAN_KIND_PRODUCER
			s.Attributes = []*commonpb.KeyValue{str("network.peer.address", "10.0.0.1"), kv("network.peer.port", intV(9092)), str("db.name", "x")}
		}, want: func(w *model.Span) {
			w.Kind = model.KindProducer
			w.RemoteEndpoint = &model.Endpoint{IPv4: netip.MustParseAddr("10.0.0.1"), Port: 9092}
			w.Tags = baseTags(map[string]string{"network.peer.address": "10.0.0.1", "network.peer.port": "9092", "db.name": "x"})
		}},
		{name: "remote ipv6", span: func(s *tracepb.Span) {
			s.Kind = tracepb.Span_SPAN_KIND_CLIENT
			s.Attributes = []*commonpb.KeyValue{str("net.sock.peer.addr", "::1")}
		}, want: func(w *model.Span) {
			w.Kind = model.KindClient
			w.RemoteEndpoint = &model.Endpoint{IPv6: netip.MustParseAddr("::1")}
			w.Tags = baseTags(map[string]string{"net.sock.peer.addr": "::1"})
		}},
		{name: "remote address that is not an IP", span: func(s *tracepb.Span) {
			s.Kind = tracepb.Span_SPAN_KIND_CLIENT
			s.Attributes = []*commonpb.KeyValue{str("network.peer.address", "host")}
		}, want: func(w *model.Span) {
			w.Kind = model.KindClient
			w.Tags = baseTags(map[string]string{"network.peer.address": "host"})
		}},
		{name: "no remote endpoint on a server span", span: func(s *tracepb.Span) {
			s.Kind = tracepb.Span_SPAN_KIND_SERVER
			s.Attributes = []*commonpb.KeyValue{str("peer.service", "x")}
		}, want: func(w *model.Span) {
			w.Kind = model.KindServer
			w.Tags = baseTags(map[string]string{"peer.service": "x"})
		}},
		{name: "short trace id", span: func(s *tracepb.Span) { s.TraceId = tid[:8] }, reject: "traceId has 8 bytes"},
		{name: "zero trace id", span: func(s *tracepb.Span) { s.TraceId = make([]byte, 16) }, reject: "traceId is all zeros"},
		{name: "long span id", span: func(s *tracepb.Span) { s.SpanId = tid }, reject: "spanId has 16 bytes"},
		{name: "zero span id", span: func(s *tracepb.Span) { s.SpanId = make([]byte, 8) }, reject: "spanId is all zeros"},
		{name: "bad parent id", span: func(s *tracepb.Span) { s.ParentSpanId = []byte{1} }, reject: "parentSpanId has 1 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp := base()
			tt.span(sp)
			res := ToSpans(one(sp, tt.res...))
			if tt.reject != "" {
				if res.Rejected != 1 || len(res.Spans) != 0 || !strings.Contains(res.Message, tt.reject) {
					t.Fatalf("got %d spans, rejected %d %q; want the span rejected with %q", len(res.Spans), res.Rejected, res.Message, tt.reject)
				}
				return
			}
			if res.Rejected != 0 || len(res.Spans) != 1 {
				t.Fatalf("got %d spans, rejected %d %q", len(res.Spans), res.Rejected, res.Message)
			}
			want := wantBase()
			tt.want(&want)
			want.Normalize()
			if got := res.Spans[0]; !reflect.DeepEqual(got, want) {
				t.Fatalf("got\n%+v\nwant\n%+v\ntags got %v\nwant %v", got, want, got.Tags, want.Tags)
			}
		})
	}
}

// TestPartialRejection: an invalid span among valid ones is left out and
// counted; the others are kept.
func TestPartialRejection(t *testing.T) {
	good, bad := base(), base()
	bad.SpanId = []byte{1, 2}
	rs := one(good)
	rs[0].ScopeSpans[0].Spans = append(rs[0].ScopeSpans[0].Spans, bad, base())
	res := ToSpans(rs)
	if len(res.Spans) != 2 || res.Rejected != 1 || !strings.HasPrefix(res.Message, "1 spans rejected: ") {
		t.Fatalf("got %d spans, rejected %d %q", len(res.Spans), res.Rejected, res.Message)
	}
}
