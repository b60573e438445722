package uitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FakeAPI is a small in-memory stand-in for the Zipkin /api/v2 query and
// collector endpoints, for testing the viewer before (or without) the real
// server. It implements only what the viewer uses, and answers as Zipkin's
// MySQL store does (reference zipkin.md §2–§3; see fakestore.go): spans are
// kept as that store's rows, one per trace and span ID (a client and a
// server sharing an ID share a row); every search condition binds to one
// row and one local service; a row without a timestamp (or without any
// annotation row) never qualifies a trace; traces come newest first by the
// latest start of their matching rows; dependency links are Zipkin's
// DependencyLinker over those rows. GET trace/{id} returns the spans as
// posted. It is not a Zipkin server: no validation beyond what the checks
// need, no proto or v1 input.
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
		writeJSON(w, names(spans, "", ""))
	case route == "spans" || route == "remoteServices":
		name := strings.ToLower(q.Get("serviceName"))
		if name == "" {
			http.Error(w, "serviceName is required", http.StatusBadRequest)
			return
		}
		field := "name"
		if route == "remoteServices" {
			field = "remote"
		}
		writeJSON(w, names(spans, name, field))
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
		writeJSON(w, links(spans, (endTs-lookback)*1000, endTs*1000))
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

func byTrace(spans []Span) map[string][]Span {
	m := map[string][]Span{}
	for _, s := range spans {
		m[s.TraceID] = append(m[s.TraceID], s)
	}
	return m
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
	q2 := &query{
		service:     strings.ToLower(get("serviceName")),
		remote:      strings.ToLower(get("remoteServiceName")),
		name:        strings.ToLower(get("spanName")),
		minDuration: minD,
		maxDuration: maxD,
		terms:       parseAnnotationQuery(get("annotationQuery")),
		begin:       (endTs - lookback) * 1000,
		end:         endTs * 1000,
		limit:       limit,
	}
	if q2.name == "all" {
		q2.name = ""
	}
	traces := byTrace(spans)
	out := [][]Span{}
	for _, id := range search(spans, q2) {
		out = append(out, traces[id])
	}
	writeJSON(w, out)
}
