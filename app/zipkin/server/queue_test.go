package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

func testIngest(maxSpans int) resolvedIngest {
	return resolvedIngest{
		writers: 1, batchSpans: 500, maxSpans: maxSpans, maxBytes: 1 << 40, maxBody: 1 << 20,
		retryDeadline: time.Minute, attemptTimeout: time.Minute,
		backoffBase: time.Millisecond, backoffMax: time.Millisecond, redact: redactor(nil),
	}
}

// A huge span bound does not allocate the queue up front: the channel used
// to take 32 bytes per allowed span (3.2 GB for 1e8).
func TestHugeQueueBoundAllocatesLittle(t *testing.T) {
	const maxSpans = 1 << 22 // 128 MiB of channel before the fix
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	q := newIngestQueue(testIngest(maxSpans), &fakeStore{}, slog.New(slog.NewTextHandler(io.Discard, nil)), newCollectorMetrics(), nil)
	runtime.ReadMemStats(&after)
	defer func() {
		if err := q.close(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	if got := after.TotalAlloc - before.TotalAlloc; got > 8<<20 {
		t.Fatalf("newIngestQueue(maxSpans=%d) allocated %d MiB", maxSpans, got>>20)
	}
	for i, ch := range q.ch {
		if cap(ch) > maxQueueMessages {
			t.Fatalf("channel %d capacity %d, want at most %d", i, cap(ch), maxQueueMessages)
		}
	}
}

// With the channel smaller than the span bound, the queue counts messages
// too: once maxQueueMessages are held (the writer stuck in Accept), offer
// refuses at once instead of blocking on the channel, and everything
// accepted is stored when the store recovers.
func TestQueueMessageBoundRefusesWithoutBlocking(t *testing.T) {
	unblock := make(chan struct{})
	store := &fakeStore{}
	store.setHook(func(ctx context.Context, _ []model.Span) error {
		select {
		case <-unblock:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	q := newIngestQueue(testIngest(4*maxQueueMessages), store, slog.New(slog.NewTextHandler(io.Discard, nil)), newCollectorMetrics(), nil)
	one := []model.Span{{TraceID: model.TraceID{Low: 1}, ID: 1}}
	for i := range maxQueueMessages {
		if err := q.offer(message{spans: one, bytes: 10}); err != nil {
			close(unblock)
			_ = q.close(context.Background())
			t.Fatalf("offer %d of %d: %v", i+1, maxQueueMessages, err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- q.offer(message{spans: one, bytes: 10}) }()
	select {
	case err := <-done:
		if !errors.Is(err, errQueueFull) {
			t.Errorf("offer beyond the message bound: %v, want errQueueFull", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("offer beyond the message bound blocked")
	}
	if !q.full() {
		t.Error("full() = false with the message bound reached")
	}
	close(unblock)
	if err := q.close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(store.Stored()); got != maxQueueMessages {
		t.Fatalf("stored %d spans, want %d", got, maxQueueMessages)
	}
}
