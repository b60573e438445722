package codec

import (
	"encoding/json"
	"strconv"
	"testing"
)

// Benchmarks report spans/s for batches of 10 and 100 realistic spans.
// go test -run '^$' -bench . -benchmem -count 10 ./zipkin/codec

func benchSizes(b *testing.B, f func(b *testing.B, n int)) {
	for _, n := range []int{10, 100} {
		b.Run(strconv.Itoa(n), func(b *testing.B) { f(b, n) })
	}
}

func reportSpans(b *testing.B, n int) {
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "spans/s")
}

func BenchmarkDecodeJSONV2(b *testing.B) {
	benchSizes(b, func(b *testing.B, n int) {
		body := AppendJSONV2Spans(nil, realisticSpans(n))
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeJSONV2(body); err != nil {
				b.Fatal(err)
			}
		}
		reportSpans(b, n)
	})
}

// stdSpan mirrors the v2 JSON for the encoding/json baseline, which only
// unmarshals (no ID parsing, validation or normalisation).
type stdSpan struct {
	TraceID        string            `json:"traceId"`
	ParentID       string            `json:"parentId"`
	ID             string            `json:"id"`
	Kind           string            `json:"kind"`
	Name           string            `json:"name"`
	Timestamp      int64             `json:"timestamp"`
	Duration       int64             `json:"duration"`
	LocalEndpoint  *stdEndpoint      `json:"localEndpoint"`
	RemoteEndpoint *stdEndpoint      `json:"remoteEndpoint"`
	Annotations    []stdAnnotation   `json:"annotations"`
	Tags           map[string]string `json:"tags"`
	Debug          bool              `json:"debug"`
	Shared         bool              `json:"shared"`
}

type stdEndpoint struct {
	ServiceName string `json:"serviceName"`
	IPv4        string `json:"ipv4"`
	IPv6        string `json:"ipv6"`
	Port        int    `json:"port"`
}

type stdAnnotation struct {
	Timestamp int64  `json:"timestamp"`
	Value     string `json:"value"`
}

func BenchmarkDecodeJSONV2StdlibBaseline(b *testing.B) {
	benchSizes(b, func(b *testing.B, n int) {
		body := AppendJSONV2Spans(nil, realisticSpans(n))
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			var out []stdSpan
			if err := json.Unmarshal(body, &out); err != nil {
				b.Fatal(err)
			}
		}
		reportSpans(b, n)
	})
}

func BenchmarkEncodeJSONV2(b *testing.B) {
	benchSizes(b, func(b *testing.B, n int) {
		spans := realisticSpans(n)
		buf := AppendJSONV2Spans(nil, spans)
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendJSONV2Spans(buf[:0], spans)
		}
		reportSpans(b, n)
	})
}

func BenchmarkDecodeProto3(b *testing.B) {
	benchSizes(b, func(b *testing.B, n int) {
		body := AppendProto3Spans(nil, realisticSpans(n))
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeProto3(body); err != nil {
				b.Fatal(err)
			}
		}
		reportSpans(b, n)
	})
}

func BenchmarkEncodeProto3(b *testing.B) {
	benchSizes(b, func(b *testing.B, n int) {
		spans := realisticSpans(n)
		buf := AppendProto3Spans(nil, spans)
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendProto3Spans(buf[:0], spans)
		}
		reportSpans(b, n)
	})
}
