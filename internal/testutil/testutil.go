// Package testutil holds the small helpers that the repository's tests share:
// waiting for a condition, a buffer that concurrent writers (loggers) may
// share, and a context bounded by the test. It imports only the standard
// library, so every package of both modules may use it in its tests.
package testutil

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"
)

// PollInterval is how often Eventually evaluates its condition.
const PollInterval = 2 * time.Millisecond

// Eventually evaluates cond every PollInterval until it returns true, and
// fails the test with tb.Fatalf naming what when d passes first. It is for
// state that background work reaches without an event to wait on; d is a
// generous bound, not a measurement. cond runs on the calling goroutine.
func Eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for: %s", d, what)
		}
		time.Sleep(PollInterval)
	}
}

// Buffer is a bytes.Buffer that is safe for concurrent use, for collecting
// the output of loggers and child processes. The zero value is an empty
// buffer ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what has been written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Reset empties the buffer.
func (b *Buffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.Reset()
}

// Context returns a context that is cancelled d from now, or when the test
// ends (tb.Context), whichever is first.
func Context(tb testing.TB, d time.Duration) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), d)
	tb.Cleanup(cancel)
	return ctx
}
