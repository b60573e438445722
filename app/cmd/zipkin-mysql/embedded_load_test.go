package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestEmbeddedKeepsWhatItAccepts is keepsWhatItAccepts on
// -storage=embedded: it runs only with EMBEDDED_LOAD_SPANS set (e.g. 800):
// on go-mysql-server's in-memory engine (v0.20) it fails today, as reads
// time out while batches are written (docs/server.md, "Which storage").
func TestEmbeddedKeepsWhatItAccepts(t *testing.T) {
	v := os.Getenv("EMBEDDED_LOAD_SPANS")
	if v == "" {
		t.Skip("set EMBEDDED_LOAD_SPANS (e.g. 800) to run: the embedded engine is too slow for it today")
	}
	total, err := strconv.Atoi(v)
	if err != nil || total < 80 {
		t.Fatalf("EMBEDDED_LOAD_SPANS=%q: want a number of spans ≥ 80", v)
	}
	keepsWhatItAccepts(t, total, "embedded", "-storage", "embedded")
}

// TestDefaultKeepsWhatItAccepts is README's bar for its default command
// (no storage flag or variable: the in-memory storage): 100,000 spans
// posted in batches of 10 spans × 8 tags by 8 clients, every span answered
// 202 readable afterwards. DEFAULT_LOAD_SPANS changes the count; -short
// runs 10,000.
func TestDefaultKeepsWhatItAccepts(t *testing.T) {
	total := 100_000
	if testing.Short() {
		total = 10_000
	}
	if v := os.Getenv("DEFAULT_LOAD_SPANS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 80 {
			t.Fatalf("DEFAULT_LOAD_SPANS=%q: want a number of spans ≥ 80", v)
		}
		total = n
	}
	keepsWhatItAccepts(t, total, "memory")
}

// TestMemoryKeepsWhatItAccepts is keepsWhatItAccepts on -storage=memory
// with MEMORY_LOAD_SPANS spans (10,000 by default; 100,000 by hand).
func TestMemoryKeepsWhatItAccepts(t *testing.T) {
	total := 10_000
	if v := os.Getenv("MEMORY_LOAD_SPANS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 80 {
			t.Fatalf("MEMORY_LOAD_SPANS=%q: want a number of spans ≥ 80", v)
		}
		total = n
	}
	keepsWhatItAccepts(t, total, "memory", "-storage", "memory")
}

// keepsWhatItAccepts: 8 clients post traces of 10 spans × 8 tags (total
// spans in all), retrying a 503 after its Retry-After as tracers do, plus
// one span with 4,000 tags, to the command run with args, whose /info must
// name wantStorage. Every span answered 202 must be readable afterwards
// with all its tags, and /health and a GET of the query API must answer
// 200 while the batches are written.
func keepsWhatItAccepts(t *testing.T, total int, wantStorage string, args ...string) {
	base, stop := runInProcess(t, envFunc(), args...)
	defer stop()
	if code, b := httpGet(t, base+"/info"); code != http.StatusOK || !strings.Contains(string(b), `"storage":"`+wantStorage+`"`) {
		t.Fatalf("/info: HTTP %d %s, want storage %q", code, b, wantStorage)
	}
	service := "load-" + randHex(4)
	now := time.Now().Add(-time.Minute).UnixMicro()
	const clients, perPost, tags = 8, 10, 8
	posts := total / perPost

	var tagJSON strings.Builder
	for k := 0; k < tags; k++ {
		fmt.Fprintf(&tagJSON, `%s"tag.%d":"value %d"`, map[bool]string{true: "", false: ","}[k == 0], k, k)
	}
	post := func(body []byte) (rejected int) {
		for {
			resp, err := http.Post(base+"/api/v2/spans", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusAccepted:
				return
			case http.StatusServiceUnavailable:
				rejected++
				time.Sleep(time.Second) // Retry-After: 1
			default:
				t.Errorf("POST: HTTP %d", resp.StatusCode)
				return
			}
		}
	}

	var stopReads atomic.Bool
	var reads, readErrors atomic.Int64
	var slowest atomic.Int64
	var readWG sync.WaitGroup
	readWG.Add(1)
	go func() {
		defer readWG.Done()
		for i := 0; !stopReads.Load(); i++ {
			path := "/health"
			if i%2 == 1 {
				path = "/api/v2/services"
			}
			t0 := time.Now()
			resp, err := http.Get(base + path)
			took := time.Since(t0)
			if err != nil || resp.StatusCode != http.StatusOK {
				readErrors.Add(1)
				if err == nil {
					t.Errorf("GET %s while writing: HTTP %d after %v", path, resp.StatusCode, took)
				}
			}
			if resp != nil {
				resp.Body.Close()
			}
			reads.Add(1)
			if int64(took) > slowest.Load() {
				slowest.Store(int64(took))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()

	t0 := time.Now()
	var rejected atomic.Int64
	var wg sync.WaitGroup
	next := atomic.Int64{}
	traceIDs := make([]string, posts)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= posts {
					return
				}
				tid := fmt.Sprintf("%016x", 0x1000_0000_0000_0000+uint64(i))
				traceIDs[i] = tid
				var b strings.Builder
				b.WriteByte('[')
				for j := 0; j < perPost; j++ {
					if j > 0 {
						b.WriteByte(',')
					}
					fmt.Fprintf(&b, `{"traceId":%q,"id":"%016x","name":"op %d","kind":"SERVER","timestamp":%d,"duration":100,"localEndpoint":{"serviceName":%q},"tags":{%s}}`,
						tid, j+1, j, now+int64(i), service, tagJSON.String())
				}
				b.WriteByte(']')
				rejected.Add(int64(post([]byte(b.String()))))
			}
		}()
	}
	wg.Wait()
	// One span with 4,000 tags.
	var big strings.Builder
	for k := 0; k < 4000; k++ {
		if k > 0 {
			big.WriteByte(',')
		}
		fmt.Fprintf(&big, `"k%04d":"v"`, k)
	}
	bigTrace := "2000000000000001"
	rejected.Add(int64(post([]byte(fmt.Sprintf(`[{"traceId":%q,"id":"1","name":"big","timestamp":%d,"localEndpoint":{"serviceName":%q},"tags":{%s}}]`,
		bigTrace, now, service, big.String())))))
	accepted := time.Since(t0)
	waitDrained(t, base, 30*time.Minute)
	stored := time.Since(t0)
	stopReads.Store(true)
	readWG.Wait()
	t.Logf("%v: %d spans in %d POSTs from %d clients: all 202 after %v (%d 503s retried), stored after %v; %d reads while writing, slowest %v",
		args, posts*perPost+1, posts+1, clients, accepted.Round(time.Millisecond), rejected.Load(), stored.Round(time.Millisecond),
		reads.Load(), time.Duration(slowest.Load()).Round(time.Millisecond))
	if readErrors.Load() > 0 {
		t.Errorf("%d of %d reads failed while the batches were written", readErrors.Load(), reads.Load())
	}
	if n := metric(t, base, `zipkin_collector_spans_dropped_total{transport="http"}`); n != 0 {
		t.Errorf("zipkin_collector_spans_dropped_total = %v, want 0", n)
	}

	// Read every trace back: all spans, all tags.
	missing := 0
	for i := 0; i < posts; i += 50 {
		ids := traceIDs[i:min(i+50, posts)]
		q := strings.Join(ids, ",")
		if len(ids) == 1 {
			q += "," + bigTrace
		}
		code, b := httpGet(t, base+"/api/v2/traceMany?traceIds="+q)
		if code != http.StatusOK {
			t.Fatalf("traceMany: HTTP %d %s", code, b)
		}
		var traces [][]struct {
			TraceID string            `json:"traceId"`
			Tags    map[string]string `json:"tags"`
		}
		if err := json.Unmarshal(b, &traces); err != nil {
			t.Fatal(err)
		}
		found := map[string]int{}
		for _, tr := range traces {
			for _, sp := range tr {
				if len(sp.Tags) == tags {
					found[sp.TraceID]++
				}
			}
		}
		for _, id := range ids {
			if found[id] != perPost {
				missing += perPost - found[id]
			}
		}
	}
	code, b := httpGet(t, base+"/api/v2/trace/"+bigTrace)
	var bigSpans []struct {
		Tags map[string]string `json:"tags"`
	}
	_ = json.Unmarshal(b, &bigSpans)
	if code != http.StatusOK || len(bigSpans) != 1 || len(bigSpans[0].Tags) != 4000 {
		t.Errorf("the span with 4,000 tags: HTTP %d, %d spans, want 1 with 4000 tags", code, len(bigSpans))
	}
	if missing > 0 {
		t.Errorf("%d of %d spans answered 202 are missing or incomplete", missing, posts*perPost)
	}
}
