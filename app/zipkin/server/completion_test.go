package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// acceptWait is what AcceptWait was: Ingest of a broker message (with
// Done) of decoded spans, bytes long; nil when Accepted, else Result.Err.
func acceptWait(ctx context.Context, tr *Transport, spans []model.Span, bytes int, done func(error)) error {
	res := tr.Ingest(ctx, Message{Body: make([]byte, bytes), Done: done, Decode: func([]byte) (Decoded, error) {
		return Decoded{Spans: spans}, nil
	}})
	if res.Outcome == Accepted {
		return nil
	}
	return res.Err
}

// TestIngestWaitCompletes: done is called once, after the store has
// accepted the spans (never before), also when the message is split across
// writers; a full queue makes Ingest with Done wait (counting nothing as dropped)
// until a write frees room, or until its context ends.
func TestIngestWaitCompletes(t *testing.T) {
	store, release := heldStore()
	s, hs, _ := newTestServer(t, store, Config{Writers: 3, MaxQueueSpans: 8, BatchSpans: 100})
	tr, err := s.Transport("kafka")
	if err != nil {
		t.Fatal(err)
	}
	spans, _ := codec.DecodeJSONV2([]byte(listJSON(0, 8))) // eight traces: split over the three writers
	done := make(chan error, 2)
	if err := acceptWait(context.Background(), tr, spans, 800, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("done(%v) before the store accepted anything", err)
	default:
	}
	if sp, _ := tr.Room(); sp != 0 {
		t.Fatalf("Room = %d spans, want 0", sp)
	}

	// The queue is full: a second message waits until its context ends.
	more, _ := codec.DecodeJSONV2([]byte(listJSON(8, 1)))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	err = acceptWait(ctx, tr, more, 100, func(error) { t.Error("done of a message that was not queued") })
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Ingest with Done into a full queue: %v, want the context's error", err)
	}

	// Now it waits for room, which the first write frees.
	waited := make(chan error, 1)
	go func() {
		waited <- acceptWait(context.Background(), tr, more, 100, func(err error) { done <- err })
	}()
	close(release)
	if err := <-waited; err != nil {
		t.Fatalf("Ingest with Done after room came free: %v", err)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("done(%v), want nil", err)
		}
	}
	if n := len(store.Stored()); n != 9 {
		t.Fatalf("stored %d spans, want 9", n)
	}
	waitDrained(t, hs.URL)
	if v := metric(t, hs.URL, NameSpansDropped+`{transport="kafka"}`); v != 0 {
		t.Errorf("kafka spans dropped = %v, want 0 (waiting is not dropping)", v)
	}
}

// TestIngestWaitGivenUp: a batch the store refuses until the retry deadline
// completes with ErrGivenUp and is counted under the transport, not http.
func TestIngestWaitGivenUp(t *testing.T) {
	store := &fakeStore{}
	store.setHook(func(context.Context, []model.Span) error { return errors.New("table is read only") })
	s, hs, logs := newTestServer(t, store, Config{Writers: 1, RetryDeadline: 50 * time.Millisecond})
	tr, err := s.Transport("rabbitmq")
	if err != nil {
		t.Fatal(err)
	}
	spans, _ := codec.DecodeJSONV2([]byte(listJSON(0, 2)))
	done := make(chan error, 1)
	if err := acceptWait(context.Background(), tr, spans, 200, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrGivenUp) {
		t.Fatalf("done(%v), want ErrGivenUp", err)
	}
	waitDrained(t, hs.URL)
	if v := metric(t, hs.URL, NameSpansDropped+`{transport="rabbitmq"}`); v != 2 {
		t.Errorf("rabbitmq spans dropped = %v, want 2", v)
	}
	if v := metric(t, hs.URL, collector(NameSpansDropped)); v != 0 {
		t.Errorf("http spans dropped = %v, want 0", v)
	}
	if !strings.Contains(logs.String(), "0000000000000001/0000000000000001") {
		t.Errorf("the error log does not name the span IDs:\n%s", logs)
	}
}

// TestIngestWaitAbandoned: a message still unwritten when Close runs out
// of time completes with ErrAbandoned, and a waiter is woken by Close.
func TestIngestWaitAbandoned(t *testing.T) {
	store := &fakeStore{}
	store.setHook(func(ctx context.Context, _ []model.Span) error { <-ctx.Done(); return ctx.Err() })
	s, err := New(Config{Storage: store, Writers: 1, MaxQueueSpans: 2, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := s.Transport("kafka")
	spans, _ := codec.DecodeJSONV2([]byte(listJSON(0, 2)))
	done := make(chan error, 1)
	if err := acceptWait(context.Background(), tr, spans, 200, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	more, _ := codec.DecodeJSONV2([]byte(listJSON(2, 1)))
	go func() { waiting <- acceptWait(context.Background(), tr, more, 100, func(error) {}) }()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.Close(ctx); err == nil {
		t.Fatal("Close: nil, want the drain-deadline error")
	}
	if err := <-done; !errors.Is(err, ErrAbandoned) {
		t.Fatalf("done(%v), want ErrAbandoned", err)
	}
	if err := <-waiting; !errors.Is(err, ErrClosing) {
		t.Fatalf("a waiting Ingest with Done after Close: %v, want ErrClosing", err)
	}
}
