package codec

import (
	"runtime"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// TestOneSpanMessageIsSmall: decoding a list of one span (what Kafka and
// RabbitMQ reporters send, and what the ingest queue then holds for each
// message) allocates about a span's worth, not a 32-endpoint slab and a
// 128-annotation slab (7 KiB).
func TestOneSpanMessageIsSmall(t *testing.T) {
	msg := []byte(`[{"traceId":"0000000000000001","id":"0000000000000002","kind":"SERVER","name":"op","timestamp":1,"duration":1,` +
		`"localEndpoint":{"serviceName":"svc","ipv4":"10.0.0.1"},"remoteEndpoint":{"serviceName":"db"},"annotations":[{"timestamp":1,"value":"x"}]}]`)
	proto := AppendProto3Spans(nil, mustDecode(t, msg))
	for name, decode := range map[string]func() error{
		"json":   func() error { _, err := DecodeJSONV2(msg); return err },
		"proto3": func() error { _, err := DecodeProto3(proto); return err },
	} {
		const runs = 1000
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range runs {
			if err := decode(); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 1500 {
			t.Errorf("%s: %d bytes allocated to decode one span, want at most 1500", name, per)
		}
	}
}

func mustDecode(t *testing.T, msg []byte) []model.Span {
	t.Helper()
	spans, err := DecodeJSONV2(msg)
	if err != nil {
		t.Fatal(err)
	}
	return spans
}
