package model

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestParseIDsMatchStrconv checks the hand-written hex parsing of trace and
// span IDs against strconv.ParseUint on random lower-hex strings of every
// length.
func TestParseIDsMatchStrconv(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const digits = "0123456789abcdef"
	for n := 1; n <= 32; n++ {
		for range 200 {
			b := make([]byte, n)
			for i := range b {
				b[i] = digits[rng.IntN(16)]
				if rng.IntN(4) == 0 {
					b[i] = '0'
				}
			}
			s := string(b)
			var want TraceID
			lo := s
			if n > 16 {
				want.High, _ = strconv.ParseUint(s[:n-16], 16, 64)
				lo = s[n-16:]
			}
			want.Low, _ = strconv.ParseUint(lo, 16, 64)
			got, err := ParseTraceID(s)
			if want.IsZero() != (err != nil) || got != map[bool]TraceID{true: {}, false: want}[want.IsZero()] {
				t.Fatalf("ParseTraceID(%q) = %v, %v; want %v", s, got, err, want)
			}
			if n <= 16 {
				id, err := ParseID("id", s)
				if uint64(id) != want.Low || (err != nil) != (want.Low == 0) {
					t.Fatalf("ParseID(%q) = %v, %v; want %x", s, id, err, want.Low)
				}
			}
		}
	}
}
