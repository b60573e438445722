package pgtest

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

// TestPrivateServerRestarts starts a private server, restarts it on the same port and finds it
// accepting connections again (pg_isready; the drivers' side is tested in
// pgdialect/internal/pgdifftest, whose binary links them).
func TestPrivateServerRestarts(t *testing.T) {
	s := Start(t)
	s.Restart(t)
	if err := s.waitReady(); err != nil {
		t.Fatal(err)
	}
	if s.Addr() == "" || s.DSN() == "" {
		t.Fatalf("Addr %q, DSN %q", s.Addr(), s.DSN())
	}
}
