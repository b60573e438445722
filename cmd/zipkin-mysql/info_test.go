package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// /info lists the autocomplete keys as a JSON list, [] when none are
// configured (it printed null).
func TestInfoAutocompleteKeysIsAList(t *testing.T) {
	for _, tt := range []struct {
		keys, want string
	}{{"", `[]`}, {"env,http.method", `["env","http.method"]`}} {
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan string, 1)
		done := make(chan error, 1)
		logs := &syncBuffer{}
		go func() {
			done <- run(ctx, []string{"-listen", "127.0.0.1:0"}, envFunc("AUTOCOMPLETE_KEYS", tt.keys), &syncBuffer{}, logs, ready)
		}()
		var base string
		select {
		case addr := <-ready:
			base = "http://" + addr
		case err := <-done:
			cancel()
			t.Fatalf("run: %v\n%s", err, logs)
		case <-time.After(60 * time.Second):
			cancel()
			t.Fatal("not listening after 60 s")
		}
		code, body := httpGet(t, base+"/info")
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run returned %v\n%s", err, logs)
		}
		var doc struct {
			Info map[string]json.RawMessage `json:"zipkin-mysql"`
		}
		if err := json.Unmarshal(body, &doc); code != 200 || err != nil {
			t.Fatalf("/info: %d %v %s", code, err, body)
		}
		if got := string(doc.Info["autocompleteKeys"]); got != tt.want {
			t.Errorf("AUTOCOMPLETE_KEYS=%q: /info autocompleteKeys = %s, want %s", tt.keys, got, tt.want)
		}
	}
}
