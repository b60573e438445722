package v1

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

func ep(name string) *model.Endpoint { return &model.Endpoint{ServiceName: name} }

func ann(ts int64, value string, e *model.Endpoint) Annotation {
	return Annotation{Timestamp: ts, Value: value, Endpoint: e}
}

func tag(k, v string, e *model.Endpoint) BinaryAnnotation {
	return BinaryAnnotation{Key: k, Value: v, Endpoint: e}
}

func addr(k string, e *model.Endpoint) BinaryAnnotation {
	return BinaryAnnotation{Key: k, Address: true, Endpoint: e}
}

// v2 is a v2 span of trace 1, span 2 for the expectations.
func v2(s model.Span) model.Span {
	s.TraceID, s.ID = model.TraceID{Low: 1}, 2
	return s
}

func show(spans []model.Span) string {
	var out string
	for _, s := range spans {
		out += fmt.Sprintf("\n  %+v local=%+v remote=%+v", s, s.LocalEndpoint, s.RemoteEndpoint)
	}
	return out
}

func TestToV2(t *testing.T) {
	fe := &model.Endpoint{ServiceName: "frontend", IPv4: netip.MustParseAddr("172.17.0.13")}
	be := &model.Endpoint{ServiceName: "Backend", IPv4: netip.MustParseAddr("172.17.0.9"), Port: 9000}
	feSocket := &model.Endpoint{ServiceName: "frontend", IPv4: netip.MustParseAddr("172.17.0.13"), Port: 53422}
	beLower := &model.Endpoint{ServiceName: "backend", IPv4: netip.MustParseAddr("172.17.0.9"), Port: 9000}
	tests := []struct {
		name string
		src  Span
		want []model.Span
	}{
		{"client and server in one span split into CLIENT and shared SERVER",
			Span{ParentID: 3, Name: "GET /api", Timestamp: 1000, Duration: 500,
				Annotations: []Annotation{ann(1000, "cs", fe), ann(1100, "sr", be), ann(1200, "custom", be), ann(1400, "ss", be), ann(1500, "cr", fe)},
				BinaryAnnotations: []BinaryAnnotation{tag("http.path", "/api", fe), tag("srv.version", "1.2", be),
					addr("sa", be), addr("ca", feSocket)}},
			[]model.Span{
				v2(model.Span{ParentID: 3, Kind: model.KindClient, Name: "get /api", Timestamp: 1000, Duration: 500,
					LocalEndpoint: fe, RemoteEndpoint: beLower, Tags: map[string]string{"http.path": "/api"}}),
				v2(model.Span{ParentID: 3, Kind: model.KindServer, Name: "get /api", Timestamp: 1100, Duration: 300,
					LocalEndpoint: beLower, RemoteEndpoint: feSocket, Annotations: []model.Annotation{{Timestamp: 1200, Value: "custom"}},
					Tags: map[string]string{"srv.version": "1.2"}, Shared: true}),
			}},
		{"local span with lc marker",
			Span{Name: "compute", Timestamp: 10, Duration: 5, BinaryAnnotations: []BinaryAnnotation{tag("lc", "", ep("svc"))}},
			[]model.Span{v2(model.Span{Name: "compute", Timestamp: 10, Duration: 5, LocalEndpoint: ep("svc")})}},
		{"lc with a value is a tag",
			Span{BinaryAnnotations: []BinaryAnnotation{tag("lc", "db", ep("svc"))}},
			[]model.Span{v2(model.Span{LocalEndpoint: ep("svc"), Tags: map[string]string{"lc": "db"}})}},
		{"server side without span timestamp is shared",
			Span{Name: "get", Annotations: []Annotation{ann(10, "sr", ep("b")), ann(25, "ss", ep("b"))}},
			[]model.Span{v2(model.Span{Kind: model.KindServer, Name: "get", Timestamp: 10, Duration: 15, LocalEndpoint: ep("b"), Shared: true})}},
		{"server side with span timestamp is not shared",
			Span{Timestamp: 10, Duration: 15, Annotations: []Annotation{ann(10, "sr", ep("b")), ann(25, "ss", ep("b"))}},
			[]model.Span{v2(model.Span{Kind: model.KindServer, Timestamp: 10, Duration: 15, LocalEndpoint: ep("b")})}},
		{"server side with timestamp but no duration despite ss is shared (MySQL row shared with a client)",
			Span{Timestamp: 10, Annotations: []Annotation{ann(11, "sr", ep("b")), ann(25, "ss", ep("b"))}},
			[]model.Span{v2(model.Span{Kind: model.KindServer, Timestamp: 11, Duration: 14, LocalEndpoint: ep("b"), Shared: true})}},
		{"loopback RPC becomes two spans",
			Span{Annotations: []Annotation{ann(10, "cs", ep("a")), ann(11, "sr", ep("a")), ann(19, "ss", ep("a")), ann(20, "cr", ep("a"))}},
			[]model.Span{
				v2(model.Span{Kind: model.KindClient, Timestamp: 10, Duration: 10, LocalEndpoint: ep("a")}),
				v2(model.Span{Kind: model.KindServer, Timestamp: 11, Duration: 8, LocalEndpoint: ep("a"), Shared: true}),
			}},
		{"one-way RPC: cs and sr without cr has no client duration",
			Span{Annotations: []Annotation{ann(10, "cs", ep("a")), ann(12, "sr", ep("b"))}},
			[]model.Span{
				v2(model.Span{Kind: model.KindClient, Timestamp: 10, LocalEndpoint: ep("a")}),
				v2(model.Span{Kind: model.KindServer, Timestamp: 12, LocalEndpoint: ep("b"), Shared: true}),
			}},
		{"cs implied by cr and the span's timing",
			Span{Timestamp: 10, Duration: 10, Annotations: []Annotation{ann(12, "sr", ep("b")), ann(20, "cr", ep("a"))}},
			[]model.Span{
				v2(model.Span{Kind: model.KindServer, Timestamp: 12, LocalEndpoint: ep("b"), Shared: true}),
				v2(model.Span{Kind: model.KindClient, Timestamp: 10, Duration: 10, LocalEndpoint: ep("a")}),
			}},
		{"client only, cs without cr",
			Span{Annotations: []Annotation{ann(10, "cs", ep("a"))}, BinaryAnnotations: []BinaryAnnotation{addr("sa", &model.Endpoint{ServiceName: "db", Port: 3306})}},
			[]model.Span{v2(model.Span{Kind: model.KindClient, Timestamp: 10, LocalEndpoint: ep("a"), RemoteEndpoint: &model.Endpoint{ServiceName: "db", Port: 3306}})}},
		{"incomplete client keeps cr as an annotation and the span's timing",
			Span{Timestamp: 5, Duration: 7, Annotations: []Annotation{ann(20, "cr", ep("a"))}},
			[]model.Span{v2(model.Span{Kind: model.KindClient, Timestamp: 5, Duration: 7, LocalEndpoint: ep("a"), Annotations: []model.Annotation{{Timestamp: 20, Value: "cr"}}})}},
		{"producer with ws",
			Span{Annotations: []Annotation{ann(10, "ms", ep("p")), ann(12, "ws", ep("p"))}, BinaryAnnotations: []BinaryAnnotation{addr("ma", ep("kafka"))}},
			[]model.Span{v2(model.Span{Kind: model.KindProducer, Timestamp: 10, Duration: 2, LocalEndpoint: ep("p"), RemoteEndpoint: ep("kafka")})}},
		{"consumer only",
			Span{Annotations: []Annotation{ann(10, "mr", ep("c"))}},
			[]model.Span{v2(model.Span{Kind: model.KindConsumer, Timestamp: 10, LocalEndpoint: ep("c")})}},
		{"consumer with wr",
			Span{Annotations: []Annotation{ann(10, "wr", ep("c")), ann(15, "mr", ep("c"))}},
			[]model.Span{v2(model.Span{Kind: model.KindConsumer, Timestamp: 10, Duration: 5, LocalEndpoint: ep("c")})}},
		{"ws and wr without ms or mr are plain annotations",
			Span{Annotations: []Annotation{ann(10, "ws", ep("c")), ann(15, "wr", ep("c"))}},
			[]model.Span{v2(model.Span{LocalEndpoint: ep("c"), Annotations: []model.Annotation{{Timestamp: 10, Value: "ws"}, {Timestamp: 15, Value: "wr"}}})}},
		// As in Zipkin, "ma" for mr finds the producer (the first span of the
		// service), so the forked consumer has no remote endpoint.
		{"producer and consumer of one service become two spans",
			Span{Annotations: []Annotation{ann(10, "ms", ep("q")), ann(11, "ws", ep("q")), ann(20, "wr", ep("q")), ann(23, "mr", ep("q"))},
				BinaryAnnotations: []BinaryAnnotation{addr("ma", ep("kafka"))}},
			[]model.Span{
				v2(model.Span{Kind: model.KindProducer, Timestamp: 10, Duration: 1, LocalEndpoint: ep("q"), RemoteEndpoint: ep("kafka")}),
				v2(model.Span{Kind: model.KindConsumer, Timestamp: 20, Duration: 3, LocalEndpoint: ep("q"), Shared: true}),
			}},
		{"sa without core annotations is just a remote",
			Span{BinaryAnnotations: []BinaryAnnotation{addr("sa", ep("db"))}},
			[]model.Span{v2(model.Span{RemoteEndpoint: ep("db")})}},
		{"ca without core annotations is a server",
			Span{BinaryAnnotations: []BinaryAnnotation{addr("ca", ep("cli"))}},
			[]model.Span{v2(model.Span{Kind: model.KindServer, RemoteEndpoint: ep("cli")})}},
		{"ca and sa without core annotations: sa is the remote of ca's span",
			Span{BinaryAnnotations: []BinaryAnnotation{addr("ca", ep("cli")), addr("sa", ep("srv"))}},
			[]model.Span{v2(model.Span{LocalEndpoint: ep("cli"), RemoteEndpoint: ep("srv")})}},
		{"Finagle ca with the server's own name loses the name",
			Span{Annotations: []Annotation{ann(10, "sr", ep("b")), ann(20, "ss", ep("b"))},
				BinaryAnnotations: []BinaryAnnotation{addr("ca", &model.Endpoint{ServiceName: "B", IPv4: netip.MustParseAddr("10.0.0.1")})}},
			[]model.Span{v2(model.Span{Kind: model.KindServer, Timestamp: 10, Duration: 10, LocalEndpoint: ep("b"),
				RemoteEndpoint: &model.Endpoint{IPv4: netip.MustParseAddr("10.0.0.1")}, Shared: true})}},
		{"ca equal to the server's endpoint is not a remote",
			Span{Annotations: []Annotation{ann(10, "sr", ep("b")), ann(20, "ss", ep("b"))}, BinaryAnnotations: []BinaryAnnotation{addr("ca", ep("B"))}},
			[]model.Span{v2(model.Span{Kind: model.KindServer, Timestamp: 10, Duration: 10, LocalEndpoint: ep("b"), Shared: true})}},
		{"annotation without endpoint is not core",
			Span{Annotations: []Annotation{ann(10, "cs", nil)}},
			[]model.Span{v2(model.Span{Annotations: []model.Annotation{{Timestamp: 10, Value: "cs"}}})}},
		// The MySQL reader's copy differed from Zipkin on the next three:
		// Zipkin's V1Span builder turns an empty endpoint into none and
		// drops an address without one, and compares lower-cased names.
		{"annotation with an empty endpoint is not core",
			Span{Annotations: []Annotation{ann(10, "cs", &model.Endpoint{}), ann(20, "cr", &model.Endpoint{})}},
			[]model.Span{v2(model.Span{Annotations: []model.Annotation{{Timestamp: 10, Value: "cs"}, {Timestamp: 20, Value: "cr"}}})}},
		{"address with an empty endpoint is ignored",
			Span{BinaryAnnotations: []BinaryAnnotation{addr("ca", &model.Endpoint{}), tag("k", "v", nil)}},
			[]model.Span{v2(model.Span{Tags: map[string]string{"k": "v"}})}},
		{"service names match case-insensitively",
			Span{Annotations: []Annotation{ann(10, "sr", ep("Backend")), ann(20, "ss", ep("backend"))}, BinaryAnnotations: []BinaryAnnotation{tag("k", "v", ep("BACKEND"))}},
			[]model.Span{v2(model.Span{Kind: model.KindServer, Timestamp: 10, Duration: 10, LocalEndpoint: ep("backend"), Tags: map[string]string{"k": "v"}, Shared: true})}},
		// The JSON decoder's copy differed from Zipkin on the next two: it
		// kept the input order of annotations with equal timestamps and of
		// binary annotations, where Zipkin's V1Span sorts them.
		{"annotations with equal timestamps are ordered by value",
			Span{Annotations: []Annotation{ann(10, "sr", ep("b")), ann(10, "cs", ep("a"))}},
			[]model.Span{
				v2(model.Span{Kind: model.KindClient, Timestamp: 10, LocalEndpoint: ep("a")}),
				v2(model.Span{Kind: model.KindServer, Timestamp: 10, LocalEndpoint: ep("b"), Shared: true}),
			}},
		{"binary annotations are ordered by key; the last of a key wins",
			Span{BinaryAnnotations: []BinaryAnnotation{tag("z", "1", ep("x")), tag("a", "1", ep("y")), tag("a", "2", ep("y"))}},
			[]model.Span{
				v2(model.Span{LocalEndpoint: ep("y"), Tags: map[string]string{"a": "2"}}),
				v2(model.Span{LocalEndpoint: ep("x"), Tags: map[string]string{"z": "1"}}),
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.src
			src.TraceID, src.ID = model.TraceID{Low: 1}, 2
			got := ToV2(&src)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got%s\nwant%s", show(got), show(tt.want))
			}
		})
	}
}

// A Converter reused for many spans returns spans that share nothing with
// each other or with the v1 input.
func TestConverterReuseSharesNothing(t *testing.T) {
	var c Converter
	a := &Span{TraceID: model.TraceID{Low: 1}, ID: 1, Annotations: []Annotation{ann(10, "cs", ep("a")), ann(11, "sr", ep("b")), ann(12, "x", ep("b"))},
		BinaryAnnotations: []BinaryAnnotation{tag("k", "v", ep("a")), addr("sa", ep("b"))}}
	first := c.Convert(a, nil)
	snapshot := show(first)
	a.Annotations[0].Endpoint.ServiceName = "changed"
	a.BinaryAnnotations[1].Endpoint.ServiceName = "changed"
	for i := range 3 {
		b := &Span{TraceID: model.TraceID{Low: 2}, ID: model.ID(2 + i), Annotations: []Annotation{ann(20, "sr", ep("c")), ann(21, "y", ep("d"))}}
		out := c.Convert(b, nil)
		out[0].LocalEndpoint.ServiceName = "mutated"
		out[0].Annotations = append(out[0].Annotations, model.Annotation{Timestamp: 1, Value: "z"})
	}
	if got := show(first); got != snapshot {
		t.Fatalf("spans changed after the input changed and the converter was reused:\nbefore%s\nafter%s", snapshot, got)
	}
}

func TestConvertAppends(t *testing.T) {
	var c Converter
	out := c.Convert(&Span{TraceID: model.TraceID{Low: 1}, ID: 1}, nil)
	out = c.Convert(&Span{TraceID: model.TraceID{Low: 1}, ID: 2, Annotations: []Annotation{ann(1, "cs", ep("a")), ann(2, "sr", ep("a"))}}, out)
	if len(out) != 3 || out[0].ID != 1 || out[1].ID != 2 || out[2].ID != 2 || !out[2].Shared {
		t.Fatalf("got%s", show(out))
	}
}

func BenchmarkConvertSharedRPC(b *testing.B) {
	fe, be := ep("frontend"), ep("backend")
	src := Span{TraceID: model.TraceID{Low: 1}, ID: 2, Name: "get", Timestamp: 10, Duration: 10,
		Annotations:       []Annotation{ann(10, "cs", fe), ann(11, "sr", be), ann(19, "ss", be), ann(20, "cr", fe)},
		BinaryAnnotations: []BinaryAnnotation{tag("http.path", "/", fe), addr("sa", be), addr("ca", fe)}}
	var c Converter
	out := make([]model.Span, 0, 2)
	b.ReportAllocs()
	for b.Loop() {
		out = c.Convert(&src, out[:0])
	}
}
