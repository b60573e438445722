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

// TestStartServerSettings starts a server outside a test's cleanup with an extra setting, and
// refuses one PostgreSQL does not know.
func TestStartServerSettings(t *testing.T) {
	if os.Getenv("PG_TEST_DSN") != "" {
		t.Skip("PG_TEST_DSN is set; this test starts private servers")
	}
	if why := Missing(); why != "" {
		skipOrFail(t, "%s", why)
	}
	s, err := StartServer(Options{Settings: []string{"work_mem=8MB"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.PID() <= 0 {
		t.Errorf("PID() = %d for a running server", s.PID())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := StartServer(Options{Settings: []string{"no_such_setting=1"}}); err == nil {
		_ = s.Close()
		t.Fatal("StartServer accepted an unknown setting")
	}
}
