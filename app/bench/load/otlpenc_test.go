package main

import (
	"context"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/otlp"
)

// decodeOTLP decodes an OTLP body as the server does, failing on any
// rejected span.
func decodeOTLP(t *testing.T, body []byte) []model.Span {
	t.Helper()
	req, err := otlp.DecodeProto(body)
	if err != nil {
		t.Fatalf("%v", err)
	}
	res := otlp.ToSpans(req.GetResourceSpans())
	if res.Rejected != 0 {
		t.Fatalf("%d spans rejected: %s", res.Rejected, res.Message)
	}
	return res.Spans
}

// The OTLP payload carries the JSON v2 trace of the same seed and IDs, as
// the server maps it: the same spans (IDs, parents, names, kinds,
// timestamps, durations, annotations, local and remote services) and the
// same tags, plus exactly the tags OTLP adds (service.name on every span,
// peer.service on CLIENT spans, otel.status_code on the failed entry
// span); only the endpoint addresses are missing. The JSON of
// appendOTelJSONTrace has exactly the OTLP payload's tags.
func TestOTLPTraceMatchesJSON(t *testing.T) {
	var jsonBytes, otelBytes, otlpBytes, jsonTags, otlpTags, failed int
	for i := 0; i < 300; i++ {
		ids := &realIDs{high: 0xabc0000000000000 | uint64(i), low: uint64(i + 1), baseMicro: 1_700_000_000_000_000 + int64(i)}
		jb := appendTrace(nil, rand.New(rand.NewPCG(uint64(i), 1)), ids)
		ob := appendOTLPTrace(nil, rand.New(rand.NewPCG(uint64(i), 1)), ids)
		jsonBytes, otlpBytes = jsonBytes+len(jb), otlpBytes+len(ob)
		js, err := codec.DecodeJSONV2(jb)
		if err != nil {
			t.Fatal(err)
		}
		ot := decodeOTLP(t, ob)
		if len(ot) != SpansPerTrace || len(js) != SpansPerTrace {
			t.Fatalf("trace %d: %d OTLP spans, %d JSON spans", i, len(ot), len(js))
		}
		otelBody := appendOTelJSONTrace(nil, rand.New(rand.NewPCG(uint64(i), 1)), ids)
		otelBytes += len(otelBody)
		oj, err := codec.DecodeJSONV2(otelBody)
		if err != nil {
			t.Fatal(err)
		}
		byID, otelByID := map[model.ID]model.Span{}, map[model.ID]model.Span{}
		for k, s := range js {
			byID[s.ID] = s
			otelByID[oj[k].ID] = oj[k]
		}
		for _, o := range ot {
			j, ok := byID[o.ID]
			if !ok {
				t.Fatalf("trace %d: OTLP span %s not in the JSON trace", i, o.ID)
			}
			delete(byID, o.ID)
			if o.TraceID != j.TraceID || o.ParentID != j.ParentID || o.Name != j.Name || o.Kind != j.Kind ||
				o.Timestamp != j.Timestamp || o.Duration != j.Duration {
				t.Fatalf("trace %d span %s:\nOTLP %+v\nJSON %+v", i, o.ID, o, j)
			}
			if len(o.Annotations) != 1 || len(j.Annotations) != 1 || o.Annotations[0] != j.Annotations[0] {
				t.Fatalf("trace %d span %s: annotations %v, JSON %v", i, o.ID, o.Annotations, j.Annotations)
			}
			if o.LocalEndpoint.ServiceName != j.LocalEndpoint.ServiceName {
				t.Fatalf("trace %d span %s: local service %q, JSON %q", i, o.ID, o.LocalEndpoint.ServiceName, j.LocalEndpoint.ServiceName)
			}
			if (o.RemoteEndpoint == nil) != (j.RemoteEndpoint == nil) ||
				o.RemoteEndpoint != nil && o.RemoteEndpoint.ServiceName != j.RemoteEndpoint.ServiceName {
				t.Fatalf("trace %d span %s: remote %+v, JSON %+v", i, o.ID, o.RemoteEndpoint, j.RemoteEndpoint)
			}
			want := maps.Clone(j.Tags)
			want["service.name"] = j.LocalEndpoint.ServiceName
			if j.Kind == model.KindClient {
				want["peer.service"] = j.RemoteEndpoint.ServiceName
			}
			if _, ok := j.Tags["error"]; ok {
				want["otel.status_code"] = "ERROR"
				failed++
			}
			if !maps.Equal(o.Tags, want) {
				t.Fatalf("trace %d span %s: tags\n%v, want\n%v", i, o.ID, o.Tags, want)
			}
			oj := otelByID[o.ID]
			if !maps.Equal(oj.Tags, o.Tags) || oj.Name != j.Name || oj.Timestamp != j.Timestamp || !reflect.DeepEqual(oj.RemoteEndpoint, j.RemoteEndpoint) {
				t.Fatalf("trace %d span %s: OpenTelemetry exporter's JSON\n%+v, OTLP\n%+v", i, o.ID, oj, o)
			}
			jsonTags, otlpTags = jsonTags+len(j.Tags), otlpTags+len(o.Tags)
		}
	}
	if failed == 0 {
		t.Error("no failed trace among 300: the error status is not covered")
	}
	if s := luaOTelJSONScript(2, 1); !strings.Contains(s, "service.name") || strings.Contains(luaScript(2, 1), "service.name") {
		t.Error("the wrk script of the OpenTelemetry exporter's JSON lacks its tags, or the plain one has them")
	}
	t.Logf("per trace: JSON %d bytes, %.1f tags; OpenTelemetry exporter's JSON %d bytes; OTLP %d bytes, %.1f tags",
		jsonBytes/300, float64(jsonTags)/300, otelBytes/300, otlpBytes/300, float64(otlpTags)/300)
}

// luaQuote escapes every byte that is not printable ASCII, and quotes and
// backslashes, as three decimal digits.
func TestLuaQuote(t *testing.T) {
	in := []byte("a\"\\\x00\x7f\xff\n9")
	if got, want := luaQuote(in), `"a\034\092\000\127\255\0109"`; got != want {
		t.Fatalf("luaQuote = %s, want %s", got, want)
	}
}

// The OTLP wrk script sends valid OTLP bodies with unique trace IDs and
// current timestamps to /v1/traces: wrk runs it for a second against a
// server that decodes what it gets (skipped without wrk on PATH).
func TestLuaOTLPScriptWithWrk(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk not on PATH (Debian: apt-get install wrk)")
	}
	var mu sync.Mutex
	var bad []string
	seen := map[model.TraceID]bool{}
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		fail := func(msg string) {
			if len(bad) < 5 {
				bad = append(bad, msg)
			}
			w.WriteHeader(http.StatusBadRequest)
		}
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			fail(r.URL.Path + " " + r.Header.Get("Content-Type"))
			return
		}
		req, err := otlp.DecodeProto(body)
		if err != nil {
			fail(err.Error())
			return
		}
		res := otlp.ToSpans(req.GetResourceSpans())
		if res.Rejected != 0 || len(res.Spans) != SpansPerTrace {
			fail(res.Message)
			return
		}
		tid := res.Spans[0].TraceID
		now := time.Now().UnixMicro()
		for _, s := range res.Spans {
			if s.TraceID != tid || s.Timestamp < now-120e6 || s.Timestamp > now+120e6 || len(s.Tags) < 4 {
				fail("span " + s.ID.String() + " of " + s.TraceID.String())
				return
			}
		}
		if seen[tid] || tid.High == 0 {
			fail("trace ID " + tid.String() + " repeated or 64-bit")
			return
		}
		seen[tid] = true
		n++
	}))
	defer srv.Close()
	dir := t.TempDir()
	script := filepath.Join(dir, "otlp.lua")
	if err := os.WriteFile(script, []byte(luaOTLPScript(8, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "wrk", "-t1", "-c2", "-d1s", "-s", script, srv.URL).CombinedOutput()
	if err != nil {
		t.Fatalf("wrk: %v\n%s", err, out)
	}
	wr, err := parseWrk(string(out))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 || n == 0 || wr.StatusErrors != 0 {
		t.Fatalf("%d good bodies, %d status errors, bad: %s\n%s", n, wr.StatusErrors, strings.Join(bad, "; "), out)
	}
}

// -configs: the OTLP twins run right after their JSON configuration;
// unknown names (spool-otlp among them) are refused before anything
// starts.
func TestOrderConfigs(t *testing.T) {
	got, err := orderConfigs([]string{"none", "pool-otlp", " pool", "database-sql", "pool-otel-json"})
	if err != nil || strings.Join(got, ",") != "pool,pool-otel-json,pool-otlp,database-sql,none" {
		t.Fatalf("%v, %v", got, err)
	}
	for _, bad := range []string{"pool-json", "spool-otlp", "spool-otel-json", "poool"} {
		if _, err := orderConfigs([]string{"pool", bad}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if payloadOf("pool-otlp") != payloadOTLP || payloadOf("pool") != payloadJSON || baseConfig("none-otlp") != "none" ||
		payloadOf("pool-otel-json") != payloadOTelJSON || baseConfig("database-sql-otel-json") != "database-sql" ||
		strings.Join(configArgs("database-sql-otlp"), " ") != "-pool=database-sql" {
		t.Fatal("payloadOf, baseConfig or configArgs")
	}
}

// The closed loop with the OTLP payload posts protobuf to /v1/traces,
// counts the 200s as accepted and the 503s as rejected, and waits Backoff
// after each 503 (so 4 senders for 500 ms with a 100 ms backoff and
// every answer a 503 send at most 4 × 6 requests).
func TestClosedLoopOTLP(t *testing.T) {
	var mu sync.Mutex
	var posts, bad int
	reject := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		posts++
		if _, err := otlp.DecodeProto(body); err != nil || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			bad++
		}
		if reject {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	o := openLoop{BaseURL: srv.URL, Closed: 4, Duration: 300 * time.Millisecond, Payload: payloadOTLP}
	r := o.run(context.Background())
	mu.Lock()
	if bad != 0 || r.Accepted == 0 || r.Accepted != posts || r.Rejected != 0 || r.AcceptedAll != posts {
		t.Fatalf("bad %d, posts %d: %+v", bad, posts, r)
	}
	posts, reject = 0, true
	mu.Unlock()
	o = openLoop{BaseURL: srv.URL, Closed: 4, Duration: 500 * time.Millisecond, Payload: payloadOTLP, Backoff: 100 * time.Millisecond}
	r = o.run(context.Background())
	mu.Lock()
	defer mu.Unlock()
	if r.Rejected != posts || r.Accepted != 0 || posts > 4*6 || posts < 4 {
		t.Fatalf("posts %d: %+v", posts, r)
	}
}

// The OTLP comparison pairs each run's steps of pool-otlp and pool, and
// the verdict at saturation uses the closed loops and the open-loop pairs
// in which both servers refused POSTs.
func TestOTLPRatios(t *testing.T) {
	row := func(c, kind string, run int, pct, stored, p99 float64) Row {
		r := Row{Config: c, Kind: kind, Run: run, RatePct: pct, StoredSpans: stored, Latency: Latency{P99: p99}}
		if pct > 100 && (c == "pool" || run < 3) {
			r.Rejected = 10 // in run 3, pool-otlp did not refuse: that pair does not count
		}
		return r
	}
	var rows []Row
	for run := 1; run <= 3; run++ {
		f := float64(run)
		rows = append(rows,
			row("pool", "closed", run, 0, 1000, 10), row("pool-otlp", "closed", run, 0, 800+50*f, 20),
			row("pool", "open", run, 50, 500, 2), row("pool-otlp", "open", run, 50, 500, 2),
			row("pool", "open", run, 150, 1000, 100), row("pool-otlp", "open", run, 150, 700+100*f, 50))
	}
	rows = append(rows, row("pool", "wrk", 1, 0, 5000, 1), row("pool-otlp", "wrk", 1, 0, 1, 1))
	rs := otlpRatios(rows)
	if len(rs) != 3 || rs[0].Step != "closed" || rs[1].RatePct != 50 || rs[2].RatePct != 150 {
		t.Fatalf("%+v", rs)
	}
	if c := rs[0]; !slices.Equal(c.Saturated, []bool{true, true, true}) || len(c.Stored) != 3 || c.StoredMin != 0.85 || c.StoredMedian != 0.9 || c.StoredMax != 0.95 || c.P99Median != 2 {
		t.Fatalf("closed: %+v", c)
	}
	if slices.Contains(rs[1].Saturated, true) || rs[1].StoredMedian != 1 || !slices.Equal(rs[2].Saturated, []bool{true, true, false}) ||
		rs[2].StoredMin != 0.8 || rs[2].StoredMax != 1 {
		t.Fatalf("%+v", rs)
	}
	md := otlpTables(rows, rs)
	for _, want := range []string{"| closed, 16 senders | 2 | 1000 | 900 | 0.90 | yes | 0.00 |", "| 150 % | 3 | 1000 | 1000 | 1.00 | — |", "| 150 % | 3 | 0.90 [0.80–1.00] | 0.00 | 0.50 | 2 |",
		"5 paired steps: stored spans/s OTLP ÷ JSON v2 median 0.90, min 0.80, max 0.95; bar ≥ 0.8× (median): yes."} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// With a second JSON twin, the OTLP steps are compared with each.
	rows = append(rows, row("pool-otel-json", "closed", 1, 0, 900, 10))
	if rs := otlpRatios(rows); len(rs) != 4 || rs[3].Config != "pool-otel-json" || rs[3].Stored[0] != 850.0/900 {
		t.Fatalf("%+v", rs)
	}
	// Per MariaDB CPU: OTLP stores 900 spans/s at 45 %, JSON 1000 at 40 %: 20 vs 25 per CPU %.
	cpu := otlpRatios([]Row{{Config: "pool", Kind: "closed", Run: 1, StoredSpans: 1000, DB: ProcStats{CPUPercent: 40}},
		{Config: "pool-otlp", Kind: "closed", Run: 1, StoredSpans: 900, DB: ProcStats{CPUPercent: 45}}})
	if len(cpu) != 1 || cpu[0].PerDBCPUMedian != 0.8 {
		t.Fatalf("%+v", cpu)
	}
	if otlpTables(rows[:0], nil) != "" {
		t.Error("a run without OTLP has an OTLP table")
	}
}

// The server's decoding of one workload trace in each payload: JSON v2
// (codec.DecodeJSONV2) and OTLP protobuf (otlp.DecodeProto and ToSpans),
// which is what the server's CPU does per POST before the queue.
func BenchmarkDecodeWorkloadTrace(b *testing.B) {
	ids := &realIDs{high: 0xabc, low: 1, baseMicro: 1_700_000_000_000_000}
	jb := appendTrace(nil, rand.New(rand.NewPCG(1, 1)), ids)
	ob := appendOTLPTrace(nil, rand.New(rand.NewPCG(1, 1)), ids)
	b.Run("json-v2", func(b *testing.B) {
		b.SetBytes(int64(len(jb)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := codec.DecodeJSONV2(jb); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("otlp-proto", func(b *testing.B) {
		b.SetBytes(int64(len(ob)))
		b.ReportAllocs()
		for b.Loop() {
			req, err := otlp.DecodeProto(ob)
			if err != nil {
				b.Fatal(err)
			}
			if r := otlp.ToSpans(req.GetResourceSpans()); len(r.Spans) != SpansPerTrace {
				b.Fatal(r.Message)
			}
		}
	})
}
