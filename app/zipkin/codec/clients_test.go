package codec

import (
	"net/netip"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// zipkinGoBody is shaped exactly as zipkin-go v0.4.3's JSONSerializer
// writes (encoding/json of model.SpanModel): timestamp and duration first,
// then traceId, id, parentId, debug, name, kind, shared, localEndpoint,
// remoteEndpoint, annotations, tags; zero values omitted; net.IP as text.
const zipkinGoBody = `[{"timestamp":1700000000123456,"duration":1523,"traceId":"5af7183fb1d4cf5f","id":"4fd7a2b57cc2d0cd","parentId":"5af7183fb1d4cf5f","name":"GET /orders","kind":"CLIENT","localEndpoint":{"serviceName":"checkout","ipv4":"192.168.1.17","port":8080},"remoteEndpoint":{"serviceName":"orders","ipv6":"2001:db8::68","port":9411},"annotations":[{"timestamp":1700000000123500,"value":"wire send"},{"timestamp":1700000000124900,"value":"wire recv"}],"tags":{"http.method":"GET","http.path":"/orders","http.status_code":"200"}},` +
	`{"timestamp":1700000000123000,"duration":2100,"traceId":"5af7183fb1d4cf5f","id":"5af7183fb1d4cf5f","debug":true,"name":"checkout","kind":"SERVER","shared":true,"localEndpoint":{"serviceName":"checkout","ipv4":"192.168.1.17","port":8080}}]`

// otelBody is shaped as OpenTelemetry Go's Zipkin exporter writes (it
// serialises zipkin-go's model): 128-bit trace IDs, the service name from
// the resource, events as annotations, status and scope as tags.
const otelBody = `[{"timestamp":1700000000200000,"duration":45210,"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","id":"00f067aa0ba902b7","parentId":"a3ce929d0e0e4736","name":"SELECT orders","kind":"CLIENT","localEndpoint":{"serviceName":"Orders-API"},"remoteEndpoint":{"ipv4":"10.1.2.3","port":3306},` +
	`"annotations":[{"timestamp":1700000000210000,"value":"exception: {\"exception.message\":\"deadlock found\",\"exception.type\":\"*mysql.MySQLError\"}"}],` +
	`"tags":{"db.system":"mysql","db.statement":"SELECT * FROM orders WHERE id = ?","error":"deadlock found","otel.scope.name":"github.com/XSAM/otelsql","otel.scope.version":"0.27.0","otel.status_code":"ERROR","service.name":"Orders-API","telemetry.sdk.language":"go"}}]`

func TestZipkinGoPayload(t *testing.T) {
	spans := mustDecodeV2(t, zipkinGoBody)
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	c := spans[0]
	if c.TraceID != (model.TraceID{Low: 0x5af7183fb1d4cf5f}) || c.ParentID != 0x5af7183fb1d4cf5f || c.ID != 0x4fd7a2b57cc2d0cd ||
		c.Kind != model.KindClient || c.Name != "get /orders" || c.Timestamp != 1700000000123456 || c.Duration != 1523 ||
		c.LocalEndpoint.IPv4 != netip.MustParseAddr("192.168.1.17") || c.RemoteEndpoint.IPv6 != netip.MustParseAddr("2001:db8::68") ||
		c.RemoteEndpoint.Port != 9411 || len(c.Annotations) != 2 || c.Tags["http.status_code"] != "200" {
		t.Errorf("client span: %+v", c)
	}
	s := spans[1]
	if !s.Debug || !s.Shared || s.Kind != model.KindServer || s.ParentID != 0 {
		t.Errorf("server span: %+v", s)
	}
}

func TestOpenTelemetryPayload(t *testing.T) {
	spans := mustDecodeV2(t, otelBody)
	s := spans[0]
	if s.TraceID != (model.TraceID{High: 0x4bf92f3577b34da6, Low: 0xa3ce929d0e0e4736}) || s.LocalServiceName() != "orders-api" ||
		s.RemoteEndpoint.Port != 3306 || s.Tags["otel.status_code"] != "ERROR" || s.Tags["service.name"] != "Orders-API" ||
		s.Annotations[0].Value != `exception: {"exception.message":"deadlock found","exception.type":"*mysql.MySQLError"}` {
		t.Errorf("span: %+v", s)
	}
	if err := CheckFormat(JSONV2, []byte(otelBody)); err != nil {
		t.Error(err)
	}
}
