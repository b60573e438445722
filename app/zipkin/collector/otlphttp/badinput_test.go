package otlphttp_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	zipkin_proto3 "github.com/openzipkin/zipkin-go/proto/zipkin_proto3"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sqlpool/sqlpool/app/zipkin/collector/grpccollector"
	"github.com/sqlpool/sqlpool/app/zipkin/server"
)

var idSeq atomic.Uint64

// newTrace returns a request of one trace of n valid spans and its trace
// ID (hex).
func newTrace(n int) (*coltracepb.ExportTraceServiceRequest, string) {
	tid := make([]byte, 16)
	binary.BigEndian.PutUint64(tid[:8], 0xabc0000000000000|idSeq.Add(1))
	binary.BigEndian.PutUint64(tid[8:], idSeq.Add(1))
	now := uint64(time.Now().UnixNano())
	var spans []*tracepb.Span
	for i := range n {
		sid := make([]byte, 8)
		binary.BigEndian.PutUint64(sid, idSeq.Add(1))
		spans = append(spans, &tracepb.Span{TraceId: tid, SpanId: sid, Name: fmt.Sprintf("s%d", i),
			StartTimeUnixNano: now, EndTimeUnixNano: now + 1000, Kind: tracepb.Span_SPAN_KIND_SERVER})
	}
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name",
			Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "bad-input"}}}}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}},
	}}}, fmt.Sprintf("%x", tid)
}

type httpResult struct {
	code   int
	ct     string
	header http.Header
	body   []byte
}

func postOTLP(t *testing.T, e *env, ct string, body []byte, hdr ...string) httpResult {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.base+"/v1/traces", bytes.NewReader(body))
	must(t, err)
	req.Header.Set("Content-Type", ct)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpResult{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header, b}
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	must(t, err)
	return b
}

// stored returns the spans read back for a trace.
func stored(t *testing.T, e *env, traceID string) int {
	t.Helper()
	resp, err := http.Get(e.base + "/api/v2/trace/" + traceID)
	must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return 0
	}
	var spans []jsonSpan
	must(t, json.NewDecoder(resp.Body).Decode(&spans))
	return len(spans)
}

// TestOTLPHTTPBadInput: each bad request gets the status the OTLP
// specification gives, and the valid requests sent before and after it are
// stored.
func TestOTLPHTTPBadInput(t *testing.T) {
	e := newEnv(t, server.Config{})
	var valid []string
	sendValid := func() {
		t.Helper()
		req, id := newTrace(2)
		r := postOTLP(t, e, "application/x-protobuf", marshal(t, req))
		var resp coltracepb.ExportTraceServiceResponse
		if r.code != 200 || r.ct != "application/x-protobuf" || proto.Unmarshal(r.body, &resp) != nil || resp.PartialSuccess != nil {
			t.Fatalf("valid export: %d %s %q", r.code, r.ct, r.body)
		}
		valid = append(valid, id)
	}
	rpcStatus := func(r httpResult) *statuspb.Status {
		t.Helper()
		var st statuspb.Status
		if err := proto.Unmarshal(r.body, &st); err != nil || st.Message == "" {
			t.Fatalf("error body is not a google.rpc.Status: %v %q", err, r.body)
		}
		return &st
	}

	sendValid()
	// Malformed protobuf: 400 with a Status.
	r := postOTLP(t, e, "application/x-protobuf", []byte{0x0a, 0xff, 0xff, 0x01})
	if r.code != 400 {
		t.Fatalf("malformed protobuf: %d %q", r.code, r.body)
	}
	if st := rpcStatus(r); st.Code != int32(codes.InvalidArgument) || !strings.Contains(st.Message, "malformed") {
		t.Fatalf("malformed protobuf status %v", st)
	}
	sendValid()

	// Ids of wrong length: a partial success; the valid spans of the same
	// request are stored.
	req, mixedID := newTrace(3)
	spans := req.ResourceSpans[0].ScopeSpans[0].Spans
	spans[1].SpanId = spans[1].SpanId[:7]
	short, _ := newTrace(1)
	ss := short.ResourceSpans[0].ScopeSpans[0].Spans[0]
	ss.TraceId = ss.TraceId[:15]
	req.ResourceSpans[0].ScopeSpans[0].Spans = append(spans, ss)
	r = postOTLP(t, e, "application/x-protobuf", marshal(t, req))
	var resp coltracepb.ExportTraceServiceResponse
	if r.code != 200 || proto.Unmarshal(r.body, &resp) != nil || resp.GetPartialSuccess().GetRejectedSpans() != 2 ||
		!strings.Contains(resp.GetPartialSuccess().GetErrorMessage(), "spanId has 7 bytes") {
		t.Fatalf("wrong-length ids: %d %v", r.code, &resp)
	}
	sendValid()

	// The same in JSON: hex ids, response in JSON.
	jreq, jid := newTrace(2)
	jreq.ResourceSpans[0].ScopeSpans[0].Spans[1].ParentSpanId = []byte{1, 2, 3}
	jb := otlpJSON(t, jreq)
	r = postOTLP(t, e, "application/json", jb)
	if r.code != 200 || r.ct != "application/json" || !strings.Contains(string(r.body), `"rejectedSpans":"1"`) {
		t.Fatalf("JSON with a bad parent id: %d %s %s", r.code, r.ct, r.body)
	}
	// Malformed JSON: 400, a Status in JSON.
	r = postOTLP(t, e, "application/json", []byte(`{"resourceSpans":[`))
	if r.code != 400 || r.ct != "application/json" || !strings.Contains(string(r.body), `"message"`) {
		t.Fatalf("malformed JSON: %d %s %s", r.code, r.ct, r.body)
	}

	// 100,000 attributes in one span: accepted; MaxAttributes kept, the rest
	// counted as dropped.
	big, bigID := newTrace(1)
	sp := big.ResourceSpans[0].ScopeSpans[0].Spans[0]
	for i := range 100_000 {
		sp.Attributes = append(sp.Attributes, &commonpb.KeyValue{Key: fmt.Sprintf("k%06d", i),
			Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: int64(i)}}})
	}
	r = postOTLP(t, e, "application/x-protobuf", marshal(t, big))
	if r.code != 200 {
		t.Fatalf("100,000 attributes: %d %q", r.code, r.body)
	}
	sendValid()

	// A 20 MB body: 413 (above MaxBodyBytes, 10 MiB), whether sent as is
	// or gzipped (bounded again after gunzip).
	huge := make([]byte, 20<<20)
	r = postOTLP(t, e, "application/x-protobuf", huge)
	if r.code != 413 {
		t.Fatalf("20 MB body: %d %q", r.code, r.body)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(huge)
	_ = zw.Close()
	r = postOTLP(t, e, "application/x-protobuf", gz.Bytes(), "Content-Encoding", "gzip")
	if r.code != 413 {
		t.Fatalf("20 MB gzipped body: %d %q", r.code, r.body)
	}
	// A valid gzipped request.
	greq, gid := newTrace(2)
	gz.Reset()
	zw = gzip.NewWriter(&gz)
	_, _ = zw.Write(marshal(t, greq))
	_ = zw.Close()
	if r = postOTLP(t, e, "application/x-protobuf", gz.Bytes(), "Content-Encoding", "gzip"); r.code != 200 {
		t.Fatalf("gzipped export: %d %q", r.code, r.body)
	}
	valid = append(valid, gid)
	// Unsupported media type: 415.
	if r = postOTLP(t, e, "text/plain", []byte("x")); r.code != 415 {
		t.Fatalf("text/plain: %d", r.code)
	}
	// An empty request: success.
	if r = postOTLP(t, e, "application/x-protobuf", nil); r.code != 200 {
		t.Fatalf("empty request: %d %q", r.code, r.body)
	}
	sendValid()

	e.waitDrained(t)
	for _, id := range valid {
		if n := stored(t, e, id); n != 2 {
			t.Errorf("valid trace %s: %d spans stored, want 2", id, n)
		}
	}
	if n := stored(t, e, mixedID); n != 2 {
		t.Errorf("trace with a bad span id: %d spans stored, want the 2 valid ones", n)
	}
	if n := stored(t, e, jid); n != 1 {
		t.Errorf("JSON trace with a bad parent id: %d spans stored, want 1", n)
	}
	var tags []map[string]any
	must(t, json.Unmarshal(e.get(t, "/api/v2/trace/"+bigID), &tags))
	if len(tags) != 1 {
		t.Fatalf("100,000-attribute span: %d stored", len(tags))
	}
	tm, _ := tags[0]["tags"].(map[string]any)
	if len(tm) != 256+2 || tm["otel.dropped_attributes_count"] != "99744" {
		t.Errorf("100,000-attribute span has %d tags, dropped count %v", len(tm), tm["otel.dropped_attributes_count"])
	}
	if v := e.counter(t, server.NameMessagesDropped, "otlp-http"); v != 5 {
		t.Errorf("messages_dropped{otlp-http} = %v, want 5 (2 malformed, 2 too large, 1 unsupported type)", v)
	}
}

// otlpJSON encodes a request in OTLP JSON: protojson with hex ids.
func otlpJSON(t *testing.T, req *coltracepb.ExportTraceServiceRequest) []byte {
	t.Helper()
	var spans []map[string]any
	for _, s := range req.ResourceSpans[0].ScopeSpans[0].Spans {
		m := map[string]any{"traceId": fmt.Sprintf("%X", s.TraceId), "spanId": fmt.Sprintf("%x", s.SpanId), "name": s.Name,
			"kind": int(s.Kind), "startTimeUnixNano": fmt.Sprint(s.StartTimeUnixNano), "endTimeUnixNano": s.EndTimeUnixNano}
		if len(s.ParentSpanId) > 0 {
			m["parentSpanId"] = fmt.Sprintf("%x", s.ParentSpanId)
		}
		spans = append(spans, m)
	}
	b, err := json.Marshal(map[string]any{"resourceSpans": []any{map[string]any{
		"resource":   map[string]any{"attributes": []any{map[string]any{"key": "service.name", "value": map[string]any{"stringValue": "bad-input"}}}},
		"scopeSpans": []any{map[string]any{"scope": map[string]any{"name": "t"}, "spans": spans}},
	}}})
	must(t, err)
	return b
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	must(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// TestOTLPGRPCBadInput: the gRPC status codes of bad and refused exports;
// the valid exports around them are stored.
func TestOTLPGRPCBadInput(t *testing.T) {
	e := newEnv(t, server.Config{MaxQueueSpans: 4})
	cc := dial(t, e.otlpGRPC)
	ctx := context.Background()
	export := func(b []byte) (*coltracepb.ExportTraceServiceResponse, error) {
		var out coltracepb.ExportTraceServiceResponse
		err := cc.Invoke(ctx, grpccollector.OTLPExportMethod, &rawOut{b}, &out)
		return &out, err
	}
	var valid []string
	sendValid := func() {
		t.Helper()
		req, id := newTrace(2)
		if resp, err := export(marshal(t, req)); err != nil || resp.PartialSuccess != nil {
			t.Fatalf("valid export: %v %v", err, resp)
		}
		valid = append(valid, id)
		e.waitDrained(t)
	}
	sendValid()
	if _, err := export([]byte{0x0a, 0xff, 0xff, 0x01}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("malformed protobuf: %v, want InvalidArgument", err)
	}
	sendValid()
	req, _ := newTrace(2)
	req.ResourceSpans[0].ScopeSpans[0].Spans[0].TraceId = make([]byte, 16) // all zeros
	if resp, err := export(marshal(t, req)); err != nil || resp.GetPartialSuccess().GetRejectedSpans() != 1 {
		t.Fatalf("zero trace id: %v %v", err, resp)
	}
	e.waitDrained(t)
	if _, err := export(make([]byte, 20<<20)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("20 MB message: %v, want ResourceExhausted", err)
	}
	sendValid()
	// More spans than the queue holds: ResourceExhausted without RetryInfo.
	req, _ = newTrace(5)
	_, err := export(marshal(t, req))
	if status.Code(err) != codes.ResourceExhausted || retryInfo(err) != nil {
		t.Fatalf("5 spans into a queue of 4: %v", err)
	}
	// Queue full: Unavailable with RetryInfo.
	e.store.pause()
	req, _ = newTrace(4)
	if _, err := export(marshal(t, req)); err != nil {
		t.Fatalf("filling the queue: %v", err)
	}
	req, _ = newTrace(1)
	_, err = export(marshal(t, req))
	if status.Code(err) != codes.Unavailable || retryInfo(err).GetRetryDelay().AsDuration() != time.Second {
		t.Fatalf("export into a full queue: %v, want Unavailable with RetryInfo 1s", err)
	}
	e.store.resume()
	e.waitDrained(t)
	sendValid()
	for _, id := range valid {
		if n := stored(t, e, id); n != 2 {
			t.Errorf("valid trace %s: %d spans stored, want 2", id, n)
		}
	}
}

func retryInfo(err error) *errdetails.RetryInfo {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri
		}
	}
	return nil
}

// rawOut sends bytes as they are (for malformed messages) through the
// default proto codec, which marshals it with its Marshal method.
type rawOut struct{ b []byte }

func (r *rawOut) Reset()         {}
func (r *rawOut) String() string { return "raw" }
func (r *rawOut) ProtoMessage()  {}
func (r *rawOut) Marshal() ([]byte, error) {
	return r.b, nil
}

// TestZipkinGRPCReport: zipkin.proto3.SpanService/Report on the HTTP port
// (h2c), with zipkin-go's generated ListOfSpans messages.
func TestZipkinGRPCReport(t *testing.T) {
	e := newEnv(t, server.Config{MaxQueueSpans: 3})
	cc := dial(t, strings.TrimPrefix(e.base, "http://"))
	ctx := context.Background()
	tid := make([]byte, 16)
	binary.BigEndian.PutUint64(tid[8:], idSeq.Add(1))
	tid[0] = 0x7f
	var list zipkin_proto3.ListOfSpans
	for i := range 3 {
		sid := make([]byte, 8)
		binary.BigEndian.PutUint64(sid, idSeq.Add(1))
		list.Spans = append(list.Spans, &zipkin_proto3.Span{TraceId: tid, Id: sid, Name: fmt.Sprint("op", i),
			Kind: zipkin_proto3.Span_SERVER, Timestamp: uint64(time.Now().UnixMicro()), Duration: 5,
			LocalEndpoint: &zipkin_proto3.Endpoint{ServiceName: "zgrpc"}, Tags: map[string]string{"k": "v"}})
	}
	if err := cc.Invoke(ctx, grpccollector.ZipkinReportMethod, &list, &emptypb.Empty{}); err != nil {
		t.Fatalf("Report: %v", err)
	}
	e.waitDrained(t)
	// An empty list: success.
	if err := cc.Invoke(ctx, grpccollector.ZipkinReportMethod, &zipkin_proto3.ListOfSpans{}, &emptypb.Empty{}); err != nil {
		t.Fatalf("empty Report: %v", err)
	}
	// Malformed: InvalidArgument.
	if err := cc.Invoke(ctx, grpccollector.ZipkinReportMethod, &rawOut{[]byte{0x0a, 0x05, 0x01}}, &emptypb.Empty{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("malformed Report: %v", err)
	}
	// A span without an id: InvalidArgument, as POST /api/v2/spans' 400.
	bad := &zipkin_proto3.ListOfSpans{Spans: []*zipkin_proto3.Span{{TraceId: tid, Name: "x"}}}
	if err := cc.Invoke(ctx, grpccollector.ZipkinReportMethod, bad, &emptypb.Empty{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("span without id: %v", err)
	}
	e.waitDrained(t)
	if n := stored(t, e, fmt.Sprintf("%x", tid)); n != 3 {
		t.Fatalf("stored %d spans, want 3", n)
	}
	// Queue full: Unavailable with RetryInfo.
	e.store.pause()
	list.Spans[0].Id[7]++
	list.Spans[1].Id[7]++
	list.Spans[2].Id[7]++
	if err := cc.Invoke(ctx, grpccollector.ZipkinReportMethod, &list, &emptypb.Empty{}); err != nil {
		t.Fatalf("filling the queue: %v", err)
	}
	err := cc.Invoke(ctx, grpccollector.ZipkinReportMethod, &list, &emptypb.Empty{})
	if status.Code(err) != codes.Unavailable || retryInfo(err) == nil {
		t.Fatalf("Report into a full queue: %v", err)
	}
	e.store.resume()
	e.waitDrained(t)
	// HTTP/1.1 on the same port still serves the API.
	if body := e.get(t, "/api/v2/services"); !strings.Contains(string(body), "zgrpc") {
		t.Fatalf("services: %s", body)
	}
	if v := e.counter(t, server.NameMessages, "grpc"); v != 6 {
		t.Errorf("messages{grpc} = %v, want 6", v)
	}
}
