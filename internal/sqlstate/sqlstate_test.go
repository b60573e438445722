package sqlstate

import "testing"

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		state    string
		readOnly bool
		known    bool
		want     Meaning
	}{
		{"40001", false, true, Meaning{Retry: true}},
		{"57P01", false, true, Meaning{Fatal: true, Gone: true, Retry: true}},
		{"53300", false, true, Meaning{Fatal: true, Retry: true, Refused: true}},
		{"08007", false, true, Meaning{Fatal: true, Unknown: true}},
		{"08006", false, true, Meaning{Fatal: true, Retry: true}},
		{"25006", false, true, Meaning{Fatal: true, Gone: true, Retry: true, Refused: true}},
		{"25006", true, false, Meaning{}},
		{"23505", false, false, Meaning{}},
		{"", false, false, Meaning{}},
		{"08", false, false, Meaning{}},
	} {
		m, ok := Lookup(tc.state, tc.readOnly)
		m.Reason = ""
		if ok != tc.known || m != tc.want {
			t.Errorf("Lookup(%q, %v) = %+v, %v; want %+v, %v", tc.state, tc.readOnly, m, ok, tc.want, tc.known)
		}
		if ok && tc.want.Fatal {
			if m, _ := Lookup(tc.state, tc.readOnly); m.Reason == "" {
				t.Errorf("Lookup(%q): a fatal code without a reason", tc.state)
			}
		}
	}
}

func TestLogin(t *testing.T) {
	for state, want := range map[string]bool{"28P01": true, "28000": true, "3D000": true, "53300": false, "57P03": false, "08006": false, "": false} {
		if got := Login(state); got != want {
			t.Errorf("Login(%q) = %v; want %v", state, got, want)
		}
	}
}
