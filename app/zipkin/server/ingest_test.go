package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/storage"
)

// TestTransportSharesTheQueue: a Transport's Accept goes into the same
// bounded queue as POST /api/v2/spans (it is refused when that queue is
// full, and its spans are stored by the same writers), and counts under its
// own transport label.
func TestTransportSharesTheQueue(t *testing.T) {
	store, release := heldStore()
	s, hs, _ := newTestServer(t, store, Config{Writers: 1, MaxQueueSpans: 6, BatchSpans: 5})
	tr, err := s.Transport("otlp-http")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transport("otlp-http"); err == nil {
		t.Fatal("a second Transport with one name was registered")
	}
	if _, err := s.Transport("http"); err == nil {
		t.Fatal(`Transport("http") was allowed`)
	}
	if r := post(t, hs.URL+"/api/v2/spans", listJSON(0, 3)); r.code != 202 {
		t.Fatalf("POST: %d %s", r.code, r.body)
	}
	spans, err := codec.DecodeJSONV2([]byte(listJSON(3, 3)))
	if err != nil {
		t.Fatal(err)
	}
	tr.Received()
	if err := tr.Accept(spans, 100); err != nil {
		t.Fatalf("Accept with room: %v", err)
	}
	more, _ := codec.DecodeJSONV2([]byte(listJSON(6, 1)))
	tr.Received()
	if err := tr.Accept(more, 10); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("Accept into a full queue: %v, want ErrQueueFull", err)
	}
	if err := tr.Unavailable(); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("Unavailable with a full queue: %v", err)
	}
	if r := post(t, hs.URL+"/api/v2/spans", listJSON(7, 1)); r.code != 503 {
		t.Fatalf("POST after the transport filled the queue: %d, want 503", r.code)
	}
	seven, _ := codec.DecodeJSONV2([]byte(listJSON(10, 7)))
	if err := tr.Accept(seven, 10); !errors.Is(err, ErrTooManySpans) {
		t.Fatalf("Accept of more spans than the queue holds: %v", err)
	}
	close(release)
	waitDrained(t, hs.URL)
	if n := len(store.Stored()); n != 6 {
		t.Fatalf("stored %d spans, want 6 (3 by POST, 3 by the transport)", n)
	}
	lbl := func(name string) string { return name + `{transport="otlp-http"}` }
	for name, want := range map[string]float64{
		NameMessages: 2, NameSpans: 11, NameMessagesRejected: 2, NameSpansDropped: 8, NameMessagesDropped: 1,
	} {
		if v := metric(t, hs.URL, lbl(name)); v != want {
			t.Errorf("%s = %v, want %v", lbl(name), v, want)
		}
	}
	if v := metric(t, hs.URL, collector(NameMessages)); v != 2 {
		t.Errorf("http messages = %v, want 2 (the transport's are not counted there)", v)
	}
}

// The index page lists the collectors registered with Transport, so that
// GET / shows every way in, not only the HTTP span endpoints.
func TestIndexListsTransports(t *testing.T) {
	s, hs, _ := newTestServer(t, storage.Noop{}, Config{})
	if r := do(t, "GET", hs.URL+"/", nil); r.code != 200 || strings.Contains(r.body, "Other collectors") {
		t.Fatalf("GET / without transports: %d %q", r.code, r.body)
	}
	for _, name := range []string{"otlp-http", "grpc"} {
		if _, err := s.Transport(name); err != nil {
			t.Fatal(err)
		}
	}
	r := do(t, "GET", hs.URL+"/", nil)
	if r.code != 200 || !strings.Contains(r.body, "POST /api/v2/spans") || !strings.Contains(r.body, "Other collectors (the transport label of zipkin_collector_*): otlp-http, grpc\n") {
		t.Fatalf("GET / with two transports: %d %q", r.code, r.body)
	}
}
