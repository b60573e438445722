package pgstore

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// BenchmarkBuildRows is the client-side cost of a batch of 1,000 spans
// before COPY: rows, terms, JSON and fragment hashes, and the COPY stream.
func BenchmarkBuildRows(b *testing.B) {
	spans := makeSpans(rand.New(rand.NewPCG(1, 2)), 1000)
	b.ReportAllocs()
	for b.Loop() {
		var rb rowBuilder
		rows := make([]spanRow, 0, len(spans))
		for i := range spans {
			r, _ := rb.build(&spans[i])
			rows = append(rows, r)
		}
		_ = appendCopyRows(make([]byte, 0, 512*len(rows)), rows)
	}
}

// TestAppendJSONString checks the hand-written JSON against encoding/json.
func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote`, `back\slash`, "ctl\x01\n\t", "é✓😀", "bad\xffutf8", "<&>"} {
		got := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q: %s does not parse: %v", s, got, err)
		}
		want := strings.ToValidUTF8(s, "\uFFFD")
		if back != want {
			t.Errorf("%q: round trip %q, want %q", s, back, want)
		}
	}
}
