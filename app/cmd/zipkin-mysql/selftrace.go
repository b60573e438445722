package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	otelzipkin "go.opentelemetry.io/otel/exporters/zipkin"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/storage"
)

// Self-tracing (SELF_TRACING_ENABLED=true, as Zipkin's server has it): the server traces its
// own storage calls and the pool acquires that had to wait or probe, and stores those spans in
// its own storage, under the service name selfServiceName, so that an operator sees in the
// viewer where a slow write or query spent its time — waiting for a pooled connection included.
//
// The spans do not go through HTTP, nor through the server's span queue: a batch span
// processor hands them to selfExporter, which writes them with the storage's Accept directly.
// That write runs under a ctx marked untraced, and every span start under such a ctx (the
// storage wrapper's, and the pool's acquire spans, whose tracer is wrapped the same way) is a
// no-op: writing the server's own spans makes no spans, so the recursion ends at one level.
//
// SELF_TRACING_SAMPLE_RATE (0.0–1.0, default 1.0) samples root spans; SELF_TRACING_FLUSH_INTERVAL
// (seconds, default 1) is the batch processor's delay.
const selfServiceName = "zipkin-mysql"

type selfTracingConfig struct {
	Enabled    bool
	SampleRate float64
	Flush      time.Duration
}

func parseSelfTracing(getenv func(string) string) (selfTracingConfig, error) {
	c := selfTracingConfig{SampleRate: 1, Flush: time.Second}
	switch v := strings.ToLower(strings.TrimSpace(getenv("SELF_TRACING_ENABLED"))); v {
	case "", "false", "0", "no":
	case "true", "1", "yes":
		c.Enabled = true
	default:
		return c, fmt.Errorf("SELF_TRACING_ENABLED=%q: use true or false", v)
	}
	if v := getenv("SELF_TRACING_SAMPLE_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r < 0 || r > 1 {
			return c, fmt.Errorf("SELF_TRACING_SAMPLE_RATE=%q: use a number from 0.0 to 1.0", v)
		}
		c.SampleRate = r
	}
	if v := getenv("SELF_TRACING_FLUSH_INTERVAL"); v != "" {
		s, err := strconv.ParseFloat(v, 64)
		if err != nil || s <= 0 {
			return c, fmt.Errorf("SELF_TRACING_FLUSH_INTERVAL=%q: use a positive number of seconds", v)
		}
		c.Flush = time.Duration(s * float64(time.Second))
	}
	return c, nil
}

// selfTracing is the tracer provider of self-tracing and its exporter.
type selfTracing struct {
	tp  *sdktrace.TracerProvider
	exp *selfExporter
	log *slog.Logger
}

func newSelfTracing(c selfTracingConfig, log *slog.Logger) (*selfTracing, error) {
	res, err := resource.New(context.Background(), resource.WithAttributes(attribute.String("service.name", selfServiceName)))
	if err != nil {
		return nil, err
	}
	exp := &selfExporter{log: log}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.SampleRate))),
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(c.Flush)),
	)
	return &selfTracing{tp: tp, exp: exp, log: log}, nil
}

// tracerProvider is the provider given to the pool (otelpool) and the storage wrapper: spans
// started under an untraced ctx are no-ops.
func (s *selfTracing) tracerProvider() trace.TracerProvider { return guardedProvider{tp: s.tp} }

// setStorage makes the exporter write into st (the unwrapped store).
func (s *selfTracing) setStorage(st storage.Storage) { s.exp.store.Store(&st) }

// wrap returns st with a span around every call.
func (s *selfTracing) wrap(st storage.Storage) storage.Storage {
	return &tracedStorage{next: st, tracer: s.tracerProvider().Tracer("github.com/sqlpool/sqlpool/app/cmd/zipkin-mysql")}
}

// shutdown flushes the spans still buffered (into the storage, which must still be open).
func (s *selfTracing) shutdown(ctx context.Context) {
	if err := s.tp.Shutdown(ctx); err != nil {
		s.log.Warn("self-tracing: spans not flushed at shutdown", "err", err)
	}
}

type untracedKey struct{}

// untraced marks ctx: no self-tracing span starts under it.
func untraced(ctx context.Context) context.Context {
	return context.WithValue(ctx, untracedKey{}, true)
}

func isUntraced(ctx context.Context) bool { return ctx.Value(untracedKey{}) != nil }

type guardedProvider struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

func (g guardedProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return guardedTracer{t: g.tp.Tracer(name, opts...)}
}

type guardedTracer struct {
	embedded.Tracer
	t trace.Tracer
}

var noopTracer = noop.NewTracerProvider().Tracer("")

func (g guardedTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if isUntraced(ctx) {
		return noopTracer.Start(ctx, name, opts...)
	}
	return g.t.Start(ctx, name, opts...)
}

// selfExporter writes the server's own spans into its storage.
type selfExporter struct {
	store  atomic.Pointer[storage.Storage]
	log    *slog.Logger
	warned atomic.Bool
}

func (e *selfExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	p := e.store.Load()
	if p == nil || len(spans) == 0 {
		return nil
	}
	// The OpenTelemetry Zipkin exporter's mapping, then the server's own JSON v2 decoder: the
	// spans are stored exactly as if the exporter had posted them.
	body, err := json.Marshal(otelzipkin.SpanModels(spans))
	if err != nil {
		return err
	}
	ms, err := codec.DecodeJSONV2(body)
	if err != nil {
		return err
	}
	for i := range ms {
		ms[i].Normalize()
	}
	if err := (*p).Accept(untraced(ctx), ms); err != nil {
		if !e.warned.Swap(true) {
			e.log.Warn("self-tracing: cannot store the server's own spans (dropped; further failures not logged)", "err", err)
		}
		return nil // dropped: retrying would only add load to a storage that fails
	}
	return nil
}

func (e *selfExporter) Shutdown(context.Context) error { return nil }

// tracedStorage puts a span around every storage call (named as Zipkin's self-tracing names
// them); the pool's acquire spans become its children through the ctx.
type tracedStorage struct {
	next   storage.Storage
	tracer trace.Tracer
}

var _ storage.Storage = (*tracedStorage)(nil)

func (t *tracedStorage) start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

func end(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func (t *tracedStorage) Accept(ctx context.Context, spans []model.Span) error {
	ctx, span := t.start(ctx, "accept-spans", attribute.Int("spans", len(spans)))
	err := t.next.Accept(ctx, spans)
	end(span, err)
	return err
}

func (t *tracedStorage) GetTraces(ctx context.Context, q model.QueryRequest) ([][]model.Span, error) {
	ctx, span := t.start(ctx, "get-traces", attribute.String("serviceName", q.ServiceName), attribute.Int("limit", q.Limit))
	r, err := t.next.GetTraces(ctx, q)
	span.SetAttributes(attribute.Int("traces", len(r)))
	end(span, err)
	return r, err
}

func (t *tracedStorage) GetTrace(ctx context.Context, id model.TraceID) ([]model.Span, error) {
	ctx, span := t.start(ctx, "get-trace", attribute.String("traceId", id.String()))
	r, err := t.next.GetTrace(ctx, id)
	end(span, err)
	return r, err
}

func (t *tracedStorage) GetTracesByIDs(ctx context.Context, ids []model.TraceID) ([][]model.Span, error) {
	ctx, span := t.start(ctx, "get-traces-by-ids", attribute.Int("ids", len(ids)))
	r, err := t.next.GetTracesByIDs(ctx, ids)
	end(span, err)
	return r, err
}

func (t *tracedStorage) GetServiceNames(ctx context.Context) ([]string, error) {
	ctx, span := t.start(ctx, "get-service-names")
	r, err := t.next.GetServiceNames(ctx)
	end(span, err)
	return r, err
}

func (t *tracedStorage) GetRemoteServiceNames(ctx context.Context, service string) ([]string, error) {
	ctx, span := t.start(ctx, "get-remote-service-names", attribute.String("serviceName", service))
	r, err := t.next.GetRemoteServiceNames(ctx, service)
	end(span, err)
	return r, err
}

func (t *tracedStorage) GetSpanNames(ctx context.Context, service string) ([]string, error) {
	ctx, span := t.start(ctx, "get-span-names", attribute.String("serviceName", service))
	r, err := t.next.GetSpanNames(ctx, service)
	end(span, err)
	return r, err
}

func (t *tracedStorage) GetDependencies(ctx context.Context, endTs, lookback int64) ([]model.DependencyLink, error) {
	ctx, span := t.start(ctx, "get-dependencies")
	r, err := t.next.GetDependencies(ctx, endTs, lookback)
	end(span, err)
	return r, err
}

func (t *tracedStorage) GetKeys(ctx context.Context) ([]string, error) {
	ctx, span := t.start(ctx, "get-autocomplete-keys")
	r, err := t.next.GetKeys(ctx)
	end(span, err)
	return r, err
}

func (t *tracedStorage) GetValues(ctx context.Context, key string) ([]string, error) {
	ctx, span := t.start(ctx, "get-autocomplete-values", attribute.String("key", key))
	r, err := t.next.GetValues(ctx, key)
	end(span, err)
	return r, err
}

// Check is not traced: /health is polled, and its spans would crowd out the others.
func (t *tracedStorage) Check(ctx context.Context) error { return t.next.Check(ctx) }
