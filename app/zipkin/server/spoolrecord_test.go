package server

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// The spool record keeps the layout of earlier releases (a byte naming the
// endpoint, a byte set for proto3, the body), so that a spool written
// before an upgrade replays after it.
func TestSpoolRecordLayout(t *testing.T) {
	body := []byte("BODY")
	for _, tc := range []struct {
		format codec.Format
		header []byte
	}{
		{codec.JSONV2, []byte{0, 0}},
		{codec.Proto3, []byte{0, 1}},
		{codec.JSONV1, []byte{1, 0}},
	} {
		got := spoolRecord{format: tc.format, body: body}.marshal()
		if want := append(append([]byte(nil), tc.header...), body...); !bytes.Equal(got, want) {
			t.Errorf("%v: marshal = %v, want %v", tc.format, got, want)
		}
		r, err := parseSpoolRecord(got)
		if err != nil || r.format != tc.format || !bytes.Equal(r.body, body) {
			t.Errorf("%v: parse = %+v, %v", tc.format, r, err)
		}
	}
	if _, err := parseSpoolRecord([]byte{0}); err == nil {
		t.Error("a one-byte record parsed")
	}
}

// Messages of other transports are spooled too: a proto3 list (Zipkin
// gRPC) as it came, decoded spans of another format (OTLP) as proto3; the
// next server replays and stores both.
func TestTransportSpoolReplays(t *testing.T) {
	dir := t.TempDir()
	stuck := &fakeStore{}
	stuck.setHook(func(ctx context.Context, _ []model.Span) error { <-ctx.Done(); return ctx.Err() })
	s1, err := New(Config{Storage: stuck, SpoolDir: dir, Logger: discardLogger(), Writers: 1})
	if err != nil {
		t.Fatal(err)
	}
	grpcTr, _ := s1.Transport("grpc")
	otlpTr, _ := s1.Transport("otlp-grpc")
	spans, err := codec.DecodeJSONV2([]byte(listJSON(1, 3)))
	if err != nil {
		t.Fatal(err)
	}
	list := codec.AppendProto3Spans(nil, spans)
	res := grpcTr.Ingest(context.Background(), Message{Body: list, Decode: func(b []byte) (Decoded, error) {
		sp, err := codec.DecodeProto3(b)
		return Decoded{Spans: sp, Format: codec.Proto3}, err
	}})
	if res.Outcome != Accepted {
		t.Fatalf("grpc: %v %v", res.Outcome, res.Err)
	}
	more, _ := codec.DecodeJSONV2([]byte(listJSON(10, 2)))
	res = otlpTr.Ingest(context.Background(), Message{Body: []byte("not a span list"), Decode: func([]byte) (Decoded, error) {
		return Decoded{Spans: more}, nil
	}})
	if res.Outcome != Accepted {
		t.Fatalf("otlp: %v %v", res.Outcome, res.Err)
	}
	if st := s1.spool.Stats(); st.Records != 2 {
		t.Fatalf("spool records = %d, want 2", st.Records)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	good := &fakeStore{}
	newTestServer(t, good, Config{SpoolDir: dir})
	waitFor(t, "the replayed spans to be stored", func() bool { return len(good.Stored()) == 5 })
}

// Retry-After is Config.RetryAfter rounded up to whole seconds, for every
// protocol: the HTTP header and Result.RetryAfter (gRPC's RetryInfo).
func TestRetryAfterRoundsUp(t *testing.T) {
	store, release := heldStore()
	defer close(release)
	s, hs, _ := newTestServer(t, store, Config{Writers: 1, MaxQueueSpans: 2, RetryAfter: 1500 * time.Millisecond})
	tr, _ := s.Transport("grpc")
	if r := post(t, hs.URL+"/api/v2/spans", listJSON(0, 2)); r.code != http.StatusAccepted {
		t.Fatalf("POST: %d %s", r.code, r.body)
	}
	r := post(t, hs.URL+"/api/v2/spans", listJSON(2, 1))
	if r.code != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "2" {
		t.Fatalf("POST into a full queue: %d Retry-After %q, want 503 and 2", r.code, r.header.Get("Retry-After"))
	}
	if res := ingestJSON(tr, listJSON(3, 1)); res.Outcome != RetryLater || res.RetryAfter != 2*time.Second {
		t.Fatalf("Ingest into a full queue: %v %v, want RetryLater 2s", res.Outcome, res.RetryAfter)
	}
}
