package uitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FakeAPI is a small in-memory stand-in for the Zipkin /api/v2 query and
// collector endpoints, for testing the viewer before (or without) the real
// server. It implements only what the viewer uses, with Zipkin's semantics
// for the fixture data: search conditions bind to one span, traces are
// ordered newest first, and dependency links follow Zipkin's linker for
// client/server pairs (including a shared span ID). It is not a Zipkin
// server: no validation beyond what the checks need, no proto or v1 input.
type FakeAPI struct {
	mu    sync.Mutex
	spans []Span
}

// NewFakeAPI returns an empty FakeAPI. Serve it on a path ending in
// /api/v2/ (for example mux.Handle("/api/v2/", fake)).
func NewFakeAPI() *FakeAPI { return &FakeAPI{} }

// Post stores a JSON v2 list of spans, as POST /api/v2/spans would.
func (f *FakeAPI) Post(body []byte) error {
	var spans []Span
	if err := json.Unmarshal(body, &spans); err != nil {
		return fmt.Errorf("fake zipkin API: decoding posted spans: %w", err)
	}
	for i := range spans {
		spans[i].Name = strings.ToLower(spans[i].Name)
		for _, e := range []*Endpoint{spans[i].LocalEndpoint, spans[i].RemoteEndpoint} {
			if e != nil {
				e.ServiceName = strings.ToLower(e.ServiceName)
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.spans = append(f.spans, spans...)
	return nil
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// ServeHTTP answers GET services, spans, remoteServices, traces,
// trace/{id}, dependencies, autocompleteKeys and POST spans under any path
// prefix ending in /api/v2.
func (f *FakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := strings.Index(r.URL.Path, "/api/v2/")
	if i < 0 {
		http.NotFound(w, r)
		return
	}
	route := r.URL.Path[i+len("/api/v2/"):]
	q := r.URL.Query()
	if r.Method == http.MethodPost && route == "spans" {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = f.Post(body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	f.mu.Lock()
	spans := append([]Span(nil), f.spans...)
	f.mu.Unlock()

	switch {
	case route == "services":
		writeJSON(w, distinct(spans, func(s Span) string { return svc(s.LocalEndpoint) }))
	case route == "spans" || route == "remoteServices":
		name := strings.ToLower(q.Get("serviceName"))
		if name == "" {
			http.Error(w, "serviceName is required", http.StatusBadRequest)
			return
		}
		writeJSON(w, distinct(spans, func(s Span) string {
			if svc(s.LocalEndpoint) != name {
				return ""
			}
			if route == "spans" {
				return s.Name
			}
			return svc(s.RemoteEndpoint)
		}))
	case route == "autocompleteKeys":
		writeJSON(w, []string{})
	case strings.HasPrefix(route, "trace/"):
		id := strings.TrimSpace(strings.TrimPrefix(route, "trace/"))
		var out []Span
		for _, s := range spans {
			if s.TraceID == id {
				out = append(out, s)
			}
		}
		if len(out) == 0 {
			http.Error(w, id+" not found", http.StatusNotFound)
			return
		}
		writeJSON(w, out)
	case route == "traces":
		f.serveTraces(w, q, spans)
	case route == "dependencies":
		endTs, err := strconv.ParseInt(q.Get("endTs"), 10, 64)
		if err != nil || endTs <= 0 {
			http.Error(w, "endTs <= 0", http.StatusBadRequest)
			return
		}
		lookback := int64(86400000)
		if v := q.Get("lookback"); v != "" {
			lookback, _ = strconv.ParseInt(v, 10, 64)
		}
		writeJSON(w, links(byTrace(spans), (endTs-lookback)*1000, endTs*1000))
	default:
		http.NotFound(w, r)
	}
}

func svc(e *Endpoint) string {
	if e == nil {
		return ""
	}
	return e.ServiceName
}

func distinct(spans []Span, f func(Span) string) []string {
	set := map[string]bool{}
	for _, s := range spans {
		if v := f(s); v != "" {
			set[v] = true
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

func byTrace(spans []Span) map[string][]Span {
	m := map[string][]Span{}
	for _, s := range spans {
		m[s.TraceID] = append(m[s.TraceID], s)
	}
	return m
}

func inWindow(trace []Span, begin, end int64) bool {
	for _, s := range trace {
		if s.Timestamp != 0 && s.Timestamp >= begin && s.Timestamp <= end {
			return true
		}
	}
	return false
}

func (f *FakeAPI) serveTraces(w http.ResponseWriter, q map[string][]string, spans []Span) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return strings.TrimSpace(v[0])
		}
		return ""
	}
	num := func(k string, def int64) (int64, error) {
		v := get(k)
		if v == "" {
			return def, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%s <= 0", k)
		}
		return n, nil
	}
	endTs, err1 := num("endTs", time.Now().UnixMilli())
	lookback, err2 := num("lookback", 86400000)
	limit, err3 := num("limit", 10)
	minD, err4 := num("minDuration", 0)
	maxD, err5 := num("maxDuration", 0)
	for _, err := range []error{err1, err2, err3, err4, err5} {
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	service := strings.ToLower(get("serviceName"))
	remote := strings.ToLower(get("remoteServiceName"))
	name := strings.ToLower(get("spanName"))
	if name == "all" {
		name = ""
	}
	terms := map[string]string{}
	if aq := get("annotationQuery"); aq != "" {
		for _, t := range strings.Split(aq, " and ") {
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
	}
	begin, end := (endTs-lookback)*1000, endTs*1000
	match := func(s Span) bool {
		if s.Timestamp == 0 || s.Timestamp < begin || s.Timestamp > end {
			return false
		}
		if service != "" && svc(s.LocalEndpoint) != service ||
			remote != "" && svc(s.RemoteEndpoint) != remote ||
			name != "" && s.Name != name ||
			minD > 0 && s.Duration < minD ||
			maxD > 0 && s.Duration > maxD {
			return false
		}
		for k, v := range terms {
			tv, isTag := s.Tags[k]
			if v != "" {
				if !isTag || tv != v {
					return false
				}
				continue
			}
			isAnn := false
			for _, a := range s.Annotations {
				isAnn = isAnn || a.Value == k
			}
			if !isTag && !isAnn {
				return false
			}
		}
		return true
	}
	type hit struct {
		spans  []Span
		latest int64
	}
	var hits []hit
	for _, tr := range byTrace(spans) {
		ok := false
		var latest int64
		for _, s := range tr {
			ok = ok || match(s)
			latest = max(latest, s.Timestamp)
		}
		if ok {
			hits = append(hits, hit{tr, latest})
		}
	}
	sort.Slice(hits, func(i, j int) bool { return hits[i].latest > hits[j].latest })
	out := [][]Span{}
	for i := 0; i < len(hits) && int64(i) < limit; i++ {
		out = append(out, hits[i].spans)
	}
	writeJSON(w, out)
}

// links derives dependency links the way Zipkin's linker does for RPCs: a
// SERVER span links its caller (remote endpoint, else the nearest ancestor's
// service) to itself; a CLIENT span with a remote service links itself to it
// unless a server span reported the same call (shared ID or server child).
func links(traces map[string][]Span, begin, end int64) []Link {
	type pair struct{ parent, child string }
	counts := map[pair]*Link{}
	add := func(parent, child string, isErr bool) {
		if parent == "" || child == "" {
			return
		}
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
	for _, tr := range traces {
		if !inWindow(tr, begin, end) {
			continue
		}
		byID := map[string]Span{} // non-shared spans
		serverFor := map[string]bool{}
		for _, s := range tr {
			if !s.Shared {
				byID[s.ID] = s
			}
		}
		for _, s := range tr {
			if s.Kind == "SERVER" {
				if s.Shared {
					serverFor[s.ID] = true
				} else if p, ok := byID[s.ParentID]; ok && p.Kind == "CLIENT" {
					serverFor[p.ID] = true
				}
			}
		}
		for _, s := range tr {
			_, isErr := s.Tags["error"]
			switch s.Kind {
			case "SERVER":
				caller := svc(s.RemoteEndpoint)
				if caller == "" {
					parentID := s.ParentID
					if s.Shared {
						parentID = s.ID
					}
					p, ok := byID[parentID]
					for steps := 0; ok && caller == "" && steps < len(tr); steps++ {
						if p.Kind != "" {
							caller = svc(p.LocalEndpoint)
						}
						p, ok = byID[p.ParentID]
					}
				}
				if caller != svc(s.LocalEndpoint) {
					add(caller, svc(s.LocalEndpoint), isErr)
				}
			case "CLIENT":
				if !serverFor[s.ID] {
					add(svc(s.LocalEndpoint), svc(s.RemoteEndpoint), isErr)
				}
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
