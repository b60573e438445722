package pgstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
)

// traceKey is a trace ID as stored; high is 0 in non-strict lookups.
type traceKey struct{ low, high int64 }

func keyOf(id model.TraceID) traceKey { return traceKey{int64(id.Low), int64(id.High)} }

// maxKeys bounds the trace IDs one SELECT names.
const maxKeys = 500

// params builds a statement's $n placeholders.
type params struct{ args []any }

func (p *params) add(v any) string {
	p.args = append(p.args, v)
	return "$" + strconv.Itoa(len(p.args))
}

// GetTraces returns the traces with a span matching every condition of q,
// newest first (by the latest timestamp of their matching spans), at most
// q.Limit, each merged with Zipkin's Trace.merge rules. The conditions hold
// on one span as zipkin/mysqlstore's schema sees it — all fragments with one
// span ID, client and shared server halves together: a timestamp in the
// window (a span without one never qualifies), a fragment of the service
// (its local endpoint), the remote service, the name, the duration of its
// unshared fragments (of its shared ones when it has no other), and for each
// annotation-query term a fragment of the service carrying it (a tag with
// that value; for a bare key, a tag with that key or an annotation with that
// value). Candidates are read newest first along the index of the service
// (else the remote service, the span name, the window), or all at once
// through the GIN index of a rare annotation-query term, so a span whose
// fragments carry different timestamps is ordered by those of the
// fragments met first. q must be normalised; an invalid
// request is a *model.QueryError. With DisableSearch it returns nothing.
func (s *Store) GetTraces(ctx context.Context, q model.QueryRequest) ([][]model.Span, error) {
	if err := q.Normalize(); err != nil {
		return nil, err
	}
	if s.opts.DisableSearch {
		return nil, nil
	}
	strict := !s.opts.DisableStrictTraceID
	begin, end := q.WindowMicros()
	if q.ServiceName == "" && q.RemoteServiceName == "" && q.SpanName == "" && q.MinDuration == 0 && len(q.AnnotationQuery) == 0 {
		ids, err := s.newestTraces(ctx, begin, end, q.Limit, strict)
		if err != nil || len(ids) == 0 {
			return nil, err
		}
		return s.fetchTraces(ctx, ids, strict)
	}
	var p params
	b, e := p.add(begin), p.add(end)
	var drive []string // fragment conditions that select the candidate spans
	having := []string{"bool_or(start_ts BETWEEN " + b + " AND " + e + ")"}
	svc := ""
	if q.ServiceName != "" {
		svc = p.add(q.ServiceName)
		drive = append(drive, "l_service = "+svc)
		having = append(having, "bool_or(l_service = "+svc+")")
	}
	if q.RemoteServiceName != "" {
		v := p.add(q.RemoteServiceName)
		drive = append(drive, "r_service = "+v)
		having = append(having, "bool_or(r_service = "+v+")")
	}
	if q.SpanName != "" {
		v := p.add(q.SpanName)
		drive = append(drive, "name = "+v)
		having = append(having, "bool_or(name = "+v+")")
	}
	if q.MinDuration != 0 {
		// A span's duration is its unshared fragments' (Zipkin's v1 model
		// drops a shared span's duration), else its shared ones'.
		dur := "COALESCE(max(NULLIF(duration, 0)) FILTER (WHERE NOT shared), max(NULLIF(duration, 0)))"
		having = append(having, dur+" >= "+p.add(q.MinDuration))
		if q.MaxDuration != 0 {
			having = append(having, dur+" <= "+p.add(q.MaxDuration))
		}
	}
	keys := make([]string, 0, len(q.AnnotationQuery))
	for k := range q.AnnotationQuery {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var termDrive []string
	firstTerm := "" // the first term read through the GIN index
	for _, k := range keys {
		v := q.AnnotationQuery[k]
		var cond string
		if v == "" {
			if t := "0" + k; len(t) <= maxTerm {
				cond = "terms @> ARRAY[" + p.add(t) + "::text]"
				termDrive = append(termDrive, cond)
				firstTerm = cmp.Or(firstTerm, t)
			} else {
				kp := p.add(k)
				cond = "(jsonb_exists(tags, " + kp + "::text) OR EXISTS (SELECT 1 FROM jsonb_array_elements(annotations) e WHERE e->>1 = " + kp + "::text))"
			}
		} else {
			cond = "tags ->> " + p.add(k) + "::text = " + p.add(v) + "::text"
			if t := valueTerm(k, v); len(t) <= maxTerm {
				tc := "terms @> ARRAY[" + p.add(t) + "::text]"
				termDrive = append(termDrive, tc)
				firstTerm = cmp.Or(firstTerm, t)
				cond = tc + " AND " + cond
			}
		}
		// A term holds on the fragment that carries it, recorded by the
		// requested service.
		if svc != "" {
			cond += " AND l_service = " + svc
		}
		having = append(having, "bool_or("+cond+")")
	}
	// The candidates: the fragments meeting the most selective condition at
	// hand, newest first in the window, and those without a timestamp (a
	// late fragment of a span whose timestamp came with another). A rare
	// term (an annotation-query term below frequentShare of the fragments,
	// by the planner's statistics) is read through its GIN index, all its
	// fragments in the window at once: walking an index newest first would
	// read many fragments for each match. Otherwise the service's fragments
	// are walked newest first (along an index that covers them), else the
	// remote service's, the span name's or the window's; a frequent term is
	// then checked on them with the other conditions (its GIN index would
	// yield all its fragments of the window, tens of thousands, before the
	// service is checked). Each candidate's span (all its fragments) is
	// checked in that order, and the walk stops at the k-th match. A
	// trace's order is the latest timestamp of its matching spans.
	window := "start_ts BETWEEN " + b + " AND " + e
	walk := window
	if len(drive) > 0 {
		walk = drive[0] + " AND " + window
	}
	pure := len(having) == 1+min(len(drive), 1) // the walked condition is the only one
	rare := len(termDrive) > 0 && !s.frequentTerm(ctx, firstTerm)
	null := ""
	switch {
	case rare:
		// Read whole, those without a timestamp with them.
		walk = termDrive[0] + " AND (" + window + " OR start_ts IS NULL)"
	case len(termDrive) > 0:
		null = termDrive[0]
	case len(drive) > 0:
		null = drive[0]
	}
	high := "trace_id_high"
	if !strict {
		high = "0::int8"
	}
	// verify keeps a candidate w when its span meets the conditions, with
	// the latest timestamp of its fragments.
	verify := " w CROSS JOIN LATERAL (SELECT max(s.start_ts) AS ts FROM " + tableSpans + " s " +
		"WHERE s.trace_id = w.trace_id AND s.trace_id_high = w.trace_id_high AND s.id = w.id HAVING " + strings.Join(having, " AND ") + ") m"
	// The rare term's fragments are all checked (with ORDER BY and LIMIT
	// the planner would walk start_ts newest first, filtering the window).
	bound, kIndex := "", -1
	if !rare {
		bound = " ORDER BY w.start_ts DESC LIMIT " + p.add(int64(0)) // k, set per attempt
		kIndex = len(p.args) - 1
	}
	all := "SELECT * FROM v"
	if null != "" {
		all += " UNION ALL SELECT w.trace_id, w.trace_id_high, m.ts FROM " + tableSpans + verify + " WHERE " + null + " AND start_ts IS NULL"
	}
	// One row at least: the spans matched by the walk (to tell a stop at k
	// from its end), with the matching traces, newest first.
	query := "WITH v AS (SELECT w.trace_id, w.trace_id_high, m.ts FROM " + tableSpans + verify + " WHERE " + walk + bound + "), " +
		"a AS (" + all + "), " +
		"r AS (SELECT trace_id, " + high + " AS hi, max(ts) AS ts FROM a GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2 LIMIT " + p.add(int64(q.Limit)) + ") " +
		"SELECT r.trace_id, r.hi, n.n FROM (SELECT count(*) AS n FROM v) n LEFT JOIN r ON true ORDER BY r.ts DESC, r.trace_id, r.hi"
	// The first attempt stops at limit matching spans (4 × limit when the
	// walked condition is the only one: its spans are matched at no extra
	// cost), a later one at as many more as the traces found so far suggest
	// are needed, twice over (2 to 8 times). Each attempt walks anew.
	first := int64(1)
	if pure {
		first = 4
	}
	for n := first * int64(q.Limit); ; {
		if kIndex >= 0 {
			p.args[kIndex] = n
		}
		ids, read, err := s.selectCandidates(ctx, query, p.args)
		if err != nil {
			return nil, err
		}
		if kIndex >= 0 && len(ids) < q.Limit && read >= n {
			// The walk stopped at n matches: walk further.
			grow := int64(8)
			if len(ids) > 0 {
				grow = min(8, max(2, (2*int64(q.Limit)+int64(len(ids))-1)/int64(len(ids))))
			}
			n *= grow
			continue
		}
		if len(ids) == 0 {
			return nil, nil
		}
		return s.fetchTraces(ctx, ids, strict)
	}
}

// frequentShare is the share of the stored fragments carrying a term (by
// the planner's statistics, pg_stats.most_common_elem_freqs of terms) from
// which GetTraces walks an index newest first and checks the term on the
// fragments it meets, rather than read the term's fragments of the window
// through its GIN index. termStatsAge is how long the frequent terms read
// from pg_stats are used before they are read again.
const (
	frequentShare = 0.05
	termStatsAge  = time.Minute
)

// termStats caches the frequent terms of the spans table.
type termStats struct {
	mu         sync.Mutex
	read       time.Time
	refreshing bool // a search is reading them
	frequent   map[string]bool
	all        bool // every term counts as frequent (tests of the walk)
}

// frequentTerm reports whether term is carried by frequentShare of the
// stored fragments or more, by the statistics of the last ANALYZE (read at
// most once every termStatsAge, by one search while the others use the
// previous answer). Without statistics, or when they cannot be read, a term
// counts as rare.
func (s *Store) frequentTerm(ctx context.Context, term string) bool {
	t := &s.terms
	t.mu.Lock()
	if t.all {
		t.mu.Unlock()
		return true
	}
	stale := !t.refreshing && (t.read.IsZero() || time.Since(t.read) >= termStatsAge)
	t.refreshing = t.refreshing || stale
	frequent := t.frequent
	t.mu.Unlock()
	if stale {
		frequent = s.readFrequentTerms(ctx)
		t.mu.Lock()
		t.frequent, t.read, t.refreshing = frequent, time.Now(), false
		t.mu.Unlock()
	}
	return frequent[term]
}

// readFrequentTerms reads the terms carried by frequentShare of the
// fragments or more from pg_stats; nil when it cannot.
func (s *Store) readFrequentTerms(ctx context.Context) map[string]bool {
	rows, err := s.db.QueryContext(ctx, "SELECT u.e FROM pg_stats s, unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) u(e, f) "+
		"WHERE s.schemaname = current_schema() AND s.tablename = $1 AND s.attname = 'terms' AND u.e IS NOT NULL AND u.f >= $2", tableSpans, frequentShare)
	if err != nil {
		return nil
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var e string
		if rows.Scan(&e) == nil {
			out[e] = true
		}
	}
	if rows.Err() != nil {
		return nil
	}
	return out
}

// selectCandidates runs GetTraces' query: trace IDs (NULL when none) and the
// candidate count on every row.
func (s *Store) selectCandidates(ctx context.Context, query string, args []any) (keys []traceKey, read int64, err error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("pgstore: select trace ids: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var low, high sql.NullInt64
		if err := rows.Scan(&low, &high, &read); err != nil {
			return nil, 0, fmt.Errorf("pgstore: select trace ids: %w", err)
		}
		if low.Valid {
			keys = append(keys, traceKey{low.Int64, high.Int64})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("pgstore: select trace ids: %w", err)
	}
	return keys, read, nil
}

// newestTraces answers a search with a window only: it reads span
// timestamps newest first along the start_ts index and keeps the first limit
// distinct traces (a trace's first span read is its latest in the window,
// the order GetTraces answers in). It reads 8 × limit rows first and four
// times more each time that was not enough.
func (s *Store) newestTraces(ctx context.Context, begin, end int64, limit int, strict bool) ([]traceKey, error) {
	high := "trace_id_high"
	if !strict {
		high = "0::int8"
	}
	query := "SELECT trace_id, " + high + ", start_ts FROM " + tableSpans +
		" WHERE start_ts BETWEEN $1 AND $2 ORDER BY start_ts DESC LIMIT $3"
	for n := 8 * int64(limit); ; n *= 4 {
		rows, err := s.selectKeys(ctx, query, begin, end, n)
		if err != nil {
			return nil, err
		}
		seen := make(map[traceKey]bool, limit)
		keys := make([]traceKey, 0, limit)
		for _, k := range rows {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
				if len(keys) == limit {
					break
				}
			}
		}
		if len(keys) == limit || int64(len(rows)) < n {
			return keys, nil
		}
	}
}

func (s *Store) selectKeys(ctx context.Context, query string, args ...any) ([]traceKey, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: select trace ids: %w", err)
	}
	defer rows.Close()
	var keys []traceKey
	for rows.Next() {
		var k traceKey
		var ts sql.NullInt64
		if err := rows.Scan(&k.low, &k.high, &ts); err != nil {
			return nil, fmt.Errorf("pgstore: select trace ids: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: select trace ids: %w", err)
	}
	return keys, nil
}

// GetTrace returns the spans of one trace, merged. With strict trace IDs (the
// default) a 64-bit ID finds only spans stored with a 64-bit ID and a 128-bit
// ID only spans with all 128 bits; otherwise the low 64 bits decide. It
// returns nil when nothing is stored.
func (s *Store) GetTrace(ctx context.Context, id model.TraceID) ([]model.Span, error) {
	if id.IsZero() {
		return nil, nil
	}
	traces, err := s.GetTracesByIDs(ctx, []model.TraceID{id})
	if err != nil || len(traces) == 0 {
		return nil, err
	}
	return traces[0], nil
}

// GetTracesByIDs returns the traces found among ids (duplicates and zero IDs
// ignored), in the order of ids, with GetTrace's matching rules.
func (s *Store) GetTracesByIDs(ctx context.Context, ids []model.TraceID) ([][]model.Span, error) {
	strict := !s.opts.DisableStrictTraceID
	seen := make(map[traceKey]bool, len(ids))
	keys := make([]traceKey, 0, len(ids))
	for _, id := range ids {
		if id.IsZero() {
			continue
		}
		k := keyOf(id)
		if !strict {
			k.high = 0
		}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	return s.fetchTraces(ctx, keys, strict)
}

const readColumns = "trace_id, trace_id_high, id, parent_id, kind, name, start_ts, duration, debug, shared, " +
	"l_service, host(l_ipv4), host(l_ipv6), l_port, r_service, host(r_ipv4), host(r_ipv6), r_port, annotations::text, tags::text"

// fetchTraces reads the traces of keys (all 128 bits when strict, else the
// low 64) and returns each merged, in the order of keys; traces with
// nothing stored are left out.
func (s *Store) fetchTraces(ctx context.Context, keys []traceKey, strict bool) ([][]model.Span, error) {
	byTrace := make(map[traceKey][]model.Span, len(keys))
	for start := 0; start < len(keys); start += maxKeys {
		chunk := keys[start:min(start+maxKeys, len(keys))]
		var p params
		var b strings.Builder
		b.WriteString("SELECT " + readColumns + " FROM " + tableSpans + " WHERE ")
		if strict {
			b.WriteString("(trace_id, trace_id_high) IN (")
			for i, k := range chunk {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("(" + p.add(k.low) + "::int8, " + p.add(k.high) + "::int8)")
			}
		} else {
			b.WriteString("trace_id IN (")
			for i, k := range chunk {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(p.add(k.low) + "::int8")
			}
		}
		b.WriteString(")")
		if err := s.readSpans(ctx, b.String(), p.args, func(sp model.Span) {
			k := keyOf(sp.TraceID)
			if !strict {
				k.high = 0
			}
			byTrace[k] = append(byTrace[k], sp)
		}); err != nil {
			return nil, err
		}
	}
	out := make([][]model.Span, 0, len(byTrace))
	for _, k := range keys {
		if t, ok := byTrace[k]; ok {
			out = append(out, mysqlstore.MergeTrace(t))
			delete(byTrace, k)
		}
	}
	return out, nil
}

// readSpans runs query (which selects readColumns) and passes each span to fn.
func (s *Store) readSpans(ctx context.Context, query string, args []any, fn func(model.Span)) error {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("pgstore: select spans: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			low, high, id, parent, dur int64
			kind, name, lsvc, rsvc     string
			ts                         sql.NullInt64
			debug, shared              bool
			l4, l6, r4, r6, ann, tags  sql.NullString
			lport, rport               int64
		)
		if err := rows.Scan(&low, &high, &id, &parent, &kind, &name, &ts, &dur, &debug, &shared,
			&lsvc, &l4, &l6, &lport, &rsvc, &r4, &r6, &rport, &ann, &tags); err != nil {
			return fmt.Errorf("pgstore: select spans: %w", err)
		}
		sp := model.Span{TraceID: model.TraceID{High: uint64(high), Low: uint64(low)}, ID: model.ID(uint64(id)),
			ParentID: model.ID(uint64(parent)), Kind: model.Kind(kind), Name: name, Timestamp: ts.Int64, Duration: dur,
			Debug: debug, Shared: shared,
			LocalEndpoint:  endpoint(lsvc, l4, l6, lport),
			RemoteEndpoint: endpoint(rsvc, r4, r6, rport)}
		if ann.Valid {
			var a [][2]json.RawMessage
			if err := json.Unmarshal([]byte(ann.String), &a); err != nil {
				return fmt.Errorf("pgstore: decoding the annotations of span %s: %w", sp.ID, err)
			}
			sp.Annotations = make([]model.Annotation, len(a))
			for i, x := range a {
				_ = json.Unmarshal(x[0], &sp.Annotations[i].Timestamp)
				_ = json.Unmarshal(x[1], &sp.Annotations[i].Value)
			}
		}
		if tags.Valid {
			if err := json.Unmarshal([]byte(tags.String), &sp.Tags); err != nil {
				return fmt.Errorf("pgstore: decoding the tags of span %s: %w", sp.ID, err)
			}
		}
		fn(sp)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: select spans: %w", err)
	}
	return nil
}

func endpoint(svc string, v4, v6 sql.NullString, port int64) *model.Endpoint {
	e := &model.Endpoint{ServiceName: svc, Port: int(port)}
	if v4.Valid {
		e.IPv4, _ = netip.ParseAddr(v4.String)
	}
	if v6.Valid {
		e.IPv6, _ = netip.ParseAddr(v6.String)
	}
	if e.IsZero() {
		return nil
	}
	return e
}

// GetServiceNames returns the local service names of the stored spans,
// sorted. With DisableSearch it returns nothing.
func (s *Store) GetServiceNames(ctx context.Context) ([]string, error) {
	if s.opts.DisableSearch {
		return nil, nil
	}
	return s.selectNames(ctx, nameService, "")
}

// GetRemoteServiceNames returns the remote service names of the spans of a
// local service, sorted; "" and DisableSearch return nothing.
func (s *Store) GetRemoteServiceNames(ctx context.Context, serviceName string) ([]string, error) {
	return s.namesOf(ctx, nameRemote, serviceName)
}

// GetSpanNames returns the span names of a local service, sorted; "" and
// DisableSearch return nothing.
func (s *Store) GetSpanNames(ctx context.Context, serviceName string) ([]string, error) {
	return s.namesOf(ctx, nameSpan, serviceName)
}

func (s *Store) namesOf(ctx context.Context, kind int16, serviceName string) ([]string, error) {
	serviceName = strings.ToLower(strings.TrimSpace(serviceName))
	if s.opts.DisableSearch || serviceName == "" {
		return nil, nil
	}
	return s.selectNames(ctx, kind, serviceName)
}

// selectNames reads the names of one kind: the services themselves, or the
// names recorded under service.
func (s *Store) selectNames(ctx context.Context, kind int16, service string) ([]string, error) {
	var query string
	var args []any
	if kind == nameService {
		query = "SELECT service FROM " + tableNames + " WHERE kind = $1 ORDER BY 1"
		args = []any{int64(kind)}
	} else {
		query = "SELECT name FROM " + tableNames + " WHERE kind = $1 AND service = $2 ORDER BY 1"
		args = []any{int64(kind), service}
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: select names: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("pgstore: select names: %w", err)
		}
		if n != "" {
			out = append(out, n)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: select names: %w", err)
	}
	slices.Sort(out) // byte order, whatever the database's collation
	return slices.Compact(out), nil
}

// GetKeys returns the configured autocomplete keys (Options.AutocompleteKeys),
// sorted and without repeats; with DisableSearch, nothing.
func (s *Store) GetKeys(context.Context) ([]string, error) {
	if s.opts.DisableSearch || len(s.keys) == 0 {
		return nil, nil
	}
	out := make([]string, 0, len(s.keys))
	for k := range s.keys {
		out = append(out, k)
	}
	slices.Sort(out)
	return out, nil
}

// GetValues returns the distinct values stored for tag key, sorted, when key
// is a configured autocomplete key, and nothing otherwise (or with
// DisableSearch). An empty key is a *model.QueryError "key was empty".
func (s *Store) GetValues(ctx context.Context, key string) ([]string, error) {
	if key == "" {
		return nil, &model.QueryError{Msg: "key was empty"}
	}
	if s.opts.DisableSearch || !s.keys[key] {
		return nil, nil
	}
	return s.selectNames(ctx, nameValue, key)
}
