package uitest

import (
	"sort"
	"strings"
)

// The fake answers searches, name lists and dependencies the way Zipkin's
// MySQL store does (reference: zipkin.md §2 and §3), by keeping the rows
// that store would write: one zipkin_spans row per (trace ID, span ID) —
// so a client and a server sharing a span ID share one row — with its
// annotation rows. That is what the real store is compared with, so the
// checks' expectations hold against both.

// annRow is one zipkin_annotations row.
type annRow struct {
	key, value, service string
	aType               int // -1 annotation, 0 address, 6 tag or "lc"
}

// spanRow is one zipkin_spans row with its annotation rows.
type spanRow struct {
	traceID, id, parentID string
	startTs, duration     int64 // 0: NULL
	name, remote          string
	anns                  []annRow
}

// core annotations and address key of each kind (V2SpanConverter).
var coreAnnotations = map[string][3]string{
	"CLIENT":   {"cs", "cr", "sa"},
	"SERVER":   {"sr", "ss", "ca"},
	"PRODUCER": {"ms", "ws", "ma"},
	"CONSUMER": {"wr", "mr", "ma"},
}

// rows converts spans, in the order they were posted, to the rows Zipkin's
// MySQL store would hold: start_ts is set by the first span with a
// timestamp and overwritten by later non-shared ones; duration, name,
// remote service name and parent are set by spans that have them (a shared
// span writes no duration); annotation rows are added first-write-wins.
func rows(spans []Span) map[string]*spanRow {
	out := map[string]*spanRow{}
	for _, s := range spans {
		k := s.TraceID + "/" + s.ID
		r := out[k]
		if r == nil {
			r = &spanRow{traceID: s.TraceID, id: s.ID, startTs: s.Timestamp}
			out[k] = r
		} else if !s.Shared && s.Timestamp != 0 {
			r.startTs = s.Timestamp
		}
		if !s.Shared && s.Duration != 0 {
			r.duration = s.Duration
		}
		if s.ParentID != "" {
			r.parentID = s.ParentID
		}
		if s.Name != "" && s.Name != "unknown" {
			r.name = s.Name
		}
		if rs := svc(s.RemoteEndpoint); rs != "" && rs != "unknown" {
			r.remote = rs
		}
		local := svc(s.LocalEndpoint)
		add := func(a annRow) {
			for _, b := range r.anns {
				if b.key == a.key && b.service == a.service && b.aType == a.aType {
					return // INSERT IGNORE (close enough: same key, side and type)
				}
			}
			r.anns = append(r.anns, a)
		}
		n := len(r.anns)
		core, hasKind := coreAnnotations[s.Kind]
		switch {
		case !hasKind || s.Timestamp == 0:
		case s.Kind == "CONSUMER" && s.Duration == 0:
			add(annRow{key: "mr", service: local, aType: -1})
		default:
			add(annRow{key: core[0], service: local, aType: -1})
			if s.Duration != 0 {
				add(annRow{key: core[1], service: local, aType: -1})
			}
		}
		for _, a := range s.Annotations {
			add(annRow{key: a.Value, service: local, aType: -1})
		}
		for k, v := range s.Tags {
			add(annRow{key: k, value: v, service: local, aType: 6})
		}
		if len(r.anns) == n && len(s.Annotations) == 0 && len(s.Tags) == 0 && s.LocalEndpoint != nil {
			add(annRow{key: "lc", service: local, aType: 6})
		}
		if s.RemoteEndpoint != nil {
			addr := "sa"
			if hasKind {
				addr = core[2]
			}
			add(annRow{key: addr, service: svc(s.RemoteEndpoint), aType: 0})
		}
	}
	return out
}

// query is a getTraces request.
type query struct {
	service, remote, name    string
	minDuration, maxDuration int64
	terms                    map[string]string
	begin, end               int64 // µs, inclusive
	limit                    int64
}

// matches reports whether one row satisfies every condition of q: in
// Zipkin's MySQL store all of them bind to one span row (and one local
// service), and a row without start_ts or without annotation rows never
// qualifies.
func (q *query) matches(r *spanRow) bool {
	if r.startTs == 0 || r.startTs < q.begin || r.startTs > q.end || len(r.anns) == 0 {
		return false
	}
	if q.service != "" {
		ok := false
		for _, a := range r.anns {
			ok = ok || a.service == q.service && a.aType != 0
		}
		if !ok {
			return false
		}
	}
	if q.remote != "" && r.remote != q.remote || q.name != "" && r.name != q.name {
		return false
	}
	if q.minDuration > 0 && (r.duration == 0 || r.duration < q.minDuration) ||
		q.maxDuration > 0 && r.duration > q.maxDuration {
		return false
	}
	for k, v := range q.terms {
		ok := false
		for _, a := range r.anns {
			ok = ok || a.key == k && (v == "" || a.aType == 6 && a.value == v) && (q.service == "" || a.service == q.service)
		}
		if !ok {
			return false
		}
	}
	return true
}

// search returns the IDs of the traces with a matching row, newest first by
// the latest start_ts among their matching rows, at most q.limit.
func search(spans []Span, q *query) []string {
	latest := map[string]int64{}
	for _, r := range rows(spans) {
		if q.matches(r) && r.startTs > latest[r.traceID] {
			latest[r.traceID] = r.startTs
		}
	}
	ids := make([]string, 0, len(latest))
	for id := range latest {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		return latest[ids[i]] > latest[ids[j]] || latest[ids[i]] == latest[ids[j]] && ids[i] < ids[j]
	})
	if int64(len(ids)) > q.limit {
		ids = ids[:q.limit]
	}
	return ids
}

// names lists, for a local service, the distinct span names (field "name")
// or remote service names (field "remote") of its rows; for service "" the
// local service names of all rows.
func names(spans []Span, service, field string) []string {
	set := map[string]bool{}
	for _, r := range rows(spans) {
		for _, a := range r.anns {
			if a.aType == 0 || a.service == "" {
				continue
			}
			switch {
			case service == "":
				set[a.service] = true
			case a.service == service && field == "name" && r.name != "":
				set[r.name] = true
			case a.service == service && field == "remote" && r.remote != "":
				set[r.remote] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// linkSpan is a row as Zipkin's on-demand dependency query sees it
// (DependencyLinkV2SpanIterator).
type linkSpan struct {
	id, parentID        string
	kind, local, remote string
	isError             bool
}

func toLinkSpan(r *spanRow) linkSpan {
	by := map[string]string{}
	isError := false
	for _, a := range r.anns {
		switch a.key {
		case "lc", "cs", "ca", "sr", "sa", "ma", "mr", "ms":
			by[a.key] = a.service
		case "error":
			isError = isError || a.aType == 6
		}
	}
	ca := by["ca"]
	if ca == "" {
		ca = by["cs"]
	}
	if by["sa"] != "" && by["sa"] == ca {
		ca = "" // Finagle labels both sides of a socket alike
	}
	s := linkSpan{id: r.id, parentID: r.parentID, isError: isError}
	switch {
	case by["sr"] != "":
		s.kind, s.local, s.remote = "SERVER", by["sr"], ca
	case by["sa"] != "":
		s.local, s.remote = ca, by["sa"]
		if s.local == "" {
			s.local = by["lc"]
		}
		if by["cs"] != "" {
			s.kind = "CLIENT"
		}
	case by["cs"] != "":
		s.kind, s.local = "SERVER", ca
	case by["mr"] != "":
		s.kind, s.local, s.remote = "CONSUMER", by["mr"], by["ma"]
	case by["ms"] != "":
		s.kind, s.local, s.remote = "PRODUCER", by["ms"], by["ma"]
	}
	return s
}

// links computes dependency links on demand as Zipkin's MySQL store does:
// every trace with a row whose start_ts is in [begin, end] is linked whole
// by DependencyLinker (reference §3, Dependencies).
func links(spans []Span, begin, end int64) []Link {
	byTrace := map[string][]*spanRow{}
	inWindow := map[string]bool{}
	for _, r := range rows(spans) {
		byTrace[r.traceID] = append(byTrace[r.traceID], r)
		if r.startTs != 0 && r.startTs >= begin && r.startTs <= end {
			inWindow[r.traceID] = true
		}
	}
	type pair struct{ parent, child string }
	counts := map[pair]*Link{}
	add := func(parent, child string, isErr bool) {
		l := counts[pair{parent, child}]
		if l == nil {
			l = &Link{Parent: parent, Child: child}
			counts[pair{parent, child}] = l
		}
		l.CallCount++
		if isErr {
			l.ErrorCount++
		}
	}
	for tid := range inWindow {
		trace := map[string]linkSpan{}
		children := map[string]int{}
		for _, r := range byTrace[tid] {
			trace[r.id] = toLinkSpan(r)
		}
		for _, s := range trace {
			if _, ok := trace[s.parentID]; ok {
				children[s.parentID]++
			}
		}
		for _, s := range trace {
			if s.kind == "CLIENT" && children[s.id] > 0 {
				continue // prefer the server's view of the call
			}
			kind := s.kind
			if kind == "" {
				if s.local == "" || s.remote == "" {
					continue
				}
				kind = "CLIENT"
			}
			_, hasParent := trace[s.parentID]
			var parent, child string
			switch kind {
			case "SERVER", "CONSUMER":
				child, parent = s.local, s.remote
				if s.parentID == "" && parent == "" {
					continue // the root server: nobody called it that we know of
				}
			case "CLIENT", "PRODUCER":
				parent, child = s.local, s.remote
			}
			if kind == "PRODUCER" || kind == "CONSUMER" {
				if parent != "" && child != "" {
					add(parent, child, s.isError)
				}
				continue
			}
			// The nearest ancestor with a kind: local spans may sit between.
			var ancestor *linkSpan
			p, ok := trace[s.parentID], hasParent
			for steps := 0; ok && steps < len(trace); p, ok = trace[p.parentID] {
				steps++ // parent cycles end here
				if p.kind != "" {
					ancestor = &p
					break
				}
			}
			if ancestor != nil && ancestor.local != "" {
				if kind == "CLIENT" && s.local != "" && ancestor.local != s.local {
					add(ancestor.local, s.local, false)
				}
				if kind == "SERVER" && parent == "" {
					parent = ancestor.local
				}
			}
			if parent != "" && child != "" {
				add(parent, child, s.isError)
			}
		}
	}
	out := make([]Link, 0, len(counts))
	for _, l := range counts {
		out = append(out, *l)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Parent < out[j].Parent || out[i].Parent == out[j].Parent && out[i].Child < out[j].Child
	})
	return out
}

// parseAnnotationQuery splits Zipkin's annotationQuery ("error and
// http.method=GET") into terms: key → value, "" for key-only terms.
func parseAnnotationQuery(aq string) map[string]string {
	terms := map[string]string{}
	for i, t := range strings.Split(aq, " and ") {
		if i == 100 {
			break
		}
		k, v, hasEq := strings.Cut(t, "=")
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		if hasEq {
			terms[k] = strings.TrimSpace(v)
		} else if _, ok := terms[k]; !ok {
			terms[k] = ""
		}
	}
	return terms
}
