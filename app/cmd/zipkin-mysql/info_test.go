package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// /info lists the autocomplete keys as a JSON list, [] when none are
// configured (it printed null), and names the storage: memory, chosen by
// default when nothing configures one.
func TestInfoAutocompleteKeysIsAList(t *testing.T) {
	for _, tt := range []struct {
		keys, want string
	}{{"", `[]`}, {"env,http.method", `["env","http.method"]`}} {
		base, stop := runInProcess(t, envFunc("AUTOCOMPLETE_KEYS", tt.keys))
		code, body := httpGet(t, base+"/info")
		stop()
		var doc struct {
			Info map[string]json.RawMessage `json:"zipkin-mysql"`
		}
		if err := json.Unmarshal(body, &doc); code != 200 || err != nil {
			t.Fatalf("/info: %d %v %s", code, err, body)
		}
		if got := string(doc.Info["autocompleteKeys"]); got != tt.want {
			t.Errorf("AUTOCOMPLETE_KEYS=%q: /info autocompleteKeys = %s, want %s", tt.keys, got, tt.want)
		}
		if s, src := string(doc.Info["storage"]), string(doc.Info["storageSource"]); s != `"memory"` || src != `"default"` {
			t.Errorf("/info storage %s from %s, want \"memory\" from \"default\"", s, src)
		}
	}
}

// With MEM_MAX_SPANS, the default in-memory storage evicts the oldest
// traces whole past the bound and counts them in its metrics.
func TestMemoryEvictionIsCounted(t *testing.T) {
	base, stop := runInProcess(t, envFunc("MEM_MAX_SPANS", "10"))
	defer stop()
	now := time.Now().Add(-time.Minute).UnixMicro()
	for i := 1; i <= 3; i++ { // 3 traces of 5 spans, one POST each
		var b strings.Builder
		b.WriteByte('[')
		for j := 1; j <= 5; j++ {
			if j > 1 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"traceId":"%016x","id":"%016x","name":"op","timestamp":%d,"localEndpoint":{"serviceName":"evict"}}`, i, j, now)
		}
		b.WriteByte(']')
		resp, err := http.Post(base+"/api/v2/spans", "application/json", strings.NewReader(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST: HTTP %d", resp.StatusCode)
		}
		waitDrained(t, base, 30*time.Second) // one trace at a time: the first is the oldest
	}
	for name, want := range map[string]float64{
		"zipkin_storage_memory_spans":                10,
		"zipkin_storage_memory_evicted_spans_total":  5,
		"zipkin_storage_memory_evicted_traces_total": 1,
	} {
		if got := metric(t, base, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if code, _ := httpGet(t, base+"/api/v2/trace/0000000000000001"); code != http.StatusNotFound {
		t.Errorf("the oldest trace: HTTP %d, want 404 (evicted)", code)
	}
	if code, _ := httpGet(t, base+"/api/v2/trace/0000000000000003"); code != http.StatusOK {
		t.Errorf("the newest trace: HTTP %d, want 200", code)
	}
}
