package server

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestPostStoresSpans: JSON v2 with and without Content-Type, gzip and
// proto3 are answered 202 and stored; "[]" and an empty body are 202 and
// store nothing.
func TestPostStoresSpans(t *testing.T) {
	store := &fakeStore{}
	_, hs, _ := newTestServer(t, store, Config{})
	u := hs.URL + "/api/v2/spans"

	for _, c := range []struct {
		name   string
		body   []byte
		header []string
	}{
		{"json", []byte(listJSON(0, 2)), []string{"Content-Type", "application/json"}},
		{"no content type", []byte(listJSON(2, 1)), nil},
		{"gzip", gzipped(t, []byte(listJSON(3, 3))), []string{"Content-Type", "application/json", "Content-Encoding", "gzip"}},
		{"empty list", []byte(" [ ] "), nil},
		{"empty body", nil, nil},
	} {
		if r := do(t, http.MethodPost, u, c.body, c.header...); r.code != http.StatusAccepted {
			t.Fatalf("%s: %d %q, want 202", c.name, r.code, r.body)
		}
	}
	spans, err := codec.DecodeJSONV2([]byte(listJSON(6, 2)))
	if err != nil {
		t.Fatal(err)
	}
	pb := codec.AppendProto3Spans(nil, spans)
	if r := do(t, http.MethodPost, u, pb, "Content-Type", "application/x-protobuf"); r.code != http.StatusAccepted {
		t.Fatalf("proto3: %d %q", r.code, r.body)
	}
	waitDrained(t, hs.URL)
	if got := len(store.Stored()); got != 8 {
		t.Fatalf("stored %d spans, want 8", got)
	}
	if v := metric(t, hs.URL, collector(NameSpansStored)); v != 8 {
		t.Fatalf("%s = %v, want 8", NameSpansStored, v)
	}
	if v := metric(t, hs.URL, collector(NameMessages)); v != 6 {
		t.Fatalf("%s = %v, want 6", NameMessages, v)
	}
}

// TestBadInput: every bad body is a 400 or 413 with Zipkin's message, is
// counted as a dropped message, and nothing of it reaches the store.
func TestBadInput(t *testing.T) {
	store := &fakeStore{}
	_, hs, _ := newTestServer(t, store, Config{MaxBodyBytes: 64 << 10})
	v2 := hs.URL + "/api/v2/spans"
	good := spanJSON(0)

	bomb := gzipped(t, bytes.Repeat([]byte(" "), 1<<20)) // 1 MiB of spaces in ~1 KiB
	oversize := "[" + strings.Repeat(good+",", (64<<10)/len(good)+1) + good + "]"
	cases := []struct {
		name   string
		body   []byte
		header []string
		code   int
		msg    string
	}{
		{"malformed JSON", []byte(`[{"traceId":"1","id":`), nil, 400, "reading List<Span> from json"},
		{"bad trace ID", []byte(`[{"traceId":"0xA1","id":"1"},` + good + `]`), nil, 400,
			"0xA1 should be lower-hex encoded with no prefix at $[0].traceId reading List<Span> from json"},
		{"upper-case trace ID", []byte(`[{"traceId":"A1","id":"1"}]`), nil, 400, "A1 should be lower-hex encoded with no prefix"},
		{"null tag value", []byte(`[` + good + `,{"traceId":"1","id":"1","tags":{"ok":"1","key":null}}]`), nil, 400,
			"No value at $[1].tags.key reading List<Span> from json"},
		{"JSON v1 on the v2 path", []byte(`[{"traceId":"1","id":"1","binaryAnnotations":[]}]`), nil, 400,
			"Expected a JSON_V2 encoded list, but received: JSON_V1\n"},
		{"not a list", []byte(`{"traceId":"1"}`), nil, 400, "Expected a JSON_V2 encoded list\n"},
		{"proto3 content type, JSON body", []byte(`[` + good + `]`), []string{"Content-Type", "application/x-protobuf"}, 400,
			"Expected a PROTO3 encoded list, but received: JSON_V2\n"},
		{"oversize body", []byte(oversize), nil, 413, "Request Entity Too Large: the body is larger than 65536 bytes"},
		{"gzip bomb", bomb, []string{"Content-Encoding", "gzip"}, 413,
			"Request Entity Too Large: the body is larger than 65536 bytes after gunzip"},
		{"bad gzip", []byte("[{not gzip at all"), []string{"Content-Encoding", "gzip"}, 400, "Cannot gunzip spans"},
		{"truncated gzip", gzipped(t, []byte("["+good+"]"))[:20], []string{"Content-Encoding", "gzip"}, 400, "Cannot gunzip spans"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, http.MethodPost, v2, c.body, c.header...)
			if r.code != c.code {
				t.Fatalf("status %d (%q), want %d", r.code, r.body, c.code)
			}
			if c.msg != "" && !strings.Contains(r.body, c.msg) {
				t.Fatalf("body %q, want it to contain %q", r.body, c.msg)
			}
			if strings.HasSuffix(c.msg, "\n") && r.body != c.msg {
				t.Fatalf("body %q, want exactly %q", r.body, c.msg)
			}
		})
	}
	// A JSON v2 body on the v1 path is refused with Zipkin's message too.
	if r := post(t, hs.URL+"/api/v1/spans", `[`+good+`]`); r.code != 400 ||
		r.body != "Expected a JSON_V1 encoded list, but received: JSON_V2\n" {
		t.Fatalf("v2 on v1: %d %q", r.code, r.body)
	}
	if got := metric(t, hs.URL, collector(NameMessagesDropped)); got != float64(len(cases)+1) {
		t.Fatalf("%s = %v, want %d", NameMessagesDropped, got, len(cases)+1)
	}
	if n := store.Calls(); n != 0 {
		t.Fatalf("bad input reached the store: %d Accept calls", n)
	}
	if d, _ := hsDepth(t, hs.URL); d != 0 {
		t.Fatalf("queue depth %v after bad input", d)
	}
}

func hsDepth(t *testing.T, base string) (float64, float64) {
	return metric(t, base, collector(NameQueueSpans)), metric(t, base, collector(NameQueueBytes))
}

// TestQueueFullIs503: while the writer is stuck, POSTs keep being answered
// at once — 202 until the queue's span bound is reached, then 503 with
// Retry-After — and every span answered 202 is stored once the writer
// resumes, none twice.
func TestQueueFullIs503(t *testing.T) {
	store, release := heldStore()
	const maxSpans = 50
	_, hs, _ := newTestServer(t, store, Config{Writers: 1, MaxQueueSpans: maxSpans, BatchSpans: 5})
	var accepted []string
	var got503 int
	for i := 0; i < 40; i++ {
		body := listJSON(i*3, 3)
		start := time.Now()
		r := post(t, hs.URL+"/api/v2/spans", body)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("POST took %v while the writer was stuck: a request waited for the writer", d)
		}
		switch r.code {
		case http.StatusAccepted:
			accepted = append(accepted, body)
		case http.StatusServiceUnavailable:
			got503++
			if ra := r.header.Get("Retry-After"); ra != "1" {
				t.Fatalf("Retry-After %q, want 1", ra)
			}
			if r.body != "The span queue is full; retry later" {
				t.Fatalf("503 body %q", r.body)
			}
		default:
			t.Fatalf("status %d %q; want only 202 and 503", r.code, r.body)
		}
		if d, _ := hsDepth(t, hs.URL); d > maxSpans {
			t.Fatalf("queue depth %v above its bound %d", d, maxSpans)
		}
	}
	if got503 == 0 || len(accepted) != maxSpans/3 {
		t.Fatalf("accepted %d messages, refused %d; want %d accepted then refusals", len(accepted), got503, maxSpans/3)
	}
	if v := metric(t, hs.URL, collector(NameMessagesRejected)); v != float64(got503) {
		t.Fatalf("%s = %v, want %d", NameMessagesRejected, v, got503)
	}
	close(release)
	waitDrained(t, hs.URL)
	stored := store.Stored()
	seen := map[model.ID]int{}
	for _, s := range stored {
		seen[s.ID]++
	}
	if len(stored) != 3*len(accepted) || len(seen) != len(stored) {
		t.Fatalf("stored %d spans (%d distinct), want %d accepted, each once", len(stored), len(seen), 3*len(accepted))
	}
}

// TestQueueByteBound: the byte bound refuses too, independently of spans.
func TestQueueByteBound(t *testing.T) {
	store, release := heldStore()
	body := listJSON(0, 1)
	_, hs, _ := newTestServer(t, store, Config{Writers: 1, MaxBodyBytes: int64(len(body)), MaxQueueBytes: int64(3 * len(body))})
	codes := map[int]int{}
	for i := 0; i < 6; i++ {
		codes[post(t, hs.URL+"/api/v2/spans", listJSON(i, 1)).code]++
	}
	if codes[202] != 3 || codes[503] != 3 {
		t.Fatalf("codes %v, want 3×202 and 3×503 with room for 3 bodies", codes)
	}
	if _, b := hsDepth(t, hs.URL); b > float64(3*len(body)) {
		t.Fatalf("queue bytes %v above the bound %d", b, 3*len(body))
	}
	close(release)
	waitDrained(t, hs.URL)
	if n := len(store.Stored()); n != 3 {
		t.Fatalf("stored %d, want 3", n)
	}
}

// TestWriteRetried: a failing write is retried until it succeeds; the
// client saw 202 at once.
func TestWriteRetried(t *testing.T) {
	var fails atomic.Int32
	store := &fakeStore{}
	store.setHook(func(context.Context, []model.Span) error {
		if fails.Add(1) <= 3 {
			return errors.New("connection refused")
		}
		return nil
	})
	_, hs, _ := newTestServer(t, store, Config{Writers: 1})
	if r := post(t, hs.URL+"/api/v2/spans", listJSON(0, 4)); r.code != 202 {
		t.Fatalf("%d %q", r.code, r.body)
	}
	waitDrained(t, hs.URL)
	if n := len(store.Stored()); n != 4 {
		t.Fatalf("stored %d spans, want 4", n)
	}
	if v := metric(t, hs.URL, `zipkin_collector_writes_total{result="error",transport="http"}`); v != 3 {
		t.Fatalf("failed attempts %v, want 3", v)
	}
	if v := metric(t, hs.URL, collector(NameBatchesFailed)); v != 0 {
		t.Fatalf("batches failed %v", v)
	}
}

// TestWriteGivenUp: a batch still failing at the retry deadline is counted
// and logged with its trace and span IDs; the password is not in the log.
func TestWriteGivenUp(t *testing.T) {
	store := &fakeStore{}
	store.setHook(func(context.Context, []model.Span) error {
		return errors.New("dial tcp: access denied for zipkin:s3cret-pw")
	})
	_, hs, logs := newTestServer(t, store, Config{Writers: 1, RetryDeadline: 300 * time.Millisecond, Redact: []string{"s3cret-pw"}})
	if r := post(t, hs.URL+"/api/v2/spans", listJSON(41, 2)); r.code != 202 {
		t.Fatalf("%d %q", r.code, r.body)
	}
	waitDrained(t, hs.URL)
	if v := metric(t, hs.URL, collector(NameBatchesFailed)); v != 1 {
		t.Fatalf("batches failed %v, want 1", v)
	}
	if v := metric(t, hs.URL, collector(NameSpansDropped)); v != 2 {
		t.Fatalf("spans dropped %v, want 2", v)
	}
	out := logs.String()
	for _, id := range []string{"000000000000002a/000000000000002a", "000000000000002b/000000000000002b"} {
		if !strings.Contains(out, id) {
			t.Fatalf("log does not name %s:\n%s", id, out)
		}
	}
	if strings.Contains(out, "s3cret-pw") {
		t.Fatalf("password in the log:\n%s", out)
	}
}

// TestCloseDrains: Close waits for the queue; POSTs after it are 503.
func TestCloseDrains(t *testing.T) {
	store, release := heldStore()
	s, err := New(Config{Storage: store, Writers: 1, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	for i := 0; i < 5; i++ {
		if code := serve(h, http.MethodPost, "/api/v2/spans", listJSON(i*2, 2)); code != 202 {
			t.Fatalf("POST %d", code)
		}
	}
	done := make(chan error, 1)
	go func() { done <- s.Close(context.Background()) }()
	waitFor(t, "Close to stop accepting", func() bool { return s.closing.Load() })
	if code := serve(h, http.MethodPost, "/api/v2/spans", listJSON(100, 1)); code != 503 {
		t.Fatalf("POST during Close: %d, want 503", code)
	}
	select {
	case err := <-done:
		t.Fatalf("Close returned %v before the queue drained", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(store.Stored()); n != 10 {
		t.Fatalf("stored %d after drain, want 10", n)
	}
}

// TestCloseDeadline: when the drain deadline passes, what is left is
// counted, logged and reported.
func TestCloseDeadline(t *testing.T) {
	store := &fakeStore{}
	store.setHook(func(ctx context.Context, _ []model.Span) error {
		<-ctx.Done()
		return ctx.Err()
	})
	logs := &logBuffer{}
	s, err := New(Config{Storage: store, Writers: 1, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if code := serve(s.Handler(), http.MethodPost, "/api/v2/spans", listJSON(i, 1)); code != 202 {
			t.Fatalf("POST %d", code)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = s.Close(ctx)
	if err == nil || !strings.Contains(err.Error(), "3 spans not yet stored") {
		t.Fatalf("Close: %v, want 3 spans not stored", err)
	}
	if !strings.Contains(logs.String(), "0000000000000003/0000000000000003") {
		t.Fatalf("dropped span not logged:\n%s", logs.String())
	}
}

// TestConcurrentPosts: many goroutines post while one writer writes; with
// -race this checks the queue's lock-free accounting.
func TestConcurrentPosts(t *testing.T) {
	store := &fakeStore{}
	_, hs, _ := newTestServer(t, store, Config{Writers: 2, MaxQueueSpans: 200})
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				resp, err := http.Post(hs.URL+"/api/v2/spans", "application/json", strings.NewReader(listJSON(g*1000+i*2, 2)))
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case 202:
					accepted.Add(2)
				case 503:
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		}(g)
	}
	wg.Wait()
	waitDrained(t, hs.URL)
	if n := int64(len(store.Stored())); n != accepted.Load() {
		t.Fatalf("stored %d, accepted %d", n, accepted.Load())
	}
}

func TestSampler(t *testing.T) {
	all := newSampler(0)
	none := newSampler(-1)
	half := newSampler(0.5)
	low := model.Span{TraceID: model.TraceID{Low: 1}, ID: 1}
	high := model.Span{TraceID: model.TraceID{Low: 0x7fffffffffffff00}, ID: 1}
	negHigh := model.Span{TraceID: model.TraceID{Low: 0x8000000000000100}, ID: 1} // |x| large
	debug := high
	debug.Debug = true
	for _, c := range []struct {
		s    sampler
		sp   model.Span
		keep bool
	}{
		{all, high, true}, {none, high, false}, {none, debug, true},
		{half, low, true}, {half, high, false}, {half, negHigh, false}, {half, debug, true},
	} {
		if got := c.s.keep(&c.sp); got != c.keep {
			t.Errorf("sampler %+v keep(%v) = %v, want %v", c.s, c.sp.TraceID, got, c.keep)
		}
	}
}

// TestSampledOut: spans sampled out are 202, counted as dropped, not stored.
func TestSampledOut(t *testing.T) {
	store := &fakeStore{}
	_, hs, _ := newTestServer(t, store, Config{SampleRate: -1})
	body := `[{"traceId":"1","id":"1"},{"traceId":"2","id":"2","debug":true}]`
	if r := post(t, hs.URL+"/api/v2/spans", body); r.code != 202 {
		t.Fatalf("%d %q", r.code, r.body)
	}
	waitDrained(t, hs.URL)
	if got := store.Stored(); len(got) != 1 || !got[0].Debug {
		t.Fatalf("stored %+v, want only the debug span", got)
	}
	if v := metric(t, hs.URL, collector(NameSpansDropped)); v != 1 {
		t.Fatalf("spans dropped %v, want 1", v)
	}
}

func discardLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError + 1}))
}

func serve(h http.Handler, method, path, body string) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec.Code
}

// TestPostV1: JSON v1 on /api/v1/spans is converted and stored.
func TestPostV1(t *testing.T) {
	store := &fakeStore{}
	_, hs, _ := newTestServer(t, store, Config{})
	body := `[{"traceId":"1","id":"2","name":"get","timestamp":10,"duration":5,` +
		`"annotations":[{"timestamp":10,"value":"sr","endpoint":{"serviceName":"v1svc","ipv4":"10.0.0.1"}},` +
		`{"timestamp":15,"value":"ss","endpoint":{"serviceName":"v1svc","ipv4":"10.0.0.1"}}],` +
		`"binaryAnnotations":[{"key":"http.path","value":"/a","endpoint":{"serviceName":"v1svc"}}]}]`
	if r := post(t, hs.URL+"/api/v1/spans", body, "Content-Type", "application/json"); r.code != 202 {
		t.Fatalf("%d %q", r.code, r.body)
	}
	waitDrained(t, hs.URL)
	got := store.Stored()
	if len(got) != 1 || got[0].Kind != model.KindServer || got[0].LocalServiceName() != "v1svc" || got[0].Tags["http.path"] != "/a" {
		t.Fatalf("stored %+v", got)
	}
}

// A client that sends the headers of a POST and then stalls holds no
// decoding slot and only the bytes it sent (as reserved room of
// MaxReceivingBytes), until BodyReadTimeout: then it gets a 408 and its
// reservation is given back.
func TestStalledBodyFreesItsSlot(t *testing.T) {
	store := &fakeStore{}
	s, hs, _ := newTestServer(t, store, Config{MaxConcurrentPosts: 1, BodyReadTimeout: 100 * time.Millisecond})
	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /api/v2/spans HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n[{"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stalled POST to reserve room for its body", func() bool { return s.receiving.Load() > 0 })
	if n := len(s.posts); n != 0 {
		t.Fatalf("a POST still receiving its body holds %d decoding slots, want 0", n)
	}
	if n := s.receiving.Load(); n > minReceiveChunk {
		t.Fatalf("a POST that sent 2 bytes of an announced 100 holds %d bytes, want at most %d", n, minReceiveChunk)
	}
	waitFor(t, "the stalled POST to give its reservation back", func() bool { return s.receiving.Load() == 0 })
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // never hang the test
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "Request Timeout") {
		t.Fatalf("stalled POST: %d %q, want 408", resp.StatusCode, b)
	}
	if r := post(t, hs.URL+"/api/v2/spans", listJSON(1, 1)); r.code != http.StatusAccepted {
		t.Fatalf("next POST: %d %s", r.code, r.body)
	}
	if n := metric(t, hs.URL, collector(NameMessagesDropped)); n != 1 {
		t.Fatalf("messages dropped = %v, want 1", n)
	}
}

// Sixty-four clients that send the headers of a POST and one byte of its
// body, then stall, do not keep another client from being answered 202
// within a second, with the default decoding slots (8 on 2 cores) and the
// default body timeout (30 s).
func TestStalledClientsDoNotBlockOthers(t *testing.T) {
	store := &fakeStore{}
	s, hs, _ := newTestServer(t, store, Config{})
	const stalled = 64
	for i := 0; i < stalled; i++ {
		conn, err := net.Dial("tcp", hs.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "POST /api/v2/spans HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10485760\r\n\r\n["); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every stalled POST to be receiving", func() bool { return s.receiving.Load() >= stalled*minReceiveChunk })
	if n := s.receiving.Load(); n > stalled*minReceiveChunk {
		t.Fatalf("%d stalled POSTs of one byte each hold %d bytes, want %d", stalled, n, stalled*minReceiveChunk)
	}
	for i := 0; i < 3; i++ { // the ninth client, and again
		t0 := time.Now()
		r := post(t, hs.URL+"/api/v2/spans", listJSON(1, 1))
		if took := time.Since(t0); r.code != http.StatusAccepted || took > time.Second {
			t.Fatalf("POST beside %d stalled clients: %d %q after %v, want 202 within 1s", stalled, r.code, r.body, took)
		}
	}
}

// A POST whose body would take the bytes being received above
// MaxReceivingBytes is answered 503 with Retry-After, and nothing of it is
// kept.
func TestReceivingBytesBound(t *testing.T) {
	store := &fakeStore{}
	s, hs, _ := newTestServer(t, store, Config{MaxBodyBytes: 1 << 20, MaxReceivingBytes: 1 << 20})
	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A client sends 600 KB of a 1 MiB body and stalls: it holds ~1 MiB.
	head := "POST /api/v2/spans HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n["
	if _, err := io.WriteString(conn, head+strings.Repeat(" ", 600_000)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stalled POST to hold more than half the bound", func() bool { return s.receiving.Load() > 1<<19 })
	r := post(t, hs.URL+"/api/v2/spans", listJSON(1, 2000))
	if r.code != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "being received") {
		t.Fatalf("POST over the receiving bound: %d %q Retry-After %q, want 503", r.code, r.body, r.header.Get("Retry-After"))
	}
	conn.Close()
	waitFor(t, "the reservations to be given back", func() bool { return s.receiving.Load() == 0 })
	if r := post(t, hs.URL+"/api/v2/spans", listJSON(1, 2000)); r.code != http.StatusAccepted {
		t.Fatalf("POST after the stalled client left: %d %q", r.code, r.body)
	}
	waitDrained(t, hs.URL)
	if n := len(store.Stored()); n != 2000 {
		t.Fatalf("stored %d spans, want 2000", n)
	}
}
