package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/storage"
)

// ingestJSON ingests a JSON v2 list through tr as a collector of whole
// messages (gRPC) would.
func ingestJSON(tr *Transport, body string) Result {
	return tr.Ingest(context.Background(), Message{Body: []byte(body), Decode: func(b []byte) (Decoded, error) {
		spans, err := codec.DecodeJSONV2(b)
		return Decoded{Spans: spans}, err
	}})
}

// TestTransportSharesTheQueue: a Transport's Ingest goes into the same
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
	if r := ingestJSON(tr, listJSON(10, 7)); r.Outcome != TooLarge || !errors.Is(r.Err, ErrTooManySpans) {
		t.Fatalf("Ingest of more spans than the queue holds: %v %v", r.Outcome, r.Err)
	}
	if r := ingestJSON(tr, listJSON(20, 4)); r.Outcome != RetryLater || !errors.Is(r.Err, ErrQueueFull) || r.RetryAfter != time.Second {
		t.Fatalf("Ingest of more spans than there is room for: %v %v %v, want RetryLater ErrQueueFull 1s", r.Outcome, r.Err, r.RetryAfter)
	}
	if r := ingestJSON(tr, listJSON(3, 3)); r.Outcome != Accepted || r.Err != nil || r.Spans != 3 {
		t.Fatalf("Ingest with room: %v %v", r.Outcome, r.Err)
	}
	if r := ingestJSON(tr, listJSON(6, 1)); r.Outcome != RetryLater || !errors.Is(r.Err, ErrQueueFull) {
		t.Fatalf("Ingest into a full queue: %v %v, want RetryLater ErrQueueFull", r.Outcome, r.Err)
	}
	if r := post(t, hs.URL+"/api/v2/spans", listJSON(7, 1)); r.code != 503 {
		t.Fatalf("POST after the transport filled the queue: %d, want 503", r.code)
	}
	close(release)
	waitDrained(t, hs.URL)
	if n := len(store.Stored()); n != 6 {
		t.Fatalf("stored %d spans, want 6 (3 by POST, 3 by the transport)", n)
	}
	lbl := func(name string) string { return name + `{transport="otlp-http"}` }
	// Four messages: 7 spans too many (dropped), 4 with no room for them
	// (rejected, their spans dropped), 3 queued, and one refused before
	// decoding because the queue was full (rejected, its span not decoded).
	for name, want := range map[string]float64{
		NameMessages: 4, NameSpans: 14, NameMessagesRejected: 2, NameSpansDropped: 11, NameMessagesDropped: 1,
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
