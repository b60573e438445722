package txstate

import (
	"strings"
	"testing"
)

// separators are what the metamorphic oracle puts between tokens: each is
// whitespace or a plain comment to both servers, so none changes a class.
var separators = []string{
	" ", "\n", "\t", "  ", "\r\n", "\f", "/**/", "/* c */", " /* ; */ ", "/* COMMIT; */",
	"-- c\n", "--\t;\n", "# c; BEGIN\n", "#\n", "/*+ hint */", "/*\n*/",
}

// metaCase is a reference statement split at the places whitespace may go.
type metaCase struct {
	tokens []string
	want   Class
}

// metaCases derives the oracle's reference list from classCases: the cases
// that split cleanly at spaces (no comments, no quoted spaces).
func metaCases() []metaCase {
	var out []metaCase
	for _, c := range classCases {
		if strings.Contains(c.q, "/*") || strings.Contains(c.q, "--") || strings.ContainsAny(c.q, "#\\\n\t") {
			continue
		}
		var toks []string
		ok := true
		for _, tok := range strings.Split(c.q, " ") {
			if tok == "" {
				continue
			}
			for _, q := range []string{"'", "\"", "`"} {
				if strings.Count(tok, q)%2 != 0 {
					ok = false
				}
			}
			toks = append(toks, tok)
		}
		if ok {
			out = append(out, metaCase{toks, c.want})
		}
	}
	return out
}

// rng is a small deterministic generator seeded by fuzz bytes.
type rng uint64

func (r *rng) next() uint64 {
	x := uint64(*r)
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	*r = rng(x)
	return x
}

func seed(b []byte) rng {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	if h == 0 {
		h = 1
	}
	return rng(h)
}

// wrapStatement joins toks with random separators, adds some before and
// after, and flips the case of random letters.
func wrapStatement(toks []string, r *rng) string {
	var b strings.Builder
	sep := func(min int) {
		n := min + int(r.next()%3)
		for i := 0; i < n; i++ {
			b.WriteString(separators[r.next()%uint64(len(separators))])
		}
	}
	sep(0)
	for i, tok := range toks {
		if i > 0 {
			sep(1)
		}
		for j := 0; j < len(tok); j++ {
			c := tok[j]
			if (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') && r.next()%2 == 0 {
				c ^= 0x20
			}
			b.WriteByte(c)
		}
	}
	if r.next()%4 == 0 {
		sep(0)
		b.WriteString(";")
	}
	sep(0)
	if r.next()%8 == 0 {
		b.WriteString("-- no newline at the end")
	}
	return b.String()
}

var allQuotings = []Quoting{QuotingUnknown, QuotingBackslash, QuotingANSI, QuotingNoBackslash}

func FuzzClassify(f *testing.F) {
	cases := metaCases()
	for i, c := range classCases {
		f.Add(c.q, uint16(i), []byte{byte(i), 7})
	}
	f.Add("SELECT 'a\\'; SELECT 1", uint16(3), []byte("x"))
	f.Add("/*!50700 SET autocommit=0 */; /*M! COMMIT */", uint16(9), []byte{})
	f.Fuzz(func(t *testing.T, q string, idx uint16, wrap []byte) {
		// Any text: no panic, in every mode and through the tracker. The
		// unknown mode is at least as cautious as every exact mode.
		var unknown info
		analyze(&unknown, q, QuotingUnknown)
		for _, m := range allQuotings[1:] {
			var in info
			analyze(&in, q, m)
			if in.class.discards() && !unknown.class.discards() {
				t.Fatalf("%q: mode %v says %v, unknown mode %v", q, m, in.class, unknown.class)
			}
		}
		_ = Classify(q)
		if semi, k := quickScan(q); !semi && strings.IndexByte(q, ';') >= 0 || !k && strings.IndexAny(q, "kK") >= 0 {
			t.Fatalf("quickScan(%q) = %v, %v", q, semi, k)
		}
		tr := NewTracker(testBase)
		tr.Statement(q)
		p := tr.Plan()
		if p.Action == ActionReset && len(p.Statements) == 0 {
			t.Fatalf("%q: reset plan without statements", q)
		}
		tr.Failed()
		tr.Plan()
		var zero Tracker
		zero.Statement(q)
		zero.Plan()

		// The unknown mode is at least as cautious as every exact mode.
		if !hasSecondStatement(q, QuotingUnknown) {
			for _, m := range allQuotings[1:] {
				if hasSecondStatement(q, m) {
					t.Fatalf("%q: mode %v sees a second statement, unknown mode does not", q, m)
				}
			}
		}

		// Metamorphic: a reference statement wrapped in comments,
		// whitespace and case keeps its class, and its plan (up to the
		// case of the names in it).
		c := cases[int(idx)%len(cases)]
		r := seed(wrap)
		w := wrapStatement(c.tokens, &r)
		if got := Classify(w); got != c.want {
			t.Fatalf("Classify(%q) = %v, want %v (from %q)", w, got, c.want, strings.Join(c.tokens, " "))
		}
		// Under a baseline with the restorable variables too (varBase), so
		// that SET plans restore rather than discard; and the statement
		// cache's view (Resolution) is the same.
		for _, base := range []Baseline{testBase, varBase} {
			plain := NewTracker(base)
			plain.Statement(strings.Join(c.tokens, " "))
			wrapped := NewTracker(base)
			wrapped.Statement(w)
			if a, b := plain.Plan(), wrapped.Plan(); a.Action != b.Action || !strings.EqualFold(strings.Join(a.Statements, "|"), strings.Join(b.Statements, "|")) {
				t.Fatalf("plan of %q = %v %q, of %q = %v %q", strings.Join(c.tokens, " "), a.Action, a.Statements, w, b.Action, b.Statements)
			}
			pdb, pgen, pknown := plain.Resolution()
			wdb, wgen, wknown := wrapped.Resolution()
			if pknown != wknown || pgen != wgen || !strings.EqualFold(pdb, wdb) {
				t.Fatalf("Resolution after %q = %q %d %v, after %q = %q %d %v", strings.Join(c.tokens, " "), pdb, pgen, pknown, w, wdb, wgen, wknown)
			}
		}

		// Two statements are never taken for one.
		other := cases[int(r.next()%uint64(len(cases)))]
		if other.want != ClassEmpty && c.want != ClassEmpty {
			m := w + "\n;" + wrapStatement(other.tokens, &r)
			if got := Classify(m); !got.discards() {
				t.Fatalf("Classify(%q) = %v, want a discarding class", m, got)
			}
		}
	})
}

func TestMetaCases(t *testing.T) {
	cases := metaCases()
	if len(cases) < 150 {
		t.Fatalf("only %d reference statements for the oracle", len(cases))
	}
	seen := map[Class]bool{}
	for _, c := range cases {
		seen[c.want] = true
	}
	for c := Class(0); c < numClasses; c++ {
		if !seen[c] {
			t.Errorf("no reference statement of class %v", c)
		}
	}
}
