package txstate

import "testing"

// keywords lists the keys for the test that checks them against keyOf.
var keywords = map[string]uint64{
	"do":       kDo,
	"xa":       kXa,
	"set":      kSet,
	"use":      kUse,
	"show":     kShow,
	"desc":     kDesc,
	"with":     kWith,
	"help":     kHelp,
	"load":     kLoad,
	"lock":     kLock,
	"drop":     kDrop,
	"call":     kCall,
	"begin":    kBegin,
	"start":    kStart,
	"table":    kTable,
	"check":    kCheck,
	"alter":    kAlter,
	"grant":    kGrant,
	"select":   kSelect,
	"insert":   kInsert,
	"update":   kUpdate,
	"delete":   kDelete,
	"values":   kValues,
	"repair":   kRepair,
	"commit":   kCommit,
	"unlock":   kUnlock,
	"create":   kCreate,
	"rename":   kRename,
	"revoke":   kRevoke,
	"replace":  kReplace,
	"explain":  kExplain,
	"analyze":  kAnalyze,
	"release":  kRelease,
	"prepare":  kPrepare,
	"execute":  kExecute,
	"handler":  kHandler,
	"describe": kDescribe,
	"checksum": kChecksum,
	"optimize": kOptimize,
	"rollback": kRollback,
	"truncate": kTruncate,
}

func TestKeys(t *testing.T) {
	for w, k := range keywords {
		if got := keyOf(w); got != k {
			t.Errorf("keyOf(%q) = %#x, want %#x", w, got, k)
		}
		for _, text := range []string{w, w + " x", w + " and more text"} {
			l := lexer{s: text}
			if got, key := l.wordKey(); got != w || key != k {
				t.Errorf("wordKey on %q = %q, %#x; want %#x", text, got, key, k)
			}
		}
	}
	for _, text := range []string{"SeLeCt", "SELECT * FROM t"} {
		l := lexer{s: text}
		if _, key := l.wordKey(); key != kSelect {
			t.Errorf("wordKey(%q) = %#x", text, key)
		}
	}
	for _, text := range []string{"SEL_CT", "s\x80lect", "select_", "selec"} {
		l := lexer{s: text + " from t"}
		if _, key := l.wordKey(); key == kSelect {
			t.Errorf("wordKey(%q) = kSelect", text)
		}
	}
	l := lexer{s: "describes"}
	if _, key := l.wordKey(); key != 0 {
		t.Errorf("wordKey(describes) = %#x, want 0 for words over 8 bytes", key)
	}
}

// keyOf packs a word as the k* constants do.
func keyOf(w string) uint64 {
	var k uint64
	for i := 0; i < len(w); i++ {
		k = k<<8 | uint64(lower[w[i]])
	}
	return k
}
