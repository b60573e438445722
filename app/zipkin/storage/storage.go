// Package storage defines what the Zipkin server needs from a span store:
// writing spans, the v2 query API and autocomplete. zipkin/mysqlstore
// implements it on MySQL/MariaDB; Noop accepts and drops (the server's
// -storage=none, for load comparisons).
package storage

import (
	"context"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// SpanConsumer writes spans.
type SpanConsumer interface {
	// Accept stores a batch of normalised spans. It is idempotent: spans
	// sent again are stored once. An error means the batch may not be
	// stored; nil means every span is durable.
	Accept(ctx context.Context, spans []model.Span) error
}

// SpanStore answers the v2 query API. Every method returns an empty (non-nil
// or nil) result rather than an error when nothing matches.
type SpanStore interface {
	// GetTraces returns the traces matching a normalised request, newest
	// first, each as its spans.
	GetTraces(ctx context.Context, q model.QueryRequest) ([][]model.Span, error)
	// GetTrace returns the spans of one trace, or none.
	GetTrace(ctx context.Context, id model.TraceID) ([]model.Span, error)
	// GetTracesByIDs returns the traces found among ids (traceMany).
	GetTracesByIDs(ctx context.Context, ids []model.TraceID) ([][]model.Span, error)
	// GetServiceNames returns local service names, sorted.
	GetServiceNames(ctx context.Context) ([]string, error)
	// GetRemoteServiceNames returns the remote service names seen by a
	// local service, sorted.
	GetRemoteServiceNames(ctx context.Context, serviceName string) ([]string, error)
	// GetSpanNames returns the span names of a local service, sorted.
	GetSpanNames(ctx context.Context, serviceName string) ([]string, error)
	// GetDependencies returns the service graph for the window
	// [endTs-lookback, endTs] (epoch milliseconds).
	GetDependencies(ctx context.Context, endTs, lookback int64) ([]model.DependencyLink, error)
}

// AutocompleteTags answers the autocomplete endpoints.
type AutocompleteTags interface {
	// GetKeys returns the configured autocomplete keys, sorted.
	GetKeys(ctx context.Context) ([]string, error)
	// GetValues returns the values stored for a configured key, sorted.
	GetValues(ctx context.Context, key string) ([]string, error)
}

// Storage is a complete span store.
type Storage interface {
	SpanConsumer
	SpanStore
	AutocompleteTags
	// Check reports whether the store can serve requests now (for /health).
	Check(ctx context.Context) error
}

// Noop accepts every span and stores nothing; every query answers empty.
type Noop struct{}

var _ Storage = Noop{}

func (Noop) Accept(context.Context, []model.Span) error { return nil }
func (Noop) GetTraces(context.Context, model.QueryRequest) ([][]model.Span, error) {
	return nil, nil
}
func (Noop) GetTrace(context.Context, model.TraceID) ([]model.Span, error) { return nil, nil }
func (Noop) GetTracesByIDs(context.Context, []model.TraceID) ([][]model.Span, error) {
	return nil, nil
}
func (Noop) GetServiceNames(context.Context) ([]string, error)               { return nil, nil }
func (Noop) GetRemoteServiceNames(context.Context, string) ([]string, error) { return nil, nil }
func (Noop) GetSpanNames(context.Context, string) ([]string, error)          { return nil, nil }
func (Noop) GetDependencies(context.Context, int64, int64) ([]model.DependencyLink, error) {
	return nil, nil
}
func (Noop) GetKeys(context.Context) ([]string, error)           { return nil, nil }
func (Noop) GetValues(context.Context, string) ([]string, error) { return nil, nil }
func (Noop) Check(context.Context) error                         { return nil }
