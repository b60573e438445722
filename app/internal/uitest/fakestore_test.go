package uitest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func flatten(traces [][]Span) []Span {
	var out []Span
	for _, tr := range traces {
		out = append(out, tr...)
	}
	return out
}

func hourQuery(now time.Time) *query {
	end := now.Add(time.Minute).UnixMicro()
	return &query{terms: map[string]string{}, begin: end - time.Hour.Microseconds(), end: end, limit: 10}
}

// The fake answers the fixtures as Zipkin's MySQL store does (reference
// zipkin.md §3): these are the results the browser checks expect from both.
func TestFakeStoreFixtures(t *testing.T) {
	now := time.Now()
	fx := newFixtures(now)
	spans := flatten(fx.all())

	q := hourQuery(now)
	q.service = "frontend"
	want := []string{fx.simple[2][0].TraceID, fx.simple[1][0].TraceID, fx.simple[0][0].TraceID, fx.messy[0].TraceID}
	if got := search(spans, q); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("serviceName=frontend: got %v, want %v", got, want)
	}

	q = hourQuery(now)
	if got := links(spans, q.begin, q.end); fmt.Sprint(got) != fmt.Sprint(fx.links) {
		t.Errorf("links: got %+v, want %+v", got, fx.links)
	}
	if got := names(spans, "", ""); strings.Join(got, ",") != "backend,bulk-api,bulk-cache,bulk-store,bulk-worker,frontend" {
		t.Errorf("services: %v", got)
	}
	if got := names(spans, "backend", "remote"); strings.Join(got, ",") != "backend,mysql" {
		// "backend": the shared row's remote service is its client's.
		t.Errorf("remote services of backend: %v", got)
	}
}

// A client and a server sharing a span ID are one row: the tag of one side
// is not found under the other side's service, while the row's duration is
// the client's (a shared span writes none) and its start the client's.
func TestFakeStoreSharedRow(t *testing.T) {
	now := time.Now()
	fx := newFixtures(now)
	spans := fx.messy

	q := hourQuery(now)
	q.service, q.terms = "backend", map[string]string{"user.comment": XSSValue}
	if got := search(spans, q); len(got) != 1 {
		t.Errorf("backend + its own tag: got %v, want the messy trace", got)
	}
	q.service = "frontend"
	if got := search(spans, q); len(got) != 0 {
		t.Errorf("frontend + backend's tag: got %v, want nothing (conditions bind to one service)", got)
	}
	q = hourQuery(now)
	q.service, q.minDuration, q.maxDuration = "backend", 55_000, 65_000 // client 60ms, server 50ms
	if got := search(spans, q); len(got) != 1 {
		t.Errorf("backend with the client's duration: got %v, want the messy trace (the row keeps the client's duration)", got)
	}
	q.minDuration, q.maxDuration = 45_000, 52_000
	q.name = "get /cart"
	if got := search(spans, q); len(got) != 0 {
		t.Errorf("backend with the server's own duration: got %v, want nothing (a shared span writes no duration)", got)
	}
}

// A span without a timestamp never qualifies a trace; all conditions bind
// to one row; traces are ordered by their latest matching row.
func TestFakeStoreRules(t *testing.T) {
	now := time.Now()
	us := func(d time.Duration) int64 { return now.Add(d).UnixMicro() }
	a, b := randomID(), randomID()
	untimed := randomID()
	spans := []Span{
		// Trace a: frontend 10 minutes ago, backend 1 minute ago.
		{TraceID: a, ID: a, Name: "old", Timestamp: us(-10 * time.Minute), Duration: 5, LocalEndpoint: ep("frontend", "")},
		{TraceID: a, ParentID: a, ID: randomID(), Name: "new", Timestamp: us(-time.Minute), Duration: 5, LocalEndpoint: ep("backend", ""),
			Tags: map[string]string{"k": "v"}},
		// Trace b: frontend 5 minutes ago.
		{TraceID: b, ID: b, Name: "mid", Timestamp: us(-5 * time.Minute), Duration: 5, LocalEndpoint: ep("frontend", "")},
		// An untimed span only.
		{TraceID: untimed, ID: untimed, Name: "render", LocalEndpoint: ep("frontend", ""), Tags: map[string]string{"k": "v"}},
	}
	q := hourQuery(now)
	q.service = "frontend"
	if got := search(spans, q); strings.Join(got, ",") != b+","+a {
		t.Errorf("frontend: got %v, want [%s %s] (newest by frontend's own rows; the untimed trace never)", got, b, a)
	}
	q = hourQuery(now)
	if got := search(spans, q); strings.Join(got, ",") != a+","+b {
		t.Errorf("any service: got %v, want [%s %s]", got, a, b)
	}
	q.service, q.terms = "frontend", map[string]string{"k": "v"}
	if got := search(spans, q); len(got) != 0 {
		t.Errorf("frontend with backend's tag: got %v, want nothing", got)
	}
	q.service, q.name = "backend", "old"
	q.terms = map[string]string{}
	if got := search(spans, q); len(got) != 0 {
		t.Errorf("backend with frontend's span name: got %v, want nothing", got)
	}
}
