package otlphttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/zipkin"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqlpool/sqlpool/app/zipkin/server"
)

// expectedDifferences are the differences between a trace sent through
// the deprecated Zipkin exporter and the same trace sent through OTLP, as
// read back; docs/server.md explains each.
var expectedDifferences = []string{
	// Status ERROR without a description: the Zipkin exporter writes
	// error="", this server takes the exception event's message.
	`span "charge": tag error: zipkin "" otlp "card declined"`,
}

// TestSameTraceThroughZipkinExporterAndOTLP sends one trace (every span
// kind, an error status, exception events, a link, resource attributes,
// array attributes, events with attributes) through three exporters at once
// (the deprecated Zipkin exporter to POST /api/v2/spans, otlptracehttp to
// /v1/traces, otlptracegrpc to TraceService/Export), each to a server of
// its own (both OTLP exporters gzip their requests), and compares what
// every GET endpoint answers.
func TestSameTraceThroughZipkinExporterAndOTLP(t *testing.T) {
	ez, eh, eg := newEnv(t, server.Config{}), newEnv(t, server.Config{}), newEnv(t, server.Config{})
	ctx := context.Background()
	zexp, err := zipkin.New(ez.base + "/api/v2/spans")
	must(t, err)
	hexp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(eh.base+"/v1/traces"),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	must(t, err)
	gexp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(eg.otlpGRPC), otlptracegrpc.WithInsecure(),
		otlptracegrpc.WithCompressor("gzip"))
	must(t, err)
	res := resource.NewSchemaless(attribute.String("service.name", "Checkout"), attribute.String("deployment.environment", "test"),
		attribute.StringSlice("host.ips", []string{"10.0.0.1", "10.0.0.2"}), attribute.Int("process.pid", 42))
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res),
		sdktrace.WithSyncer(zexp), sdktrace.WithSyncer(hexp), sdktrace.WithSyncer(gexp))
	tr := tp.Tracer("shop/checkout", trace.WithInstrumentationVersion("1.4.0"))

	rctx, root := tr.Start(ctx, "POST /checkout", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", "POST"), attribute.Int("http.response.status_code", 200),
			attribute.Bool("user.known", true), attribute.Float64("cart.total", 12.5), attribute.Int64Slice("cart.items", []int64{3, 1})))
	root.AddEvent("validated", trace.WithAttributes(attribute.String("rule", "stock"), attribute.Int("n", 2)))
	_, internal := tr.Start(rctx, "price cart")
	internal.SetStatus(codes.Ok, "")
	internal.SetAttributes(attribute.String("error", "false"))
	internal.End()
	_, db := tr.Start(rctx, "SELECT orders", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("peer.service", "MySQL"), attribute.String("db.system", "mysql"),
			attribute.String("server.address", "db.internal")))
	db.RecordError(errors.New("deadlock found"), trace.WithAttributes(attribute.Bool("retried", true)))
	db.SetStatus(codes.Error, "deadlock found when trying to get lock")
	db.End()
	_, charge := tr.Start(rctx, "charge", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("peer.service", "payments")))
	charge.RecordError(errors.New("card declined"))
	charge.SetStatus(codes.Error, "")
	charge.End()
	_, prod := tr.Start(rctx, "publish order", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("network.peer.address", "10.1.2.3"), attribute.Int("network.peer.port", 9092),
			attribute.String("messaging.system", "kafka")))
	prodCtx := prod.SpanContext()
	prod.End()
	_, cons := tr.Start(rctx, "consume order", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(trace.Link{SpanContext: prodCtx, Attributes: []attribute.KeyValue{attribute.String("link", "producer")}}))
	cons.End()
	root.End()
	traceID := root.SpanContext().TraceID().String()
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	must(t, tp.Shutdown(sctx))
	for _, e := range []*env{ez, eh, eg} {
		e.waitDrained(t)
	}

	now := time.Now().UnixMilli()
	paths := []string{
		"/api/v2/services",
		"/api/v2/spans?serviceName=checkout",
		"/api/v2/remoteServices?serviceName=checkout",
		"/api/v2/traces?serviceName=checkout&lookback=3600000&limit=10",
		"/api/v2/traces?serviceName=checkout&annotationQuery=error&lookback=3600000",
		"/api/v2/traces?remoteServiceName=mysql&lookback=3600000",
		"/api/v2/traces?spanName=charge&lookback=3600000",
		"/api/v2/trace/" + traceID,
		"/api/v2/traceMany?traceIds=" + traceID + ",1",
		"/api/v2/dependencies?endTs=" + strconv.FormatInt(now+60_000, 10) + "&lookback=3600000",
		"/api/v2/autocompleteKeys",
		"/api/v2/autocompleteValues?key=deployment.environment",
		"/zipkin/api/v2/trace/" + traceID,
	}
	var diffs []string
	for _, p := range paths {
		z := decodeAny(t, ez.get(t, p))
		for _, o := range []struct {
			name string
			e    *env
		}{{"otlp-http", eh}, {"otlp-grpc", eg}} {
			got := decodeAny(t, o.e.get(t, p))
			d := compare(z, got)
			if strings.Contains(p, "/trace") {
				// Report the trace differences once (per transport).
				for _, x := range d {
					if o.name == "otlp-http" && strings.HasPrefix(p, "/api/v2/trace/") {
						diffs = append(diffs, x)
					}
				}
				if !slices.Equal(d, expectedDifferences) && len(d) > 0 {
					t.Errorf("%s %s: differences %q, want %q", o.name, p, d, expectedDifferences)
				}
				continue
			}
			if len(d) > 0 {
				t.Errorf("%s %s differs: %q\nzipkin %s\notlp   %s", o.name, p, d, ez.get(t, p), o.e.get(t, p))
			}
		}
	}
	sort.Strings(diffs)
	t.Logf("differences, Zipkin exporter vs OTLP, trace by ID: %q", diffs)
	if !slices.Equal(diffs, expectedDifferences) {
		t.Errorf("trace differences %q, want exactly %q", diffs, expectedDifferences)
	}
	// A sanity check that the comparison saw the trace at all.
	var spans []map[string]any
	must(t, json.Unmarshal(eh.get(t, "/api/v2/trace/"+traceID), &spans))
	t.Logf("the trace over OTLP: %s", eh.get(t, "/api/v2/trace/"+traceID))
	if len(spans) != 6 {
		t.Fatalf("trace has %d spans, want 6", len(spans))
	}
}

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	must(t, json.Unmarshal(b, &v))
	return v
}

// compare returns the differences between two answers: for lists of spans
// (traces) span by span and field by field, keyed by span name; otherwise
// the whole value.
func compare(z, o any) []string {
	zs, zok := spanList(z)
	os, ook := spanList(o)
	if !zok || !ook {
		if reflect.DeepEqual(z, o) {
			return nil
		}
		return []string{fmt.Sprintf("value: zipkin %v otlp %v", z, o)}
	}
	var out []string
	for name, zsp := range zs {
		osp, ok := os[name]
		if !ok {
			out = append(out, fmt.Sprintf("span %q missing over OTLP", name))
			continue
		}
		for k := range union(zsp, osp) {
			if k == "tags" {
				zt, _ := zsp[k].(map[string]any)
				ot, _ := osp[k].(map[string]any)
				for tk := range union(zt, ot) {
					if !reflect.DeepEqual(zt[tk], ot[tk]) {
						out = append(out, fmt.Sprintf("span %q: tag %s: zipkin %s otlp %s", name, tk, jsonOf(zt[tk]), jsonOf(ot[tk])))
					}
				}
				continue
			}
			if !reflect.DeepEqual(zsp[k], osp[k]) {
				out = append(out, fmt.Sprintf("span %q: %s: zipkin %s otlp %s", name, k, jsonOf(zsp[k]), jsonOf(osp[k])))
			}
		}
	}
	for name := range os {
		if _, ok := zs[name]; !ok {
			out = append(out, fmt.Sprintf("span %q only over OTLP", name))
		}
	}
	sort.Strings(out)
	return out
}

func jsonOf(v any) string {
	if v == nil {
		return "absent"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func union(a, b map[string]any) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}

// spanList flattens a trace ([]span) or a list of traces ([][]span) into
// spans by name.
func spanList(v any) (map[string]map[string]any, bool) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, false
	}
	out := map[string]map[string]any{}
	var add func(x any) bool
	add = func(x any) bool {
		switch y := x.(type) {
		case map[string]any:
			name, _ := y["name"].(string)
			out[name] = y
			return true
		case []any:
			for _, e := range y {
				if !add(e) {
					return false
				}
			}
			return true
		}
		return false
	}
	if !add(list) {
		return nil, false
	}
	_, isSpan := out[""]
	return out, !isSpan && len(out) > 0
}
