package mysqlstore

import "github.com/sqlpool/sqlpool/app/zipkin/model"

// Test hooks for the external acceptance tests.

// MergeTrace is mergeTrace (Zipkin's Trace.merge).
func MergeTrace(spans []model.Span) []model.Span { return mergeTrace(spans) }

// LinkTraces runs the dependency linker over whole traces, as Zipkin's
// aggregation job does before writing zipkin_dependencies.
func LinkTraces(traces [][]model.Span) []model.DependencyLink {
	var l dependencyLinker
	for _, t := range traces {
		l.putTrace(t)
	}
	return l.links
}
