package main

import (
	"encoding/json"
	"testing"
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
