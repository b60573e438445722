// Package leakcheck fails a test binary whose tests leave goroutines running.
//
// It does for the library's tests what go.uber.org/goleak does for the
// application's, without adding a module to the library's go.mod: after the
// tests, every goroutine but the caller's and the runtime's own must end
// within a grace period, and those still running are printed with their
// stacks.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Grace is how long Find waits for goroutines to end before it reports them.
const Grace = 5 * time.Second

// VerifyTestMain runs the tests and then exits with status 1, printing the
// stacks, when goroutines other than those whose stack contains one of the
// ignore substrings are still running Grace after the tests ended. Call it
// from TestMain: func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }.
func VerifyTestMain(m *testing.M, ignore ...string) {
	code := m.Run()
	if code == 0 {
		if err := Find(ignore...); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// VerifyNone fails t when goroutines other than the caller's, the runtime's
// and those that were running in before (a result of Snapshot) are still
// running Grace after the call.
func VerifyNone(t testing.TB, before map[string]bool) {
	t.Helper()
	deadline := time.Now().Add(Grace)
	for {
		var left []string
		for id, g := range goroutines() {
			if !before[id] {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("leakcheck: %d goroutines left running:\n\n%s", len(left), strings.Join(left, "\n\n"))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Snapshot returns the ids of the goroutines running now, for VerifyNone.
func Snapshot() map[string]bool {
	ids := map[string]bool{}
	for id := range goroutines() {
		ids[id] = true
	}
	return ids
}

// Find waits up to Grace for every goroutine but the caller's, the runtime's
// and those whose stack contains one of the ignore substrings to end, and
// returns an error listing those still running.
func Find(ignore ...string) error {
	return find(Grace, ignore...)
}

func find(grace time.Duration, ignore ...string) error {
	deadline := time.Now().Add(grace)
	for {
		var left []string
	next:
		for _, g := range goroutines() {
			for _, s := range ignore {
				if strings.Contains(g, s) {
					continue next
				}
			}
			left = append(left, g)
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d goroutines still running %v after the tests:\n\n%s", len(left), grace, strings.Join(left, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// goroutines returns the stacks of the running goroutines other than the
// caller's and those of the runtime and the testing package, by goroutine id.
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	gs := map[string]string{}
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 || benign(g) { // the first is the caller's
			continue
		}
		header, _, _ := strings.Cut(g, "\n")
		id := strings.Fields(header)
		if len(id) < 2 {
			continue
		}
		gs[id[1]] = g
	}
	return gs
}

// benign reports whether g is a goroutine that the runtime, os/signal or the
// testing package keeps running on their own.
func benign(g string) bool {
	_, rest, _ := strings.Cut(g, "\n")
	top, _, _ := strings.Cut(rest, "\n")
	for _, prefix := range []string{
		"testing.RunTests(", "testing.(*T).Run(", "testing.(*T).Parallel(", "testing.runFuzzing(",
		"os/signal.signal_recv(", "os/signal.loop(", "runtime.ensureSigM(", "runtime.ReadTrace(",
		"runtime.goexit(",
	} {
		if strings.HasPrefix(top, prefix) {
			return true
		}
	}
	return strings.Contains(g, "\ncreated by os/signal.") || strings.Contains(g, "\ncreated by runtime/trace.")
}
