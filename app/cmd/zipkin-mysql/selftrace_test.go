package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/internal/uitest"
)

func TestParseSelfTracing(t *testing.T) {
	for _, tc := range []struct {
		env     []string
		enabled bool
		err     string
	}{
		{nil, false, ""},
		{[]string{"SELF_TRACING_ENABLED", "true"}, true, ""},
		{[]string{"SELF_TRACING_ENABLED", "maybe"}, false, "SELF_TRACING_ENABLED"},
		{[]string{"SELF_TRACING_ENABLED", "true", "SELF_TRACING_SAMPLE_RATE", "2"}, false, "SELF_TRACING_SAMPLE_RATE"},
		{[]string{"SELF_TRACING_ENABLED", "true", "SELF_TRACING_FLUSH_INTERVAL", "-1"}, false, "SELF_TRACING_FLUSH_INTERVAL"},
	} {
		c, err := parseSelfTracing(envFunc(tc.env...))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want one naming %s", tc.env, err, tc.err)
			}
			continue
		}
		if err != nil || c.Enabled != tc.enabled {
			t.Errorf("%v: %+v, %v", tc.env, c, err)
		}
	}
}

// With SELF_TRACING_ENABLED=true the server stores spans of its own storage calls, and under
// them the pool acquires that waited (the embedded server has one connection, so concurrent
// reads wait), readable through the API as any other trace. Writing those spans makes no
// spans of its own: the count of accept-spans spans stays bounded by the writes the test makes.
func TestSelfTracingShowsPoolWaits(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts the embedded server")
	}
	base, stop := runInProcess(t, envFunc("SELF_TRACING_ENABLED", "true", "SELF_TRACING_FLUSH_INTERVAL", "0.2"), "-storage=embedded")
	defer stop()
	var wg sync.WaitGroup
	for round := 0; round < 3; round++ {
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if resp, err := http.Get(base + "/api/v2/services"); err == nil {
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
	}
	type span struct {
		TraceID, ID, ParentID, Name string
		Duration                    int64
		Tags                        map[string]string
		LocalEndpoint               struct{ ServiceName string }
	}
	var traces [][]span
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body := httpGet(t, base+"/api/v2/traces?serviceName="+selfServiceName+"&spanName=sqlpool.acquire&lookback=600000&limit=50")
		if code != 200 {
			t.Fatalf("GET traces: %d %s", code, body)
		}
		if err := json.Unmarshal(body, &traces); err != nil {
			t.Fatal(err)
		}
		if len(traces) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(traces) == 0 {
		t.Fatal("no self-traced trace with a sqlpool.acquire span after 60 s")
	}
	var found, foundTrace string
	for _, tr := range traces {
		byID := map[string]span{}
		for _, s := range tr {
			byID[s.ID] = s
		}
		for _, s := range tr {
			if s.Name != "sqlpool.acquire" {
				continue
			}
			parent, ok := byID[s.ParentID]
			if s.Tags["sqlpool.acquire.wait_ms"] == "" || s.Tags["db.client.connection.pool.name"] != "zipkin" {
				t.Errorf("acquire span tags %v", s.Tags)
			}
			if ok && strings.HasPrefix(parent.Name, "get-") && s.LocalEndpoint.ServiceName == selfServiceName {
				found = fmt.Sprintf("%s (%d µs) under %s (%d µs), wait %s ms", s.Name, s.Duration, parent.Name, parent.Duration, s.Tags["sqlpool.acquire.wait_ms"])
				foundTrace = s.TraceID
			}
		}
	}
	if found == "" {
		t.Fatalf("no sqlpool.acquire span under a storage call's span in %d traces", len(traces))
	}
	t.Log(found)
	// The viewer shows it: the trace page draws the acquire under the storage call (with
	// -update, docs/img/self-tracing.png is written from this run).
	t.Run("viewer", func(t *testing.T) {
		file := ""
		if *updateScreenshots {
			file = "../../../docs/img/self-tracing.png"
		}
		rows := uitest.ShowTrace(t, base, foundTrace, file)
		if !slices.ContainsFunc(rows, func(r string) bool { return strings.Contains(r, "sqlpool.acquire") }) {
			t.Fatalf("the trace page has no sqlpool.acquire row: %q", rows)
		}
	})
	// No recursion: the exporter's own writes are untraced, so no accept-spans trace exists
	// unless a client wrote spans (none did here).
	code, body := httpGet(t, base+"/api/v2/traces?serviceName="+selfServiceName+"&spanName=accept-spans&lookback=600000&limit=50")
	if code != 200 || strings.TrimSpace(string(body)) != "[]" {
		t.Fatalf("accept-spans traces of the server's own writes: %d %s", code, body)
	}
}

// A span started under the exporter's ctx (untraced) records nothing: the pool's acquire spans
// during the write of the server's own spans are not made, so that write makes no spans.
func TestUntracedCtxMakesNoSpans(t *testing.T) {
	st, err := newSelfTracing(selfTracingConfig{SampleRate: 1, Flush: time.Second}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.shutdown(context.Background())
	tr := st.tracerProvider().Tracer("test")
	if _, s := tr.Start(context.Background(), "traced"); !s.IsRecording() {
		t.Fatal("a span under a plain ctx does not record")
	}
	if _, s := tr.Start(untraced(context.Background()), "untraced"); s.IsRecording() {
		t.Fatal("a span under the exporter's ctx records: self-tracing would trace its own writes")
	}
}
