package mysqlstore

// Stubs of the query methods, so that *Store satisfies storage.Storage until
// the query files (query*.go, branch zipkin-query) land. Delete this file then.

import (
	"context"

	"github.com/sqlpool/sqlpool/zipkin/model"
)

func (s *Store) GetTraces(context.Context, model.QueryRequest) ([][]model.Span, error) {
	return nil, nil
}
func (s *Store) GetTrace(context.Context, model.TraceID) ([]model.Span, error) { return nil, nil }
func (s *Store) GetTracesByIDs(context.Context, []model.TraceID) ([][]model.Span, error) {
	return nil, nil
}
func (s *Store) GetServiceNames(context.Context) ([]string, error)               { return nil, nil }
func (s *Store) GetRemoteServiceNames(context.Context, string) ([]string, error) { return nil, nil }
func (s *Store) GetSpanNames(context.Context, string) ([]string, error)          { return nil, nil }
func (s *Store) GetDependencies(context.Context, int64, int64) ([]model.DependencyLink, error) {
	return nil, nil
}
func (s *Store) GetKeys(context.Context) ([]string, error)           { return nil, nil }
func (s *Store) GetValues(context.Context, string) ([]string, error) { return nil, nil }
