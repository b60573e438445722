package testutil

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a testing.TB that records Fatalf instead of ending the test.
type recorder struct {
	testing.TB
	fatal string
}

type stop struct{}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	panic(stop{})
}

func catch(fn func()) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stop); !ok {
				panic(r)
			}
		}
	}()
	fn()
}

func TestEventuallyReturnsOnceTrue(t *testing.T) {
	n := 0
	Eventually(t, 10*time.Second, "the third call", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

func TestEventuallyFailsAfterBound(t *testing.T) {
	r := &recorder{TB: t}
	start := time.Now()
	catch(func() { Eventually(r, 50*time.Millisecond, "never", func() bool { return false }) })
	if elapsed := time.Since(start); elapsed < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before the 50ms bound", elapsed)
	}
	if !strings.Contains(r.fatal, "never") || !strings.Contains(r.fatal, "50ms") {
		t.Fatalf("failure %q does not name the condition and the bound", r.fatal)
	}
}

func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				fmt.Fprint(&b, "x")
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if n := len(b.String()); n != 800 {
		t.Fatalf("len = %d, want 800", n)
	}
	b.Reset()
	if b.String() != "" {
		t.Fatal("Reset left data")
	}
}

func TestContextBounded(t *testing.T) {
	ctx := Context(t, time.Hour)
	dl, ok := ctx.Deadline()
	if !ok || time.Until(dl) > time.Hour || time.Until(dl) < 59*time.Minute {
		t.Fatalf("deadline %v, %v; want about an hour from now", dl, ok)
	}
	short := Context(t, time.Millisecond)
	<-short.Done()
}
