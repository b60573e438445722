// Package memstore is an in-memory span store (storage.Storage), like
// Zipkin's STORAGE_TYPE=mem: for trying the server out, not for keeping
// data. Reads answer as zipkin/mysqlstore does: a trace's fragments are
// merged with Zipkin's Trace.merge rules (so a span sent twice is returned
// once) and dependency links are computed with Zipkin's DependencyLinker
// rules. One difference remains: the client and server halves of a shared
// span keep their own names, as in Zipkin's in-memory storage, where
// Zipkin's MySQL schema has one row, and so one name, per span ID. Every operation costs time in proportion to what it touches, not
// to what is stored (writes), or one pass over the traces (searches).
package memstore

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	"github.com/sqlpool/sqlpool/app/zipkin/storage"
)

// DefaultMaxSpans is Options.MaxSpans when zero (Zipkin's MEM_MAX_SPANS).
const DefaultMaxSpans = 500_000

// Options configure a Store. The zero value is Zipkin's defaults.
type Options struct {
	// MaxSpans bounds the spans held: past it the oldest traces (by first
	// arrival) are evicted whole. Zero value: 500,000.
	MaxSpans int
	// DisableStrictTraceID matches trace IDs on their low 64 bits only
	// (Zipkin's STRICT_TRACE_ID=false). Default false.
	DisableStrictTraceID bool
	// DisableSearch makes searches, names and autocomplete answer empty
	// (Zipkin's SEARCH_ENABLED=false). Default false.
	DisableSearch bool
	// AutocompleteKeys are the tag keys whose values autocomplete serves.
	AutocompleteKeys []string
	// OnEvict, when non-nil, is called after an Accept that evicted
	// traces, with the traces and spans it evicted, outside the store's
	// lock. Default nil: evictions are only counted (Stats).
	OnEvict func(traces, spans int)
}

// Stats are a Store's counters.
type Stats struct {
	Spans         int   // spans held now
	Traces        int   // traces held now (by the low 64 bits of the trace ID)
	EvictedSpans  int64 // spans evicted since New
	EvictedTraces int64 // traces evicted since New
}

// Store is an in-memory span store, safe for concurrent use.
type Store struct {
	opts Options
	keys map[string]bool

	mu       sync.RWMutex
	traces   map[uint64]*trace // by the low 64 bits of the trace ID
	order    []uint64          // trace keys by first arrival, for eviction
	spans    int
	services map[string]bool
	names    map[string]map[string]bool // service → span names
	remotes  map[string]map[string]bool // service → remote service names
	values   map[string]map[string]bool // autocomplete key → values

	evictedSpans, evictedTraces int64
}

type trace struct {
	spans []model.Span
	ids   map[fragmentKey]int // index in spans of each fragment
}

// fragmentKey identifies a fragment sent again (retries, replays): the
// same one is replaced, not added.
type fragmentKey struct {
	high, low uint64
	id        model.ID
	shared    bool
	kind      model.Kind
	local     string
}

var _ storage.Storage = (*Store)(nil)

// New returns an empty Store.
func New(opts Options) *Store {
	if opts.MaxSpans <= 0 {
		opts.MaxSpans = DefaultMaxSpans
	}
	s := &Store{opts: opts, keys: map[string]bool{}, traces: map[uint64]*trace{},
		services: map[string]bool{}, names: map[string]map[string]bool{}, remotes: map[string]map[string]bool{},
		values: map[string]map[string]bool{}}
	for _, k := range opts.AutocompleteKeys {
		s.keys[k] = true
	}
	return s
}

func add(m map[string]map[string]bool, k, v string) {
	if k == "" || v == "" {
		return
	}
	set := m[k]
	if set == nil {
		set = map[string]bool{}
		m[k] = set
	}
	set[v] = true
}

// Accept stores spans (normalised). A fragment sent again (same trace,
// span ID, shared flag, kind and local service) is merged into the one
// stored before, with the rules Zipkin reads a trace with, so neither
// fragment's fields are lost. Past Options.MaxSpans it evicts the oldest traces (by first
// arrival) whole, as Zipkin's in-memory storage does past MEM_MAX_SPANS,
// and reports them to Options.OnEvict.
func (s *Store) Accept(_ context.Context, spans []model.Span) error {
	traces, evicted := s.accept(spans)
	if traces > 0 && s.opts.OnEvict != nil {
		s.opts.OnEvict(traces, evicted)
	}
	return nil
}

// accept is Accept under the lock; it returns the traces and spans it
// evicted.
func (s *Store) accept(spans []model.Span) (evictedTraces, evictedSpans int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range spans {
		sp := spans[i]
		t := s.traces[sp.TraceID.Low]
		if t == nil {
			t = &trace{ids: map[fragmentKey]int{}}
			s.traces[sp.TraceID.Low] = t
			s.order = append(s.order, sp.TraceID.Low)
		}
		k := fragmentKey{sp.TraceID.High, sp.TraceID.Low, sp.ID, sp.Shared, sp.Kind, sp.LocalServiceName()}
		if j, ok := t.ids[k]; ok {
			// The same fragment again (a retry, a replay) or a later part of
			// it (a late annotation, the finish of a span sent at its start):
			// merged, as Zipkin merges a trace's fragments when it reads them.
			if m := mysqlstore.MergeTrace([]model.Span{t.spans[j], sp}); len(m) == 1 {
				t.spans[j] = m[0]
			} else {
				t.spans = append(t.spans, sp)
				s.spans++
			}
		} else {
			t.ids[k] = len(t.spans)
			t.spans = append(t.spans, sp)
			s.spans++
		}
		svc := sp.LocalServiceName()
		if svc != "" {
			s.services[svc] = true
		}
		add(s.names, svc, sp.Name)
		add(s.remotes, svc, sp.RemoteServiceName())
		for key, v := range sp.Tags {
			if s.keys[key] {
				add(s.values, key, v)
			}
		}
	}
	for s.spans > s.opts.MaxSpans && len(s.order) > 0 {
		k := s.order[0]
		s.order = s.order[1:]
		if t := s.traces[k]; t != nil {
			s.spans -= len(t.spans)
			delete(s.traces, k)
			evictedTraces++
			evictedSpans += len(t.spans)
		}
	}
	s.evictedTraces += int64(evictedTraces)
	s.evictedSpans += int64(evictedSpans)
	return evictedTraces, evictedSpans
}

// Stats returns the store's size and eviction counters.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return Stats{Spans: s.spans, Traces: len(s.traces), EvictedSpans: s.evictedSpans, EvictedTraces: s.evictedTraces}
}

// byID returns the spans of trace id (all with its low 64 bits when not
// strict), merged. Called with mu held.
func (s *Store) byID(id model.TraceID) []model.Span {
	t := s.traces[id.Low]
	if t == nil {
		return nil
	}
	var out []model.Span
	for _, sp := range t.spans {
		if s.opts.DisableStrictTraceID || sp.TraceID == id || (id.High == 0 && sp.TraceID.High == 0) {
			out = append(out, sp)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return mysqlstore.MergeTrace(out)
}

// split returns the traces one key holds: one per full trace ID when
// strict, else one.
func (s *Store) split(t *trace) [][]model.Span {
	if s.opts.DisableStrictTraceID {
		return [][]model.Span{t.spans}
	}
	var ids []model.TraceID
	groups := map[model.TraceID][]model.Span{}
	for _, sp := range t.spans {
		if _, ok := groups[sp.TraceID]; !ok {
			ids = append(ids, sp.TraceID)
		}
		groups[sp.TraceID] = append(groups[sp.TraceID], sp)
	}
	out := make([][]model.Span, 0, len(ids))
	for _, id := range ids {
		out = append(out, groups[id])
	}
	return out
}

// GetTrace returns the merged spans of one trace.
func (s *Store) GetTrace(_ context.Context, id model.TraceID) ([]model.Span, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byID(id), nil
}

// GetTracesByIDs returns the traces found among ids.
func (s *Store) GetTracesByIDs(_ context.Context, ids []model.TraceID) ([][]model.Span, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out [][]model.Span
	for _, id := range ids {
		if t := s.byID(id); len(t) > 0 {
			out = append(out, t)
		}
	}
	return out, nil
}

// matches reports whether one span satisfies every condition of q.
func matches(sp *model.Span, q *model.QueryRequest, begin, end int64) bool {
	if sp.Timestamp < begin || sp.Timestamp > end {
		return false
	}
	if q.ServiceName != "" && sp.LocalServiceName() != q.ServiceName && sp.RemoteServiceName() != q.ServiceName {
		return false
	}
	if q.RemoteServiceName != "" && sp.RemoteServiceName() != q.RemoteServiceName {
		return false
	}
	if q.SpanName != "" && sp.Name != q.SpanName {
		return false
	}
	if q.MinDuration > 0 && (sp.Duration < q.MinDuration || (q.MaxDuration > 0 && sp.Duration > q.MaxDuration)) {
		return false
	}
	for k, v := range q.AnnotationQuery {
		tv, tag := sp.Tags[k]
		if v != "" {
			if !tag || tv != v {
				return false
			}
			continue
		}
		if tag {
			continue
		}
		found := false
		for _, a := range sp.Annotations {
			if a.Value == k {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// GetTraces returns the traces with a span matching q, newest first (by
// their latest span timestamp), at most q.Limit.
func (s *Store) GetTraces(_ context.Context, q model.QueryRequest) ([][]model.Span, error) {
	if s.opts.DisableSearch {
		return nil, nil
	}
	begin, end := q.WindowMicros()
	q.ServiceName, q.RemoteServiceName, q.SpanName = strings.ToLower(q.ServiceName), strings.ToLower(q.RemoteServiceName), strings.ToLower(q.SpanName)
	s.mu.RLock()
	defer s.mu.RUnlock()
	type hit struct {
		spans []model.Span
		last  int64
	}
	var hits []hit
	for _, t := range s.traces {
		for _, spans := range s.split(t) {
			ok := false
			var last int64
			for i := range spans {
				last = max(last, spans[i].Timestamp)
				if !ok && matches(&spans[i], &q, begin, end) {
					ok = true
				}
			}
			if ok {
				hits = append(hits, hit{spans, last})
			}
		}
	}
	slices.SortFunc(hits, func(a, b hit) int { return cmp.Compare(b.last, a.last) })
	if len(hits) > q.Limit {
		hits = hits[:q.Limit]
	}
	out := make([][]model.Span, len(hits))
	for i, h := range hits {
		out[i] = mysqlstore.MergeTrace(h.spans)
	}
	return out, nil
}

func sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// GetServiceNames returns the local service names, sorted.
func (s *Store) GetServiceNames(context.Context) ([]string, error) {
	if s.opts.DisableSearch {
		return nil, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return sorted(s.services), nil
}

// GetRemoteServiceNames returns the remote service names of a service.
func (s *Store) GetRemoteServiceNames(_ context.Context, service string) ([]string, error) {
	if s.opts.DisableSearch {
		return nil, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return sorted(s.remotes[strings.ToLower(service)]), nil
}

// GetSpanNames returns the span names of a service.
func (s *Store) GetSpanNames(_ context.Context, service string) ([]string, error) {
	if s.opts.DisableSearch {
		return nil, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return sorted(s.names[strings.ToLower(service)]), nil
}

// GetDependencies links the traces that count in the window [endTs-lookback,
// endTs] (epoch milliseconds) with Zipkin's DependencyLinker rules, whole
// traces: as in the MySQL store, a trace counts in the hour of its
// earliest span timestamp, and the window is taken in whole hours
// (mysqlstore.WindowHours), so that a window on hour boundaries gives
// exactly the links of the traces that start in it.
func (s *Store) GetDependencies(_ context.Context, endTs, lookback int64) ([]model.DependencyLink, error) {
	if endTs <= 0 {
		return nil, &model.QueryError{Msg: "endTs <= 0"}
	}
	if lookback <= 0 {
		return nil, &model.QueryError{Msg: "lookback <= 0"}
	}
	first, last := mysqlstore.WindowHours(endTs, lookback)
	s.mu.RLock()
	var traces [][]model.Span
	for _, t := range s.traces {
		for _, spans := range s.split(t) {
			if h, ok := mysqlstore.TraceHour(spans); ok && h >= first && h <= last {
				traces = append(traces, spans)
			}
		}
	}
	s.mu.RUnlock()
	return mysqlstore.LinkTraces(traces), nil
}

// GetKeys returns the configured autocomplete keys, sorted.
func (s *Store) GetKeys(context.Context) ([]string, error) {
	if s.opts.DisableSearch {
		return nil, nil
	}
	return sorted(s.keys), nil
}

// GetValues returns the values stored for a configured key, sorted.
func (s *Store) GetValues(_ context.Context, key string) ([]string, error) {
	if key == "" {
		return nil, &model.QueryError{Msg: "key was empty"}
	}
	if s.opts.DisableSearch || !s.keys[key] {
		return nil, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return sorted(s.values[key]), nil
}

// Check always succeeds.
func (s *Store) Check(context.Context) error { return nil }
