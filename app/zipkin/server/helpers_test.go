package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/storage"
	"github.com/sqlpool/sqlpool/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeStore is a storage.Storage that records what Accept stores. Accept
// calls hook (when set) first; an error from it fails the call. Queries
// answer from the stored spans where that is simple.
type fakeStore struct {
	storage.Noop
	mu       sync.Mutex
	stored   []model.Span
	calls    int
	hook     func(ctx context.Context, spans []model.Span) error
	checkErr error
	names    []string
	block    func(ctx context.Context) error // for queries
}

func (f *fakeStore) Accept(ctx context.Context, spans []model.Span) error {
	f.mu.Lock()
	hook := f.hook
	f.calls++
	f.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, spans); err != nil {
			return err
		}
	}
	f.mu.Lock()
	f.stored = append(f.stored, spans...)
	f.mu.Unlock()
	return nil
}

// heldStore returns a fakeStore whose every Accept waits until release is
// closed (or its context ends).
func heldStore() (*fakeStore, chan struct{}) {
	release := make(chan struct{})
	store := &fakeStore{}
	store.setHook(func(ctx context.Context, _ []model.Span) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	return store, release
}

func (f *fakeStore) setHook(h func(ctx context.Context, spans []model.Span) error) {
	f.mu.Lock()
	f.hook = h
	f.mu.Unlock()
}

func (f *fakeStore) Stored() []model.Span {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]model.Span(nil), f.stored...)
}

func (f *fakeStore) Calls() int { f.mu.Lock(); defer f.mu.Unlock(); return f.calls }

func (f *fakeStore) Check(context.Context) error { return f.checkErr }

func (f *fakeStore) GetServiceNames(ctx context.Context) ([]string, error) {
	if f.block != nil {
		return nil, f.block(ctx)
	}
	return f.names, nil
}

func (f *fakeStore) GetTrace(_ context.Context, id model.TraceID) ([]model.Span, error) {
	var out []model.Span
	for _, s := range f.Stored() {
		if s.TraceID == id {
			out = append(out, s)
		}
	}
	return out, nil
}

// logBuffer collects log output safely.
type logBuffer = testutil.Buffer

// newTestServer starts a Server on store with cfg, serves it with httptest
// and closes both at the end of the test.
func newTestServer(t *testing.T, store storage.Storage, cfg Config) (*Server, *httptest.Server, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	cfg.Storage = store
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, hs, logs
}

type response struct {
	code   int
	body   string
	header http.Header
}

func do(t *testing.T, method, url string, body []byte, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, string(b), resp.Header}
}

func post(t *testing.T, url, body string, header ...string) response {
	t.Helper()
	return do(t, http.MethodPost, url, []byte(body), header...)
}

func get(t *testing.T, url string) response {
	t.Helper()
	return do(t, http.MethodGet, url, nil)
}

// metric reads one sample of /metrics (name with its labels as printed, e.g.
// `zipkin_collector_queue_spans{transport="http"}`).
func metric(t testing.TB, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(line[len(name):]), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", line, err)
			}
			return v
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

func collector(name string) string { return name + `{transport="http"}` }

// waitFor polls cond every few milliseconds for up to 20 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, what, cond)
}

// waitDrained waits until the queue-depth metric is 0.
func waitDrained(t testing.TB, base string) {
	t.Helper()
	waitFor(t, "the ingest queue to drain", func() bool {
		return metric(t, base, collector(NameQueueSpans)) == 0
	})
}

var traceSeq int

// spanJSON is one valid JSON v2 span of a new trace.
func spanJSON(n int) string {
	return fmt.Sprintf(`{"traceId":"%016x","id":"%016x","name":"op","timestamp":%d,"duration":10,"localEndpoint":{"serviceName":"svc"}}`,
		n+1, n+1, time.Now().UnixMicro())
}

func listJSON(from, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = spanJSON(from + i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}
