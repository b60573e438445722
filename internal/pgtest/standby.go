package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// StartStandby starts a streaming-replication standby of the private server s for one test
// and closes it in tb.Cleanup: pg_basebackup (-R, -X stream) from s into a directory of its
// own, then postgres on another free port of 127.0.0.1, in hot standby (it answers reads).
// With PG_TEST_DSN set (s is external) it skips the test.
func (s *Server) StartStandby(tb testing.TB) *Server {
	tb.Helper()
	if !s.Private() {
		tb.Skip("pgtest: PG_TEST_DSN is set; a standby needs a private primary")
	}
	st, err := s.startStandby()
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := st.Close(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return st
}

func (s *Server) startStandby() (*Server, error) {
	st := &Server{bin: s.bin, cred: s.cred}
	dir, err := os.MkdirTemp("", "sqlpool-pgstandby-")
	if err != nil {
		return nil, err
	}
	st.dir = dir
	if c := s.cred; c != nil {
		if err := os.Chown(dir, int(c.Uid), int(c.Gid)); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	bb := exec.Command(filepath.Join(s.bin, "pg_basebackup"), "-h", "127.0.0.1", "-p", strconv.Itoa(s.port),
		"-U", "postgres", "-D", st.dataDir(), "-R", "-X", "stream", "--no-sync", "-c", "fast")
	bb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if out, err := bb.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_basebackup: %v\n%s", err, out)
	}
	for attempt := 0; attempt < 3; attempt++ {
		if st.port, err = freePort(); err != nil {
			break
		}
		st.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", st.port)
		if err = st.start(); err == nil {
			return st, nil
		}
		if !strings.Contains(st.log(), "already in use") {
			break
		}
	}
	err = fmt.Errorf("start standby: %v\n%s", err, st.logTail())
	_ = os.RemoveAll(dir)
	return nil, err
}

// Kill ends the server's process group with SIGKILL, as a crash does; StartAgain starts it
// again on the same port and data directory.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	select {
	case <-s.exited:
		return
	default:
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}

// Revive starts a killed or stopped private server again on its port and data directory and
// returns the error instead of failing a test (StartAgain), for goroutines other than the
// test's.
func (s *Server) Revive() error {
	if err := s.start(); err != nil {
		return fmt.Errorf("pgtest: start again: %v\n%s", err, s.logTail())
	}
	return nil
}
