package codec

import (
	"strconv"
	"strings"
	"testing"
)

// v1Body is n v1 spans, each one client+server RPC in a single span (the
// shape Zipkin v1 instrumentation sends and the split case of the
// converter) with tags and address annotations.
func v1Body(n int) []byte {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		id := strconv.FormatInt(int64(i+1), 16)
		b.WriteString(`{"traceId":"5af7183fb1d4cf5f","id":"` + id + `","parentId":"6b221d5bc9e6496c","name":"get /api","timestamp":1000,"duration":500,` +
			`"annotations":[{"timestamp":1000,"value":"cs","endpoint":` + v1Frontend + `},{"timestamp":1100,"value":"sr","endpoint":` + v1Backend + `},` +
			`{"timestamp":1400,"value":"ss","endpoint":` + v1Backend + `},{"timestamp":1500,"value":"cr","endpoint":` + v1Frontend + `}],` +
			`"binaryAnnotations":[{"key":"http.path","value":"/api","endpoint":` + v1Frontend + `},{"key":"srv.version","value":"1.2","endpoint":` + v1Backend + `},` +
			`{"key":"sa","value":true,"endpoint":` + v1Backend + `}]}`)
	}
	b.WriteByte(']')
	return []byte(b.String())
}

func BenchmarkDecodeJSONV1(b *testing.B) {
	benchSizes(b, func(b *testing.B, n int) {
		body := v1Body(n)
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeJSONV1(body); err != nil {
				b.Fatal(err)
			}
		}
		reportSpans(b, n)
	})
}
