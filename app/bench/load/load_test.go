package main

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every generated body is a valid JSON v2 list of SpansPerTrace spans of
// one trace with distinct span IDs, tags and an annotation each, and two
// bodies never share a trace ID.
func TestAppendTrace(t *testing.T) {
	ids := newTraceIDs()
	seen := map[model.TraceID]bool{}
	services := map[string]bool{}
	for i := 0; i < 200; i++ {
		rng := rand.New(rand.NewPCG(uint64(i), 1))
		high, low := ids.next()
		body := appendTrace(nil, rng, &realIDs{high: high, low: low, baseMicro: 1_700_000_000_000_000})
		spans, err := codec.DecodeJSONV2(body)
		if err != nil {
			t.Fatalf("body %d: %v\n%s", i, err, body)
		}
		if len(spans) != SpansPerTrace {
			t.Fatalf("body %d: %d spans", i, len(spans))
		}
		tid := spans[0].TraceID
		if tid.High == 0 || seen[tid] {
			t.Fatalf("trace ID %s not 128-bit or repeated", tid)
		}
		seen[tid] = true
		spanIDs := map[model.ID]bool{}
		for _, s := range spans {
			if s.TraceID != tid || spanIDs[s.ID] || s.ID == 0 {
				t.Fatalf("body %d: span %+v", i, s)
			}
			spanIDs[s.ID] = true
			if len(s.Tags) < 3 || len(s.Annotations) != 1 || s.LocalEndpoint == nil || s.Timestamp == 0 || s.Duration == 0 {
				t.Fatalf("body %d: thin span %+v", i, s)
			}
			services[s.LocalEndpoint.ServiceName] = true
		}
		for _, s := range spans[1:] {
			if !spanIDs[s.ParentID] {
				t.Fatalf("body %d: parent %s of %s not in the trace", i, s.ParentID, s.ID)
			}
		}
	}
	if len(services) != NumServices {
		t.Errorf("%d services used, want %d", len(services), NumServices)
	}
}

// The wrk script carries templates whose markers are all replaced, and
// its done hook prints the line parseWrk reads.
func TestLuaScript(t *testing.T) {
	s := luaScript(4, 1)
	for _, want := range []string{"function request()", "function done(", "WRKJSON", "{1},", "{2,1},", "{3,"} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q", want)
		}
	}
	if strings.Contains(s, "\x00") {
		t.Error("script contains a raw marker byte")
	}
	if got := strings.Count(s, "\n  {"); got != 4 {
		t.Errorf("%d templates, want 4", got)
	}
}

func TestParseWrk(t *testing.T) {
	out := "Running 5s test @ http://x\n  1 threads and 8 connections\nWRKJSON {\"requests\":1000,\"duration_us\":5000000,\"bytes\":1,\"connect_errors\":0,\"read_errors\":1,\"write_errors\":0,\"status_errors\":40,\"timeouts\":2,\"p50_us\":800,\"p99_us\":9000,\"p999_us\":20000,\"max_us\":30000,\"mean_us\":1000.5}\n"
	r, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 1000 || r.StatusErrors != 40 || r.P99Us != 9000 || r.RPS() != 200 || r.Timeouts != 2 {
		t.Fatalf("%+v", r)
	}
	if _, err := parseWrk("Running\nno summary\n"); err == nil {
		t.Fatal("no error without the WRKJSON line")
	}
}

func TestParseProc(t *testing.T) {
	// A command name with spaces and parentheses.
	stat := "1234 (zipkin (my) srv) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 9 0 100 2000 300"
	d, err := parseStatCPU(stat)
	if err != nil || d != 3*time.Second {
		t.Fatalf("cpu %v, %v; want 3s", d, err)
	}
	if _, err := parseStatCPU("garbage"); err == nil {
		t.Fatal("no error on garbage")
	}
	rss, err := parseStatusRSS("Name:\tx\nVmPeak:\t 100 kB\nVmRSS:\t   2048 kB\n")
	if err != nil || rss != 2<<20 {
		t.Fatalf("rss %d, %v", rss, err)
	}
	if l, err := parseLoadAvg("3.25 2.00 1.00 2/300 999\n"); err != nil || l != 3.25 {
		t.Fatalf("load %v %v", l, err)
	}
	if v, err := parseMetric("# HELP a\nzipkin_collector_queue_spans_max 9\nzipkin_collector_queue_spans{x=\"y\"} 42\n", "zipkin_collector_queue_spans"); err != nil || v != 42 {
		t.Fatalf("metric %v %v", v, err)
	}
}

func TestPercentile(t *testing.T) {
	d := make([]time.Duration, 1000)
	for i := range d {
		d[i] = time.Duration(1000-i) * time.Millisecond
	}
	l := summarize(d)
	if l.N != 1000 || l.P50 != 500 || l.P99 != 990 || l.P999 != 999 || l.Max != 1000 {
		t.Fatalf("%+v", l)
	}
	if (summarize(nil) != Latency{}) {
		t.Fatal("empty")
	}
}

// The open loop keeps its schedule while the server stalls, and the
// requests that fell due during the stall carry it in their latency (no
// coordinated omission): a 300 ms stall at 200 requests/s shows up in
// more than 1 % of the requests.
func TestOpenLoopMeasuresFromDueTime(t *testing.T) {
	var n atomic.Int64
	var stall sync.Once
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && n.Add(1) == 100 {
			stall.Do(func() {
				go func() { time.Sleep(300 * time.Millisecond); close(release) }()
			})
		}
		if n.Load() >= 100 {
			<-release
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	o := openLoop{BaseURL: srv.URL, Rate: 200, Duration: 2 * time.Second, MaxInFlight: 1}
	r := o.run(context.Background())
	if r.Sent < 350 || r.Accepted != r.Sent {
		t.Fatalf("sent %d, accepted %d: the schedule was not kept", r.Sent, r.Accepted)
	}
	// With one request in flight at a time, a closed loop would record one
	// slow request; the open loop records every request due during the
	// stall as late.
	if r.Latency.P99 < 100 {
		t.Fatalf("p99 %.1f ms hides the 300 ms stall: %+v", r.Latency.P99, r.Latency)
	}
}

func TestRatios(t *testing.T) {
	row := func(c string, pct, stored, p99 float64) Row {
		return Row{Config: c, Kind: "open", RatePct: pct, StoredSpans: stored, Latency: Latency{P99: p99}}
	}
	rows := []Row{
		row("pool", 50, 1000, 10), row("pool", 50, 1100, 12), row("pool", 50, 900, 30),
		row("database-sql", 50, 1000, 20), row("database-sql", 50, 950, 10), row("database-sql", 50, 1200, 15),
		row("none", 50, 0, 5),
		{Config: "pool", Kind: "wrk", StoredSpans: 99999},
	}
	rs := ratios(rows)
	if len(rs) != 1 {
		t.Fatalf("%+v", rs)
	}
	r := rs[0]
	if r.RunsPool != 3 || r.RunsSQL != 3 || r.StoredPoolSQL != 1 || r.P99PoolSQL != 0.8 || r.P99PoolNone != 2.4 ||
		!r.StoredNotLess || !r.P99NotWorse {
		t.Fatalf("%+v", r)
	}
	if md := markdown(&Results{Rows: rows, Ratios: rs}); !strings.Contains(md, "### pool") || !strings.Contains(md, "| 50 % | 3/3 |") {
		t.Fatalf("markdown:\n%s", md)
	}

	// The verdicts: error bars that overlap are not "worse" (here the pool's median p99 is
	// above database/sql's worst run, but its best run is not); bars apart are. Stored
	// spans/s within the count's resolution below database/sql's lowest run is "not less".
	verdict := func(pool, sql [3][2]float64) Ratio {
		var rows []Row
		for i := range 3 {
			rows = append(rows, row("pool", 10, pool[i][0], pool[i][1]), row("database-sql", 10, sql[i][0], sql[i][1]))
		}
		return ratios(rows)[0]
	}
	overlap := verdict([3][2]float64{{372, 2.5}, {373, 2.4}, {373, 1.9}}, [3][2]float64{{373, 2.3}, {373, 1.9}, {374, 2.0}})
	if !overlap.P99NotWorse || !overlap.StoredNotLess {
		t.Errorf("overlapping error bars, stored within 1%%: %+v", overlap)
	}
	apart := verdict([3][2]float64{{300, 3.0}, {310, 3.1}, {305, 2.9}}, [3][2]float64{{373, 2.3}, {373, 1.9}, {374, 2.0}})
	if apart.P99NotWorse || apart.StoredNotLess {
		t.Errorf("pool worse beyond both error bars: %+v", apart)
	}
}
