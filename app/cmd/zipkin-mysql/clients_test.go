package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	zipkingo "github.com/openzipkin/zipkin-go"
	zkmodel "github.com/openzipkin/zipkin-go/model"
	"github.com/openzipkin/zipkin-go/proto/zipkin_proto3"
	zkreporter "github.com/openzipkin/zipkin-go/reporter"
	zkhttp "github.com/openzipkin/zipkin-go/reporter/http"
	"go.opentelemetry.io/otel/attribute"
	otelzipkin "go.opentelemetry.io/otel/exporters/zipkin"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// TestClientsEndToEnd sends spans with the real zipkin-go reporter (JSON and
// proto3) and OpenTelemetry's Zipkin exporter to the command, and reads
// them back through every GET endpoint: what comes back equals what was
// sent after Zipkin's normalisation (the codec's decoder applied to the
// clients' own JSON).
func TestClientsEndToEnd(t *testing.T) {
	t.Run("memory (default)", func(t *testing.T) { clientsEndToEnd(t, false) })
	t.Run("embedded", func(t *testing.T) { clientsEndToEnd(t, true, "-storage=embedded") })
	t.Run("mariadb", func(t *testing.T) { clientsEndToEnd(t, true, "-dsn", freshDatabase(t), "-init-schema") })
	t.Run("mariadb database-sql", func(t *testing.T) {
		clientsEndToEnd(t, true, "-dsn", freshDatabase(t), "-init-schema", "-pool=database-sql")
	})
}

// statusRecorder is an HTTP client that records the statuses the server
// answered (zipkin-go only logs a non-2xx).
type statusRecorder struct {
	mu    sync.Mutex
	codes []int
}

func (s *statusRecorder) Do(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		s.mu.Lock()
		s.codes = append(s.codes, resp.StatusCode)
		s.mu.Unlock()
	}
	return resp, err
}

// recordingReporter keeps what the tracer reports and forwards it.
type recordingReporter struct {
	zkreporter.Reporter
	mu   sync.Mutex
	sent []zkmodel.SpanModel
}

func (r *recordingReporter) Send(s zkmodel.SpanModel) {
	r.mu.Lock()
	r.sent = append(r.sent, s)
	r.mu.Unlock()
	r.Reporter.Send(s)
}

// recordingExporter keeps the Zipkin models of what OTel exports.
type recordingExporter struct {
	*otelzipkin.Exporter
	mu   sync.Mutex
	sent []zkmodel.SpanModel
}

func (e *recordingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	e.sent = append(e.sent, otelzipkin.SpanModels(spans)...)
	e.mu.Unlock()
	return e.Exporter.ExportSpans(ctx, spans)
}

// normalised converts client span models to what Zipkin stores: the bytes
// the client's serializer sends, through the codec's decoder (which
// normalises).
func normalised(t *testing.T, sent []zkmodel.SpanModel, ser zkreporter.SpanSerializer) []model.Span {
	t.Helper()
	ptrs := make([]*zkmodel.SpanModel, len(sent))
	for i := range sent {
		ptrs[i] = &sent[i]
	}
	b, err := ser.Serialize(ptrs)
	if err != nil {
		t.Fatal(err)
	}
	decode := codec.DecodeJSONV2
	if strings.Contains(ser.ContentType(), "protobuf") {
		decode = codec.DecodeProto3
	}
	spans, err := decode(b)
	if err != nil {
		t.Fatalf("decoding what the client sent: %v\n%s", err, b)
	}
	return spans
}

// clientsEndToEnd runs the command with args; mysqlSchema says that its
// store keeps one name per span ID, as Zipkin's MySQL schema (see
// sameSpans), where the memory store keeps each half's own.
func clientsEndToEnd(t *testing.T, mysqlSchema bool, args ...string) {
	base, stop := runInProcess(t, envFunc("AUTOCOMPLETE_KEYS", "http.method,env"), args...)
	defer stop()
	endpoint := base + "/api/v2/spans"

	// zipkin-go: a server span calling a backend (client span, then the
	// backend's server span), with tags and an annotation; once as JSON and
	// once as proto3.
	codes := &statusRecorder{}
	var want []model.Span
	var zgoTraces []string
	// The JSON round shares the span ID between client and server (zipkin-go's
	// default), the proto3 round does not.
	for round, serializer := range []zkreporter.SpanSerializer{zkreporter.JSONSerializer{}, zipkin_proto3.SpanSerializer{}} {
		rep := &recordingReporter{Reporter: zkhttp.NewReporter(endpoint, zkhttp.Client(codes),
			zkhttp.Serializer(serializer), zkhttp.BatchInterval(50*time.Millisecond))}
		front, err := zipkingo.NewTracer(rep, zipkingo.WithLocalEndpoint(&zkmodel.Endpoint{ServiceName: "ZGO-Frontend", Port: 8080}))
		if err != nil {
			t.Fatal(err)
		}
		back, err := zipkingo.NewTracer(rep, zipkingo.WithLocalEndpoint(&zkmodel.Endpoint{ServiceName: "zgo-backend"}),
			zipkingo.WithSharedSpans(round == 0))
		if err != nil {
			t.Fatal(err)
		}
		root := front.StartSpan("GET /Users", zipkingo.Kind(zkmodel.Server))
		root.Tag("http.method", "GET")
		root.Tag("env", "test")
		client := front.StartSpan("call backend", zipkingo.Kind(zkmodel.Client), zipkingo.Parent(root.Context()),
			zipkingo.RemoteEndpoint(&zkmodel.Endpoint{ServiceName: "zgo-backend", Port: 9000}))
		server := back.StartSpan("handle", zipkingo.Kind(zkmodel.Server), zipkingo.Parent(client.Context()))
		server.Annotate(time.Now(), "cache miss")
		server.Tag("http.method", "POST")
		time.Sleep(2 * time.Millisecond)
		server.Finish()
		client.Finish()
		root.Finish()
		if err := rep.Close(); err != nil {
			t.Fatal(err)
		}
		want = append(want, normalised(t, rep.sent, serializer)...)
		zgoTraces = append(zgoTraces, root.Context().TraceID.String())
	}
	for _, c := range codes.codes {
		if c != http.StatusAccepted {
			t.Fatalf("zipkin-go got status %d, want 202 (all: %v)", c, codes.codes)
		}
	}
	if len(codes.codes) == 0 {
		t.Fatal("zipkin-go sent nothing")
	}

	// OpenTelemetry's exporter (it treats any status but 202 as an error).
	zexp, err := otelzipkin.New(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	exp := &recordingExporter{Exporter: zexp}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "otel-svc"))))
	tr := tp.Tracer("e2e")
	octx, parent := tr.Start(context.Background(), "Parent-Op", oteltrace.WithSpanKind(oteltrace.SpanKindServer),
		oteltrace.WithAttributes(attribute.String("http.method", "GET")))
	_, child := tr.Start(octx, "child-op", oteltrace.WithSpanKind(oteltrace.SpanKindClient),
		oteltrace.WithAttributes(attribute.String("peer.service", "otel-db"), attribute.Int("n", 3)))
	child.AddEvent("sent")
	time.Sleep(2 * time.Millisecond)
	child.End()
	parent.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatalf("OTel export: %v", err)
	}
	want = append(want, normalised(t, exp.sent, zkreporter.JSONSerializer{})...)
	otelTrace := parent.SpanContext().TraceID().String()

	waitDrained(t, base, 60*time.Second)

	byTrace := map[string][]model.Span{}
	for _, s := range want {
		byTrace[s.TraceID.String()] = append(byTrace[s.TraceID.String()], s)
	}
	if len(byTrace) != 3 {
		t.Fatalf("sent %d traces, want 3", len(byTrace))
	}

	// /trace/{id} for each trace, under both prefixes.
	for id, spans := range byTrace {
		for _, prefix := range []string{"/api/v2", "/zipkin/api/v2"} {
			code, body := httpGet(t, base+prefix+"/trace/"+id)
			if code != 200 {
				t.Fatalf("%s/trace/%s: %d %s", prefix, id, code, body)
			}
			got, err := codec.DecodeJSONV2(body)
			if err != nil {
				t.Fatal(err)
			}
			sameSpans(t, "trace "+id, got, spans, mysqlSchema)
		}
	}

	// /traceMany.
	ids := []string{zgoTraces[0], zgoTraces[1], otelTrace}
	code, body := httpGet(t, base+"/api/v2/traceMany?traceIds="+strings.Join(ids, ","))
	if code != 200 {
		t.Fatalf("traceMany: %d %s", code, body)
	}
	checkTraces(t, "traceMany", body, byTrace, ids, mysqlSchema)

	// /traces by service, by remote service, by tag, by span name.
	lookback := "&lookback=3600000&limit=100"
	for _, q := range []struct {
		query string
		want  []string
	}{
		{"serviceName=zgo-frontend", zgoTraces},
		{"serviceName=zgo-frontend&remoteServiceName=zgo-backend", zgoTraces},
		{"serviceName=zgo-backend&annotationQuery=" + url.QueryEscape("http.method=POST and cache miss"), zgoTraces},
		{"serviceName=otel-svc&spanName=parent-op", []string{otelTrace}},
		{"annotationQuery=" + url.QueryEscape("http.method=GET"), ids},
		{"serviceName=otel-svc&minDuration=1", []string{otelTrace}},
	} {
		code, body := httpGet(t, base+"/api/v2/traces?"+q.query+lookback)
		if code != 200 {
			t.Fatalf("traces?%s: %d %s", q.query, code, body)
		}
		checkTraces(t, "traces?"+q.query, body, byTrace, q.want, mysqlSchema)
	}

	// Names.
	getStrings := func(path string) []string {
		t.Helper()
		code, body := httpGet(t, base+path)
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		var out []string
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return out
	}
	for _, c := range []struct {
		path string
		want []string
	}{
		{"/api/v2/services", []string{"otel-svc", "zgo-backend", "zgo-frontend"}},
		{"/zipkin/api/v2/services", []string{"otel-svc", "zgo-backend", "zgo-frontend"}},
		{"/api/v2/spans?serviceName=zgo-frontend", []string{"call backend", "get /users"}},
		{"/api/v2/spans?serviceName=otel-svc", []string{"child-op", "parent-op"}},
		{"/api/v2/remoteServices?serviceName=zgo-frontend", []string{"zgo-backend"}},
		{"/api/v2/remoteServices?serviceName=otel-svc", []string{"otel-db"}},
		{"/api/v2/autocompleteKeys", []string{"env", "http.method"}},
		{"/api/v2/autocompleteValues?key=http.method", []string{"GET", "POST"}},
		{"/api/v2/autocompleteValues?key=env", []string{"test"}},
	} {
		got := getStrings(c.path)
		if !sort.StringsAreSorted(got) {
			t.Errorf("%s = %q, not sorted", c.path, got)
		}
		// Names may include the other half's name of a shared span (see
		// sameSpans): check containment.
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("%s = %q, want it to contain %q", c.path, got, w)
			}
		}
	}

	// Dependencies: frontend → backend, counted from the two zipkin-go traces.
	code, body = httpGet(t, fmt.Sprintf("%s/api/v2/dependencies?endTs=%d&lookback=3600000", base, time.Now().Add(time.Minute).UnixMilli()))
	if code != 200 {
		t.Fatalf("dependencies: %d %s", code, body)
	}
	var links []struct {
		Parent, Child string
		CallCount     int64
	}
	if err := json.Unmarshal(body, &links); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range links {
		if l.Parent == "zgo-frontend" && l.Child == "zgo-backend" {
			found = l.CallCount == 2
		}
	}
	if !found {
		t.Errorf("dependencies %s: want zgo-frontend → zgo-backend with callCount 2", body)
	}
}

// checkTraces decodes a list of traces and compares each with what was sent.
func checkTraces(t *testing.T, what string, body []byte, sent map[string][]model.Span, want []string, mysqlSchema bool) {
	t.Helper()
	var raw []json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("%s: %v: %s", what, err, body)
	}
	var got []string
	for _, r := range raw {
		spans, err := codec.DecodeJSONV2(r)
		if err != nil {
			t.Fatal(err)
		}
		if len(spans) == 0 {
			t.Fatalf("%s: an empty trace", what)
		}
		id := spans[0].TraceID.String()
		got = append(got, id)
		sameSpans(t, what+" trace "+id, spans, sent[id], mysqlSchema)
	}
	sort.Strings(got)
	w := slices.Clone(want)
	sort.Strings(w)
	if !reflect.DeepEqual(got, w) {
		t.Fatalf("%s returned traces %v, want %v", what, got, w)
	}
}

// sameSpans compares what a store returned with what was sent. With
// mysqlSchema, the two halves of a shared span are expected under one name
// (below); without, each under its own, as sent (Zipkin's in-memory
// storage).
func sameSpans(t *testing.T, what string, got, want []model.Span, mysqlSchema bool) {
	t.Helper()
	key := func(s []model.Span) {
		sort.Slice(s, func(i, j int) bool {
			if s[i].ID != s[j].ID {
				return s[i].ID < s[j].ID
			}
			return !s[i].Shared && s[j].Shared
		})
	}
	got, want = slices.Clone(got), slices.Clone(want)
	// Zipkin's MySQL schema has one zipkin_spans row, so one name, per span
	// ID: the client and server halves of a shared span come back with the
	// same name, one of the two sent (Zipkin's own MySQL store does the
	// same). Expect the name the store chose when it is one of the halves'.
	gotName := map[model.ID]string{}
	for _, s := range got {
		if s.Shared {
			gotName[s.ID] = s.Name
		}
	}
	names := map[model.ID][]string{}
	for _, s := range want {
		names[s.ID] = append(names[s.ID], s.Name)
	}
	for i := range want {
		if n, ok := gotName[want[i].ID]; ok && mysqlSchema && len(names[want[i].ID]) == 2 && slices.Contains(names[want[i].ID], n) {
			want[i].Name = n
		}
	}
	key(got)
	key(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s differs:\n got: %s\nwant: %s", what, codec.AppendJSONV2Spans(nil, got), codec.AppendJSONV2Spans(nil, want))
	}
}
