package otlphttp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sqlpool/sqlpool/app/zipkin/server"
)

// TestSaturationJSONvsOTLP compares stored spans/s at saturation of POST
// /api/v2/spans (JSON v2) and POST /v1/traces (OTLP protobuf) with the same
// traces (10 spans, the same names, kinds, tags and service), in one run,
// alternating JSON, OTLP, OTLP, JSON on one server. Run with
// OTLP_SATURATION=<seconds per step> and MYSQL_TEST_DSN (MariaDB);
// OTLP_SATURATION_CLIENTS sets the concurrent posters (default 16).
func TestSaturationJSONvsOTLP(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("OTLP_SATURATION"))
	if secs <= 0 || os.Getenv("MYSQL_TEST_DSN") == "" {
		t.Skip("set OTLP_SATURATION=<seconds per step> and MYSQL_TEST_DSN to measure")
	}
	clients := 16
	if v, err := strconv.Atoi(os.Getenv("OTLP_SATURATION_CLIENTS")); err == nil && v > 0 {
		clients = v
	}
	e := newEnv(t, server.Config{})
	var seq atomic.Uint64
	seq.Store(uint64(time.Now().UnixNano()))
	results := map[string][]float64{}
	for _, kind := range []string{"json", "otlp", "otlp", "json"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second)
		var accepted, refused atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				for ctx.Err() == nil {
					n := seq.Add(1)
					var body []byte
					ct, path := "application/json", "/api/v2/spans"
					if kind == "json" {
						body = jsonTrace(n)
					} else {
						body, ct, path = otlpTrace(t, n), "application/x-protobuf", "/v1/traces"
					}
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+path, bytes.NewReader(body))
					req.Header.Set("Content-Type", ct)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					switch resp.StatusCode {
					case 200, 202:
						accepted.Add(10)
					default:
						refused.Add(1)
						time.Sleep(10 * time.Millisecond) // as a client backing off on 503
					}
				}
			})
		}
		wg.Wait()
		cancel()
		e.waitDrained(t)
		took := time.Since(start)
		rate := float64(accepted.Load()) / took.Seconds()
		results[kind] = append(results[kind], rate)
		t.Logf("%s: %d spans stored in %v (%.0f spans/s), %d refusals", kind, accepted.Load(), took.Round(time.Millisecond), rate, refused.Load())
	}
	avg := func(v []float64) float64 { return (v[0] + v[1]) / 2 }
	t.Logf("stored spans/s: JSON v2 %.0f, OTLP/HTTP protobuf %.0f, ratio %.2f", avg(results["json"]), avg(results["otlp"]),
		avg(results["otlp"])/avg(results["json"]))
}

var spanNames = []string{"get /api", "select", "publish", "consume", "auth", "render", "cache get", "cache set", "rpc", "log"}

func jsonTrace(n uint64) []byte {
	now := time.Now().UnixMicro()
	var b bytes.Buffer
	b.WriteByte('[')
	for i := range 10 {
		if i > 0 {
			b.WriteByte(',')
		}
		parent := ""
		if i > 0 {
			parent = fmt.Sprintf(`"parentId":"%016x",`, n<<4)
		}
		fmt.Fprintf(&b, `{"traceId":"%016x%016x",%s"id":"%016x","kind":"%s","name":"%s","timestamp":%d,"duration":%d,`+
			`"localEndpoint":{"serviceName":"svc-%02d"},"tags":{"http.method":"GET","http.status_code":"200","i":"%d","service.name":"svc-%02d"}}`,
			n, n, parent, n<<4|uint64(i), []string{"SERVER", "CLIENT"}[min(i, 1)], spanNames[i], now+int64(i), 100+i, n%10, i, n%10)
	}
	b.WriteByte(']')
	return b.Bytes()
}

func otlpTrace(t *testing.T, n uint64) []byte {
	now := uint64(time.Now().UnixNano())
	tid := make([]byte, 16)
	binary.BigEndian.PutUint64(tid, n)
	binary.BigEndian.PutUint64(tid[8:], n)
	s := func(k, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	var spans []*tracepb.Span
	for i := range 10 {
		sid := make([]byte, 8)
		binary.BigEndian.PutUint64(sid, n<<4|uint64(i))
		sp := &tracepb.Span{TraceId: tid, SpanId: sid, Name: spanNames[i], Kind: tracepb.Span_SPAN_KIND_CLIENT,
			StartTimeUnixNano: now + uint64(i)*1000, EndTimeUnixNano: now + uint64(i)*1000 + uint64(100+i)*1000,
			Attributes: []*commonpb.KeyValue{s("http.method", "GET"), s("http.status_code", "200"), s("i", strconv.Itoa(i))}}
		if i == 0 {
			sp.Kind = tracepb.Span_SPAN_KIND_SERVER
		} else {
			sp.ParentSpanId = make([]byte, 8)
			binary.BigEndian.PutUint64(sp.ParentSpanId, n<<4)
		}
		spans = append(spans, sp)
	}
	b, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{s("service.name", fmt.Sprintf("svc-%02d", n%10))}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}},
	}}})
	if err != nil {
		t.Error(err)
	}
	return b
}
