package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestQueryErrors(t *testing.T) {
	store := &fakeStore{}
	_, hs, _ := newTestServer(t, store, Config{})
	if r := post(t, hs.URL+"/api/v2/spans", `[{"traceId":"00000000000000000000000000abcdef","id":"1","timestamp":1}]`); r.code != 202 {
		t.Fatalf("%d %s", r.code, r.body)
	}
	waitDrained(t, hs.URL)
	for _, c := range []struct {
		path string
		code int
		body string
	}{
		{"/api/v2/trace/abcdef", 200, `"traceId":"0000000000abcdef"`},
		{"/api/v2/trace/abcdef%20", 200, `"traceId":"0000000000abcdef"`},
		{"/zipkin/api/v2/trace/abcdef", 200, `"traceId":"0000000000abcdef"`},
		{"/api/v2/trace/abc", 404, "0000000000000abc not found"},
		{"/api/v2/trace/ABC", 400, "ABC should be lower-hex encoded with no prefix"},
		{"/api/v2/trace/" + strings.Repeat("a", 33), 400, "traceId.length > 32"},
		{"/api/v2/trace/0000", 400, "traceId is all zeros"},
		{"/api/v2/traceMany", 400, "traceIds parameter is empty"},
		{"/api/v2/traceMany?traceIds=abc", 400, "Use /api/v2/trace/{traceId} endpoint to retrieve a single trace"},
		{"/api/v2/traceMany?traceIds=abc,0abc", 400, "redundant traceId: 0abc"},
		{"/api/v2/traceMany?traceIds=abc,xyz", 400, "xyz should be lower-hex encoded with no prefix"},
		{"/api/v2/traceMany?traceIds=abc,abcdef", 200, "[]"},
		{"/api/v2/spans", 400, "Mandatory parameter is missing: serviceName"},
		{"/api/v2/remoteServices", 400, "Mandatory parameter is missing: serviceName"},
		{"/api/v2/dependencies", 400, "Mandatory parameter is missing: endTs"},
		{"/api/v2/dependencies?endTs=0", 400, "endTs <= 0"},
		{"/api/v2/dependencies?endTs=1&lookback=-1", 400, "lookback <= 0"},
		{"/api/v2/traces?limit=0", 400, "limit <= 0"},
		{"/api/v2/traces?limit=x", 400, `For input string: "x"`},
		{"/api/v2/traces?maxDuration=5", 400, "maxDuration is only valid with minDuration"},
		{"/api/v2/traces?minDuration=10&maxDuration=5", 400, "maxDuration < minDuration"},
		// Zipkin checks a minDuration or maxDuration that is given, 0 included.
		{"/api/v2/traces?minDuration=0", 400, "minDuration <= 0"},
		{"/api/v2/traces?maxDuration=0", 400, "maxDuration is only valid with minDuration"},
		{"/api/v2/traces?minDuration=0&maxDuration=0", 400, "minDuration <= 0"},
		{"/api/v2/traces?minDuration=10&maxDuration=0", 400, "maxDuration < minDuration"},
		{"/api/v2/traces?minDuration=-3", 400, "minDuration <= 0"},
		{"/api/v2/traces?minDuration=10&maxDuration=10", 200, "[]"},
		// Zipkin's limit is a Java int: past its range the value does not parse.
		{"/api/v2/traces?limit=2147483648", 400, `For input string: "2147483648"`},
		{"/api/v2/traces?limit=-2147483649", 400, `For input string: "-2147483649"`},
		{"/api/v2/traces?limit=2147483647", 200, "[]"},
		{"/api/v2/traces", 200, "[]"},
		{"/api/v2/autocompleteValues", 400, "Mandatory parameter is missing: key"},
		// Zipkin's getValues(""): IllegalArgumentException "key was empty".
		{"/api/v2/autocompleteValues?key=", 400, "key was empty"},
	} {
		r := get(t, hs.URL+c.path)
		if r.code != c.code || !strings.Contains(r.body, c.body) {
			t.Errorf("GET %s: %d %q, want %d %q", c.path, r.code, r.body, c.code, c.body)
		}
		if c.code == 200 && r.header.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s: Content-Type %q", c.path, r.header.Get("Content-Type"))
		}
	}
}

func TestNamesCacheControl(t *testing.T) {
	store := &fakeStore{names: []string{"a", "b", "c"}}
	_, hs, _ := newTestServer(t, store, Config{})
	if r := get(t, hs.URL+"/api/v2/services"); r.header.Get("Cache-Control") != "" || r.body != `["a","b","c"]` {
		t.Fatalf("3 names: %q %q", r.header.Get("Cache-Control"), r.body)
	}
	store.names = []string{"a", "b", "c", "d"}
	if r := get(t, hs.URL+"/api/v2/services"); r.header.Get("Cache-Control") != cacheNames {
		t.Fatalf("4 names: Cache-Control %q", r.header.Get("Cache-Control"))
	}
	if r := get(t, hs.URL+"/api/v2/spans?serviceName=a"); r.header.Get("Cache-Control") != cacheNames || r.body != "[]" {
		t.Fatalf("span names after many services: %q %q", r.header.Get("Cache-Control"), r.body)
	}
	if r := get(t, hs.URL+"/api/v2/autocompleteKeys"); r.header.Get("Cache-Control") != cacheNames {
		t.Fatalf("autocompleteKeys: Cache-Control %q", r.header.Get("Cache-Control"))
	}
}

// TestQueryTimeout: a query still running after QueryTimeout is a 500
// naming RequestTimeoutException.
func TestQueryTimeout(t *testing.T) {
	store := &fakeStore{block: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}
	_, hs, _ := newTestServer(t, store, Config{QueryTimeout: 50 * time.Millisecond})
	r := get(t, hs.URL+"/api/v2/services")
	if r.code != 500 || !strings.HasPrefix(r.body, "RequestTimeoutException") {
		t.Fatalf("%d %q", r.code, r.body)
	}
}

func TestHealth(t *testing.T) {
	store := &fakeStore{}
	_, hs, _ := newTestServer(t, store, Config{StorageName: "MySQLStorage{db:3306/zipkin}", Redact: []string{"hunter2"}})
	r := get(t, hs.URL+"/health")
	if r.code != 200 || r.body != `{"status":"UP","zipkin":{"details":{"MySQLStorage{db:3306/zipkin}":{"status":"UP"}},"status":"UP"}}` {
		t.Fatalf("%d %s", r.code, r.body)
	}
	store.checkErr = errors.New("dial tcp db:3306: connect: connection refused (user zipkin, password hunter2)")
	for _, p := range []string{"/health", "/actuator/health"} {
		r = get(t, hs.URL+p)
		if r.code != 503 || !strings.Contains(r.body, `"status":"DOWN"`) || !strings.Contains(r.body, "connection refused") {
			t.Fatalf("%s: %d %s", p, r.code, r.body)
		}
		if strings.Contains(r.body, "hunter2") {
			t.Fatalf("password in /health: %s", r.body)
		}
	}
	if r := get(t, hs.URL+"/info"); r.code != 200 || !strings.Contains(r.body, `"zipkin":{"version"`) {
		t.Fatalf("/info: %d %s", r.code, r.body)
	}
}

// A component added with AddHealthCheck is listed beside the storage; its
// failure alone turns /health DOWN (503) with its redacted error, and the
// storage stays UP in the document.
func TestHealthChecks(t *testing.T) {
	s, hs, _ := newTestServer(t, &fakeStore{}, Config{StorageName: "MySQLStorage", Redact: []string{"hunter2"}})
	var mu sync.Mutex
	var kafkaErr error
	kafka := func(ctx context.Context) error { mu.Lock(); defer mu.Unlock(); return kafkaErr }
	if err := s.AddHealthCheck("KafkaCollector", kafka); err != nil {
		t.Fatal(err)
	}
	if err := s.AddHealthCheck("RabbitMQCollector", func(ctx context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"KafkaCollector", "MySQLStorage", ""} {
		if err := s.AddHealthCheck(name, kafka); err == nil {
			t.Fatalf("AddHealthCheck(%q) accepted a name already reported or empty", name)
		}
	}
	r := get(t, hs.URL+"/health")
	want := `{"status":"UP","zipkin":{"details":{"KafkaCollector":{"status":"UP"},"MySQLStorage":{"status":"UP"},"RabbitMQCollector":{"status":"UP"}},"status":"UP"}}`
	if r.code != 200 || r.body != want {
		t.Fatalf("all up: %d %s", r.code, r.body)
	}
	mu.Lock()
	kafkaErr = errors.New("kafka: no broker answered within 1s (sasl password hunter2)")
	mu.Unlock()
	r = get(t, hs.URL+"/health")
	want = `{"status":"DOWN","zipkin":{"details":{"KafkaCollector":{"error":"kafka: no broker answered within 1s (sasl password ****)","status":"DOWN"},"MySQLStorage":{"status":"UP"},"RabbitMQCollector":{"status":"UP"}},"status":"DOWN"}}`
	if r.code != 503 || r.body != want {
		t.Fatalf("kafka down: %d %s", r.code, r.body)
	}
}

func TestTraceMethodAndCORS(t *testing.T) {
	_, hs, _ := newTestServer(t, &fakeStore{}, Config{})
	for _, p := range []string{"/api/v2/services", "/health", "/"} {
		if r := do(t, http.MethodTrace, hs.URL+p, nil); r.code != 405 {
			t.Errorf("TRACE %s: %d", p, r.code)
		}
	}
	r := do(t, http.MethodOptions, hs.URL+"/api/v2/spans", nil,
		"Origin", "http://ui.example", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type")
	if r.code != 200 || r.header.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(r.header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Fatalf("preflight: %d %v", r.code, r.header)
	}
	if r := do(t, http.MethodOptions, hs.URL+"/api/v2/spans", nil, "Origin", "http://x", "Access-Control-Request-Method", "DELETE"); r.code != 403 {
		t.Fatalf("DELETE preflight: %d", r.code)
	}
	r = do(t, http.MethodGet, hs.URL+"/api/v2/services", nil, "Origin", "http://ui.example")
	if r.code != 200 || r.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("GET with Origin: %d %v", r.code, r.header)
	}
	if r := do(t, http.MethodDelete, hs.URL+"/api/v2/spans", nil); r.code != 405 {
		t.Fatalf("DELETE: %d", r.code)
	}
}
