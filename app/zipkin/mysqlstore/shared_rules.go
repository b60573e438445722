package mysqlstore

import "github.com/sqlpool/sqlpool/app/zipkin/model"

// MergeTrace merges the fragments of one trace as Zipkin's Trace.merge does
// (the rules the store applies to what it reads back): fragments with the
// same span ID, shared flag and compatible local endpoints become one span,
// tags and annotations united. Other span stores (zipkin/memstore) use it
// to answer as this one does. The input is not modified.
func MergeTrace(spans []model.Span) []model.Span { return mergeTrace(spans) }

// LinkTraces returns the service-graph links of whole traces with the rules
// of Zipkin's DependencyLinker (each element one trace's spans), each
// parent→child pair once with its counts summed, in the order first seen.
func LinkTraces(traces [][]model.Span) []model.DependencyLink {
	var l dependencyLinker
	for _, t := range traces {
		l.putTrace(t)
	}
	return l.links
}
