package uitest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
)

// Endpoint is a Zipkin JSON v2 endpoint.
type Endpoint struct {
	ServiceName string `json:"serviceName,omitempty"`
	IPv4        string `json:"ipv4,omitempty"`
	Port        int    `json:"port,omitempty"`
}

// Annotation is a Zipkin JSON v2 annotation (timestamp in epoch µs).
type Annotation struct {
	Timestamp int64  `json:"timestamp"`
	Value     string `json:"value"`
}

// Span is a Zipkin JSON v2 span, as the checks post it and the fake API
// stores it.
type Span struct {
	TraceID        string            `json:"traceId"`
	ParentID       string            `json:"parentId,omitempty"`
	ID             string            `json:"id"`
	Kind           string            `json:"kind,omitempty"`
	Name           string            `json:"name,omitempty"`
	Timestamp      int64             `json:"timestamp,omitempty"`
	Duration       int64             `json:"duration,omitempty"`
	LocalEndpoint  *Endpoint         `json:"localEndpoint,omitempty"`
	RemoteEndpoint *Endpoint         `json:"remoteEndpoint,omitempty"`
	Annotations    []Annotation      `json:"annotations,omitempty"`
	Tags           map[string]string `json:"tags,omitempty"`
	Debug          bool              `json:"debug,omitempty"`
	Shared         bool              `json:"shared,omitempty"`
}

// XSSValue is the tag value the checks post to prove tags are shown as text.
const XSSValue = `<img src=x onerror=alert(1)>`

// Link is one expected dependency link.
type Link struct {
	Parent     string `json:"parent"`
	Child      string `json:"child"`
	CallCount  int    `json:"callCount"`
	ErrorCount int    `json:"errorCount,omitempty"`
}

// fixtures is the data the checks post: one messy trace, three plain ones
// and one 2,000-span trace, all timestamped within the last few minutes so
// a one-hour lookback ending now finds them.
type fixtures struct {
	messy  []Span   // trace with shared IDs, an orphan, missing times, clock skew, an error, an XSS tag
	simple [][]Span // three frontend → backend traces, newest last
	big    []Span   // 2,000 local spans

	// IDs of interesting spans in messy.
	root, rpc, query, orphan, noDuration, noTimestamp string

	links []Link // the dependency links all of the above produce
}

const bigSpans = 2000

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (it crashes the program instead)
	b[0] |= 0x10           // never all zeros, never a short ID that would be padded
	return hex.EncodeToString(b[:])
}

func ep(service, ip string) *Endpoint { return &Endpoint{ServiceName: service, IPv4: ip} }

func newFixtures(now time.Time) *fixtures {
	f := &fixtures{}
	us := func(d time.Duration) int64 { return now.Add(d).UnixMicro() }
	ms := int64(1000)
	frontend := ep("frontend", "10.0.0.1")
	backend := ep("backend", "10.0.0.2")
	mysql := &Endpoint{ServiceName: "mysql", IPv4: "10.0.0.3", Port: 3306}

	// The messy trace, 4 minutes ago. backend's clock runs 80ms ahead.
	tid := randomID()
	t0 := us(-4 * time.Minute)
	skew := 80 * ms
	f.root, f.rpc, f.query = randomID(), randomID(), randomID()
	f.orphan, f.noDuration, f.noTimestamp = randomID(), randomID(), randomID()
	serialize := randomID()
	f.messy = []Span{
		{TraceID: tid, ID: f.root, Kind: "SERVER", Name: "get /checkout", Timestamp: t0, Duration: 120 * ms,
			LocalEndpoint: frontend, Tags: map[string]string{"http.method": "GET", "http.path": "/checkout"}},
		// Brave's default: client and server share one span ID.
		{TraceID: tid, ParentID: f.root, ID: f.rpc, Kind: "CLIENT", Name: "get /cart", Timestamp: t0 + 5*ms, Duration: 60 * ms,
			LocalEndpoint: frontend, RemoteEndpoint: ep("backend", "10.0.0.2"), Tags: map[string]string{"http.path": "/cart"}},
		{TraceID: tid, ParentID: f.root, ID: f.rpc, Kind: "SERVER", Name: "get /cart", Timestamp: t0 + 10*ms + skew, Duration: 50 * ms,
			LocalEndpoint: backend, Shared: true,
			Annotations: []Annotation{{Timestamp: t0 + 12*ms + skew, Value: "wr"}},
			Tags:        map[string]string{"http.status_code": "200", "user.comment": XSSValue}},
		{TraceID: tid, ParentID: f.rpc, ID: f.query, Kind: "CLIENT", Name: "select cart", Timestamp: t0 + 15*ms + skew, Duration: 20 * ms,
			LocalEndpoint: backend, RemoteEndpoint: mysql,
			Tags: map[string]string{"error": "Deadlock found when trying to get lock", "sql.query": "SELECT * FROM cart WHERE id = ?"}},
		{TraceID: tid, ParentID: f.rpc, ID: serialize, Name: "serialize <b>cart</b>", Timestamp: t0 + 40*ms + skew, Duration: 5 * ms,
			LocalEndpoint: backend},
		// A local span with a timestamp and no duration.
		{TraceID: tid, ParentID: f.root, ID: f.noDuration, Name: "cache lookup", Timestamp: t0 + 1*ms, LocalEndpoint: frontend},
		// A span with neither timestamp nor duration.
		{TraceID: tid, ParentID: f.root, ID: f.noTimestamp, Name: "render", LocalEndpoint: frontend},
		// Its parent was never reported.
		{TraceID: tid, ParentID: randomID(), ID: f.orphan, Name: "async audit", Timestamp: t0 + 70*ms, Duration: 30 * ms,
			LocalEndpoint: frontend},
	}

	// Three plain traces, 3, 2 and 1 minutes ago, of 200, 50 and 80ms.
	durations := []int64{200 * ms, 50 * ms, 80 * ms}
	for i, d := range durations {
		tid := randomID()
		start := us(time.Duration(i-3) * time.Minute)
		root, client, server := randomID(), randomID(), randomID()
		tr := []Span{
			{TraceID: tid, ID: root, Kind: "SERVER", Name: "get /home", Timestamp: start, Duration: d, LocalEndpoint: frontend},
			{TraceID: tid, ParentID: root, ID: client, Kind: "CLIENT", Name: "get /profile", Timestamp: start + 2*ms, Duration: d - 4*ms,
				LocalEndpoint: frontend, RemoteEndpoint: ep("backend", "")},
			{TraceID: tid, ParentID: client, ID: server, Kind: "SERVER", Name: "get /profile", Timestamp: start + 3*ms, Duration: d - 6*ms,
				LocalEndpoint: backend},
		}
		if i == 1 {
			tr[2].Tags = map[string]string{"error": "500", "http.status_code": "500"}
		}
		f.simple = append(f.simple, tr)
	}

	// The big trace, 30 seconds ago: a 4-ary tree of local spans over 2s, each
	// child inside its parent's interval.
	tid = randomID()
	type iv struct {
		id         string
		start, dur int64
	}
	services := []string{"bulk-api", "bulk-worker", "bulk-cache", "bulk-store"}
	rootIV := iv{randomID(), us(-30 * time.Second), 2_000_000}
	f.big = append(f.big, Span{TraceID: tid, ID: rootIV.id, Name: "bulk load", Timestamp: rootIV.start, Duration: rootIV.dur,
		LocalEndpoint: ep(services[0], "10.0.1.1")})
	queue := []iv{rootIV}
	for len(f.big) < bigSpans {
		p := queue[0]
		queue = queue[1:]
		slot := p.dur / 4
		for k := int64(0); k < 4 && len(f.big) < bigSpans; k++ {
			c := iv{randomID(), p.start + k*slot + slot/10, slot * 8 / 10}
			if c.dur < 1 {
				c.dur = 1
			}
			n := len(f.big)
			f.big = append(f.big, Span{TraceID: tid, ParentID: p.id, ID: c.id, Name: fmt.Sprintf("step %d", n),
				Timestamp: c.start, Duration: c.dur, LocalEndpoint: ep(services[n%len(services)], fmt.Sprintf("10.0.1.%d", 1+n%len(services)))})
			queue = append(queue, c)
		}
	}

	// What Zipkin's dependency linker makes of it: the shared server half
	// and the three separate servers each give frontend → backend (one with
	// an error), the failing query gives backend → mysql. Local spans and
	// root servers without a remote endpoint give nothing.
	f.links = []Link{
		{Parent: "backend", Child: "mysql", CallCount: 1, ErrorCount: 1},
		{Parent: "frontend", Child: "backend", CallCount: 4, ErrorCount: 1},
	}
	return f
}

func (f *fixtures) all() [][]Span {
	out := [][]Span{f.messy}
	out = append(out, f.simple...)
	return append(out, f.big)
}

// expectedParentKeys gives, for each span of a trace, the row key the viewer
// must draw it under and its parent's key ("" at the top level): a shared
// server half hangs under its client ("<id>"), its own key is "<id>~s";
// children of a shared span ID hang under the server half on their service.
func expectedParentKeys(spans []Span) map[string]string {
	client := map[string]bool{}
	sharedBy := map[string]map[string]bool{} // id → services of shared halves
	for _, s := range spans {
		if s.Shared {
			if sharedBy[s.ID] == nil {
				sharedBy[s.ID] = map[string]bool{}
			}
			sharedBy[s.ID][s.LocalEndpoint.ServiceName] = true
		} else {
			client[s.ID] = true
		}
	}
	out := map[string]string{}
	for _, s := range spans {
		key := s.ID
		if s.Shared {
			key += "~s"
		}
		switch {
		case s.Shared && client[s.ID]:
			out[key] = s.ID
		case s.ParentID == "":
			out[key] = ""
		case sharedBy[s.ParentID][s.LocalEndpoint.ServiceName]:
			out[key] = s.ParentID + "~s"
		case client[s.ParentID]:
			out[key] = s.ParentID
		default:
			out[key] = "" // orphan: top level
		}
	}
	return out
}
