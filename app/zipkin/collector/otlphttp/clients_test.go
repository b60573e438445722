package otlphttp_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqlpool/sqlpool/app/zipkin/server"
)

// recording wraps an exporter and records the spans of every export that
// succeeded (what the client saw accepted) and counts those that failed.
type recording struct {
	sdktrace.SpanExporter
	mu     sync.Mutex
	ok     map[string]int
	failed int
	calls  int
}

func (r *recording) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := r.SpanExporter.ExportSpans(ctx, spans)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if err != nil {
		r.failed += len(spans)
		return err
	}
	for _, s := range spans {
		r.ok[s.SpanContext().TraceID().String()+"/"+s.SpanContext().SpanID().String()]++
	}
	return nil
}

// loadSize is the spans and traces of the real-client tests, ten spans a
// trace: OTLP_E2E_SPANS (10000 for the full size), else 200 (CI-sized: the
// embedded server, on its one connection, stored 8 to 30 spans a second on
// the loaded 2-core machine of these tests, and far fewer under -race).
func loadSize() (spans, traces int) {
	n := 200
	if v, err := strconv.Atoi(os.Getenv("OTLP_E2E_SPANS")); err == nil && v >= 10 {
		n = v / 10 * 10
	}
	return n, n / 10
}

// TestRealClientsUnderBackPressure sends spans with OpenTelemetry Go's
// OTLP exporters (batch span processor, retries on) while the store is
// held several times, so that the queue fills and the server refuses
// (503 + Retry-After, UNAVAILABLE + RetryInfo). Every span whose export
// the client saw succeed is read back exactly once; the client retried
// what was refused, so every span in the end succeeded.
func TestRealClientsUnderBackPressure(t *testing.T) {
	nSpans, nTraces := loadSize()
	for _, tc := range []struct {
		transport string
		exporter  func(e *env) (sdktrace.SpanExporter, error)
	}{
		{"otlp-http", func(e *env) (sdktrace.SpanExporter, error) {
			return otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(e.base+"/v1/traces"),
				otlptracehttp.WithTimeout(3*time.Minute),
				otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 50 * time.Millisecond,
					MaxInterval: time.Second, MaxElapsedTime: 3 * time.Minute}))
		}},
		{"otlp-grpc", func(e *env) (sdktrace.SpanExporter, error) {
			return otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(e.otlpGRPC), otlptracegrpc.WithInsecure(),
				otlptracegrpc.WithTimeout(3*time.Minute),
				otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 50 * time.Millisecond,
					MaxInterval: time.Second, MaxElapsedTime: 3 * time.Minute}))
		}},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			// The queue holds a fraction of the spans, and the store is held
			// from the start: exports are refused until the client has
			// retried past each hold.
			e := newEnv(t, server.Config{MaxQueueSpans: nSpans / 5})
			exp, err := tc.exporter(e)
			must(t, err)
			rec := &recording{SpanExporter: exp, ok: map[string]int{}}
			tp := sdktrace.NewTracerProvider(
				sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "load-"+tc.transport))),
				sdktrace.WithBatcher(rec, sdktrace.WithBlocking(), sdktrace.WithMaxExportBatchSize(nSpans/10),
					sdktrace.WithBatchTimeout(20*time.Millisecond), sdktrace.WithExportTimeout(3*time.Minute)))

			// Hold the store until the server has refused an export, three
			// times over, while the spans are produced.
			done := make(chan struct{})
			holds := holdUntilRefused(e, tc.transport, done)

			start := time.Now()
			tracer := tp.Tracer("load")
			traceIDs := make([]string, 0, nTraces)
			perTrace := nSpans / nTraces
			for i := 0; i < nTraces; i++ {
				ctx, root := tracer.Start(context.Background(), "root", trace.WithSpanKind(trace.SpanKindServer))
				for j := 1; j < perTrace; j++ {
					_, c := tracer.Start(ctx, fmt.Sprintf("child-%d", j), trace.WithSpanKind(trace.SpanKindClient),
						trace.WithAttributes(attribute.String("peer.service", "db"), attribute.Int("i", j)))
					c.End()
				}
				root.End()
				traceIDs = append(traceIDs, root.SpanContext().TraceID().String())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			must(t, tp.Shutdown(ctx))
			close(done)
			nHolds := <-holds
			sent := time.Since(start)
			e.waitDrained(t)
			took := time.Since(start)

			rec.mu.Lock()
			defer rec.mu.Unlock()
			seen := e.spansByID(t, traceIDs)
			for id, n := range rec.ok {
				if n != 1 {
					t.Errorf("span %s exported successfully %d times", id, n)
				}
				if seen[id] != 1 {
					t.Errorf("span %s: the client saw success, read back %d times", id, seen[id])
				}
			}
			for id, n := range seen {
				if n != 1 {
					t.Errorf("span %s read back %d times", id, n)
				}
			}
			rejected := e.counter(t, server.NameMessagesRejected, tc.transport)
			t.Logf("%s: %d spans in %d traces; %d exports, %d spans failed for good; %d refusals (queue full) in %d holds; sent in %v, stored in %v (%.0f spans/s)",
				tc.transport, len(rec.ok), nTraces, rec.calls, rec.failed, int(rejected), nHolds, sent.Round(time.Millisecond),
				took.Round(time.Millisecond), float64(len(rec.ok))/took.Seconds())
			if rejected == 0 || nHolds == 0 {
				t.Errorf("the queue was never full (%v refusals): the test did not exercise back-pressure", rejected)
			}
			if len(rec.ok) != nSpans || rec.failed != 0 {
				t.Errorf("%d of %d spans succeeded, %d failed: the client did not retry what was refused", len(rec.ok), nSpans, rec.failed)
			}
			if got := e.counter(t, server.NameSpans, tc.transport); got < float64(nSpans) {
				t.Errorf("zipkin_collector_spans_total{transport=%q} = %v, want at least %d", tc.transport, got, nSpans)
			}
		})
	}
}

// holdUntilRefused holds e's store until the server has refused a
// message of transport, three times over (letting the queue drain a little
// between holds), and sends the number of holds when done is closed or
// the three are over. The store is held from the start.
func holdUntilRefused(e *env, transport string, done <-chan struct{}) <-chan int {
	holds := make(chan int, 1)
	e.store.pause()
	go func() {
		n := 0
		defer func() { holds <- n }()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for ; n < 3; n++ {
			before := e.rejected(transport)
			e.store.pause()
			for e.rejected(transport) == before {
				select {
				case <-done:
					e.store.resume()
					return
				case <-tick.C:
				}
			}
			e.store.resume()
			select {
			case <-done:
				return
			case <-time.After(300 * time.Millisecond): // let the queue drain a little before the next hold
			}
		}
	}()
	return holds
}
