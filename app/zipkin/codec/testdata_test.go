package codec

import (
	"fmt"
	"net/netip"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// realisticSpans returns n spans shaped like what instrumented services
// report: a frontend server span with children, 128-bit trace IDs, HTTP
// tags, endpoints with IPs and ports, and an annotation or two.
func realisticSpans(n int) []model.Span {
	out := make([]model.Span, 0, n)
	trace := model.TraceID{High: 0x5af7183fb1d4cf5f, Low: 0x463a0a4fbd16fe2d}
	for i := 0; i < n; i++ {
		s := model.Span{
			TraceID:   trace,
			ID:        model.ID(0x1000 + uint64(i)),
			Name:      fmt.Sprintf("get /api/v1/items/{id}/%d", i%7),
			Timestamp: 1_700_000_000_000_000 + int64(i)*1000,
			Duration:  int64(150 + i*13),
			LocalEndpoint: &model.Endpoint{
				ServiceName: fmt.Sprintf("service-%d", i%5),
				IPv4:        netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}),
				Port:        8080,
			},
			Tags: map[string]string{
				"http.method":       "GET",
				"http.path":         fmt.Sprintf("/api/v1/items/%d", i),
				"http.status_code":  "200",
				"otel.library.name": "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp",
			},
		}
		if i == 0 {
			s.Kind = model.KindServer
		} else {
			s.ParentID = model.ID(0x1000 + uint64(i-1)/3)
			s.Kind = model.KindClient
			s.RemoteEndpoint = &model.Endpoint{
				ServiceName: fmt.Sprintf("service-%d", (i+1)%5),
				IPv6:        netip.MustParseAddr("2001:db8::1"),
				Port:        9000 + i%10,
			}
			s.Annotations = []model.Annotation{
				{Timestamp: s.Timestamp + 10, Value: "wire send"},
				{Timestamp: s.Timestamp + s.Duration - 10, Value: "wire recv"},
			}
		}
		if i%10 == 9 {
			s.Tags["error"] = "connection reset \"by\" peer\n"
		}
		out = append(out, s)
	}
	return out
}
