package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	zipkin_proto3 "github.com/openzipkin/zipkin-go/proto/zipkin_proto3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sqlpool/sqlpool/app/zipkin/collector/grpccollector"
)

func TestParseCollectorConfig(t *testing.T) {
	c, err := parseCollectorConfig(envFunc())
	if err != nil || !c.OTLPHTTP || !c.GRPC || c.OTLPGRPC || c.OTLPGRPCPort != 4317 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	c, err = parseCollectorConfig(envFunc("COLLECTOR_OTLP_HTTP_ENABLED", "false", "COLLECTOR_GRPC_ENABLED", "false",
		"COLLECTOR_OTLP_GRPC_ENABLED", "true", "COLLECTOR_OTLP_GRPC_PORT", "14317"))
	if err != nil || c.OTLPHTTP || c.GRPC || !c.OTLPGRPC || c.OTLPGRPCPort != 14317 {
		t.Fatalf("set: %+v %v", c, err)
	}
	for _, kv := range [][2]string{{"COLLECTOR_OTLP_GRPC_PORT", "70000"}, {"COLLECTOR_OTLP_GRPC_ENABLED", "yes please"}, {"COLLECTOR_GRPC_ENABLED", "2"}} {
		if _, err := parseCollectorConfig(envFunc(kv[0], kv[1])); err == nil || !strings.Contains(err.Error(), kv[0]) {
			t.Errorf("%s=%s: %v", kv[0], kv[1], err)
		}
	}
}

// TestCollectorsEndToEnd runs the command with every collector on and sends
// a trace through each: OTLP/HTTP, OTLP/gRPC on its own port, and
// SpanService/Report on the HTTP port; /metrics counts each under its
// transport.
func TestCollectorsEndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	stdout, logs := &syncBuffer{}, &syncBuffer{}
	env := envFunc("COLLECTOR_OTLP_GRPC_ENABLED", "true", "COLLECTOR_OTLP_GRPC_PORT", "0")
	go func() { done <- run(ctx, []string{"-listen", "127.0.0.1:0"}, env, stdout, logs, ready) }()
	var base string
	select {
	case addr := <-ready:
		base = "http://" + addr
	case err := <-done:
		t.Fatalf("run: %v\n%s", err, logs)
	case <-time.After(60 * time.Second):
		t.Fatal("not listening after 60 s")
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v\n%s", err, logs)
		}
	}()
	m := regexp.MustCompile(`OTLP/gRPC listening on (\S+)`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no OTLP/gRPC address in the output:\n%s", stdout)
	}
	otlpAddr := m[1]

	hexp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(base+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	gexp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(otlpAddr), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for name, exp := range map[string]sdktrace.SpanExporter{"via-otlp-http": hexp, "via-otlp-grpc": gexp} {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", name))))
		_, sp := tp.Tracer("t").Start(ctx, "op")
		sp.End()
		ids = append(ids, sp.SpanContext().TraceID().String())
		if err := tp.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cc, err := grpc.NewClient("passthrough:///"+strings.TrimPrefix(base, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	tid, sid := make([]byte, 16), make([]byte, 8)
	binary.BigEndian.PutUint64(tid[8:], uint64(time.Now().UnixNano()))
	tid[0], sid[7] = 0x5a, 1
	list := &zipkin_proto3.ListOfSpans{Spans: []*zipkin_proto3.Span{{TraceId: tid, Id: sid, Name: "op",
		Timestamp: uint64(time.Now().UnixMicro()), Duration: 1, LocalEndpoint: &zipkin_proto3.Endpoint{ServiceName: "via-grpc"}}}}
	if err := cc.Invoke(ctx, grpccollector.ZipkinReportMethod, list, &emptypb.Empty{}); err != nil {
		t.Fatalf("Report: %v", err)
	}
	ids = append(ids, fmt.Sprintf("%x", tid))
	waitDrained(t, base, time.Minute)
	for _, id := range ids {
		if code, body := httpGet(t, base+"/api/v2/trace/"+id); code != 200 {
			t.Errorf("trace %s: %d %s", id, code, body)
		}
	}
	for _, tr := range []string{"otlp-http", "otlp-grpc", "grpc", "http"} {
		want := 1.0
		if tr == "http" {
			want = 0
		}
		if v := metric(t, base, `zipkin_collector_messages_total{transport="`+tr+`"}`); v != want {
			t.Errorf("messages_total{transport=%q} = %v, want %v", tr, v, want)
		}
		if v := metric(t, base, `zipkin_collector_spans_total{transport="`+tr+`"}`); v != want {
			t.Errorf("spans_total{transport=%q} = %v, want %v", tr, v, want)
		}
	}
}

// TestOTLPHTTPDisabled: COLLECTOR_OTLP_HTTP_ENABLED=false leaves /v1/traces
// unserved.
func TestOTLPHTTPDisabled(t *testing.T) {
	base, stop := runInProcess(t, envFunc("COLLECTOR_OTLP_HTTP_ENABLED", "false", "COLLECTOR_GRPC_ENABLED", "false"), "-storage", "none")
	defer stop()
	resp, err := http.Post(base+"/v1/traces", "application/x-protobuf", bytes.NewReader(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("POST /v1/traces with OTLP/HTTP off: %d, want 404", resp.StatusCode)
	}
}
