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

// TestAcceptWaitCompletes: done is called once, after the store has
// accepted the spans (never before), also when the message is split across
// writers; a full queue makes AcceptWait wait (counting nothing as dropped)
// until a write frees room, or until its context ends.
func TestAcceptWaitCompletes(t *testing.T) {
	store, release := heldStore()
	s, hs, _ := newTestServer(t, store, Config{Writers: 3, MaxQueueSpans: 8, BatchSpans: 100})
	tr, err := s.Transport("kafka")
	if err != nil {
		t.Fatal(err)
	}
	spans, _ := codec.DecodeJSONV2([]byte(listJSON(0, 8))) // eight traces: split over the three writers
	done := make(chan error, 2)
	if err := tr.AcceptWait(context.Background(), spans, 800, func(err error) { done <- err }); err != nil {
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
	err = tr.AcceptWait(ctx, more, 100, func(error) { t.Error("done of a message that was not queued") })
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AcceptWait into a full queue: %v, want the context's error", err)
	}

	// Now it waits for room, which the first write frees.
	waited := make(chan error, 1)
	go func() {
		waited <- tr.AcceptWait(context.Background(), more, 100, func(err error) { done <- err })
	}()
	close(release)
	if err := <-waited; err != nil {
		t.Fatalf("AcceptWait after room came free: %v", err)
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

// TestAcceptWaitGivenUp: a batch the store refuses until the retry deadline
// completes with ErrGivenUp and is counted under the transport, not http.
func TestAcceptWaitGivenUp(t *testing.T) {
	store := &fakeStore{}
	store.setHook(func(context.Context, []model.Span) error { return errors.New("table is read only") })
	s, hs, logs := newTestServer(t, store, Config{Writers: 1, RetryDeadline: 50 * time.Millisecond})
	tr, err := s.Transport("rabbitmq")
	if err != nil {
		t.Fatal(err)
	}
	spans, _ := codec.DecodeJSONV2([]byte(listJSON(0, 2)))
	done := make(chan error, 1)
	if err := tr.AcceptWait(context.Background(), spans, 200, func(err error) { done <- err }); err != nil {
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

// TestAcceptWaitAbandoned: a message still unwritten when Close runs out
// of time completes with ErrAbandoned, and a waiter is woken by Close.
func TestAcceptWaitAbandoned(t *testing.T) {
	store := &fakeStore{}
	store.setHook(func(ctx context.Context, _ []model.Span) error { <-ctx.Done(); return ctx.Err() })
	s, err := New(Config{Storage: store, Writers: 1, MaxQueueSpans: 2, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := s.Transport("kafka")
	spans, _ := codec.DecodeJSONV2([]byte(listJSON(0, 2)))
	done := make(chan error, 1)
	if err := tr.AcceptWait(context.Background(), spans, 200, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	more, _ := codec.DecodeJSONV2([]byte(listJSON(2, 1)))
	go func() { waiting <- tr.AcceptWait(context.Background(), more, 100, func(error) {}) }()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.Close(ctx); err == nil {
		t.Fatal("Close: nil, want the drain-deadline error")
	}
	if err := <-done; !errors.Is(err, ErrAbandoned) {
		t.Fatalf("done(%v), want ErrAbandoned", err)
	}
	if err := <-waiting; !errors.Is(err, ErrClosing) {
		t.Fatalf("a waiting AcceptWait after Close: %v, want ErrClosing", err)
	}
}
