package main

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
)

// The workload: every POST is one trace of SpansPerTrace spans in Zipkin's
// JSON v2, as a traced request through a few services looks. Each trace has
// a unique 128-bit trace ID; span IDs are unique within it. Services,
// span names, tags and annotations come from fixed vocabularies so that the
// query mix (services, span names, traces by service and by tag) finds data.
const (
	SpansPerTrace = 10
	NumServices   = 20
	NumSpanNames  = 200
)

// ServiceName returns the i-th service name of the vocabulary.
func ServiceName(i int) string { return fmt.Sprintf("svc-%02d", i%NumServices) }

// SpanName returns the i-th span name of the vocabulary.
func SpanName(i int) string {
	verbs := [...]string{"get", "post", "put", "delete"}
	return fmt.Sprintf("%s /api/resource-%03d", verbs[i%len(verbs)], i%NumSpanNames)
}

// traceIDs hands out 128-bit trace IDs: a random high half per process
// and a counter in the low half, so IDs never repeat within a run and
// practically never across runs.
type traceIDs struct {
	high uint64
	n    atomic.Uint64
}

func newTraceIDs() *traceIDs { return &traceIDs{high: rand.Uint64() | 1} }

func (t *traceIDs) next() (high, low uint64) { return t.high, t.n.Add(1) }

// idHex writes a 64-bit ID as 16 lower-case hex digits.
func idHex(dst []byte, v uint64) []byte {
	var b [8]byte
	for i := 7; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
	n := len(dst)
	dst = append(dst, make([]byte, 16)...)
	hex.Encode(dst[n:], b[:])
	return dst
}

// traceWriter receives the variable parts of a trace body: the trace ID,
// span IDs and timestamps. The Go generator writes real values; the Lua
// template writer writes markers that the wrk script fills in.
type traceWriter interface {
	traceID(b []byte) []byte
	spanID(b []byte, i int) []byte
	timestamp(b []byte, offsetMicros int64) []byte
}

// realIDs writes actual IDs and timestamps.
type realIDs struct {
	high, low uint64
	baseMicro int64
}

func (r *realIDs) traceID(b []byte) []byte { return idHex(idHex(b, r.high), r.low) }
func (r *realIDs) spanID(b []byte, i int) []byte {
	return idHex(b, r.low<<8|uint64(i+1))
}
func (r *realIDs) timestamp(b []byte, off int64) []byte {
	return strconv.AppendInt(b, r.baseMicro+off, 10)
}

// Markers of the Lua template: \x00 kind arg \x00.
type markerIDs struct{}

func (markerIDs) traceID(b []byte) []byte { return append(b, "\x00T\x00"...) }
func (markerIDs) spanID(b []byte, i int) []byte {
	return fmt.Appendf(b, "\x00S%d\x00", i+1)
}
func (markerIDs) timestamp(b []byte, off int64) []byte {
	return fmt.Appendf(b, "\x00U%d\x00", off)
}

// trace is one generated trace: what both encodings (JSON v2 here,
// OTLP protobuf in otlpenc.go) write, apart from the IDs and timestamps a
// traceWriter supplies.
type trace struct {
	spans  [SpansPerTrace]traceSpan
	failed bool   // the entry span carries error="internal server error"
	status string // http.status_code of every span: "200", or "500" when failed
}

// traceSpan is one span of a trace.
type traceSpan struct {
	parent int    // index of the parent span, -1 for the root
	kind   string // "SERVER" or "CLIENT"
	name   string // from SpanName
	off    int64  // start, µs after the trace's base time
	dur    int64  // µs
	svc    int    // local service (ServiceName)
	// remote is the remote service of a CLIENT span: the callee's index in
	// the vocabulary, or remoteMySQL; -1 for SERVER spans.
	remote int
}

const remoteMySQL = -2

// method and path of a span name ("get /api/resource-001" → "GET",
// "/api/resource-001").
func (s *traceSpan) method() string { return strings.ToUpper(strings.SplitN(s.name, " ", 2)[0]) }
func (s *traceSpan) path() string   { return strings.SplitN(s.name, " ", 2)[1] }

// newTrace draws one trace from rng.
//
// Shape: span 0 is the SERVER span of the entry service; spans 1..8 are
// four CLIENT→SERVER hops (client in the caller, server in the callee,
// each its own span ID as v2 instrumentation reports them); span 9 is a
// CLIENT call from the entry service to a database (remote service
// "mysql", no server side). Every span has tags (http.method, http.path,
// http.status_code, and "error" on failed traces; sql.query on the
// database call) and one annotation.
func newTrace(rng *rand.Rand) *trace {
	t := &trace{}
	entry := rng.IntN(NumServices)
	var svc [SpansPerTrace]int
	var parent [SpansPerTrace]int
	svc[0], parent[0] = entry, -1
	caller := 0
	for hop := 0; hop < 4; hop++ {
		c, s := 1+2*hop, 2+2*hop
		callee := (svc[caller] + 1 + rng.IntN(NumServices-1)) % NumServices
		svc[c], parent[c] = svc[caller], caller
		svc[s], parent[s] = callee, c
		if rng.IntN(2) == 0 {
			caller = s // deeper call chain
		}
	}
	svc[9], parent[9] = entry, 0
	t.failed = rng.IntN(100) == 0
	t.status = "200"
	if t.failed {
		t.status = "500"
	}
	total := int64(20_000 + rng.IntN(200_000)) // µs
	for i := range t.spans {
		s := &t.spans[i]
		s.parent, s.svc, s.remote = parent[i], svc[i], -1
		s.kind = "SERVER"
		if i == 9 || i%2 == 1 {
			s.kind = "CLIENT"
		}
		s.name = SpanName(rng.IntN(NumSpanNames))
		s.off = int64(i) * total / (4 * SpansPerTrace)
		s.dur = max(total-2*s.off, 100)
		switch {
		case i == 9:
			s.remote = remoteMySQL
		case s.kind == "CLIENT":
			s.remote = svc[i+1]
		}
	}
	return t
}

// Values of the database call (span 9).
const (
	sqlQuery        = "SELECT * FROM items WHERE id = ?"
	errorMessage    = "internal server error"
	annotationSQL   = "query.sent"
	annotationEntry = "handler.start"
)

// appendTrace appends one trace of SpansPerTrace spans (newTrace) as a
// JSON v2 array; w supplies IDs and timestamps.
func appendTrace(b []byte, rng *rand.Rand, w traceWriter) []byte {
	return appendJSONTrace(b, newTrace(rng), w, false)
}

// appendOTelJSONTrace appends the trace of appendTrace as OpenTelemetry's
// deprecated Zipkin exporter writes it when the service sends the OTLP
// payload's spans (otlpenc.go) through that exporter: the same JSON v2
// with the tags that exporter adds, service.name on every span (resource
// attributes become tags), peer.service on CLIENT spans (the attribute that
// names the remote service) and otel.status_code=ERROR on a failed entry
// span, and so the same tags as the OTLP payload stores.
func appendOTelJSONTrace(b []byte, rng *rand.Rand, w traceWriter) []byte {
	return appendJSONTrace(b, newTrace(rng), w, true)
}

func appendJSONTrace(b []byte, t *trace, w traceWriter, otelTags bool) []byte {
	b = append(b, '[')
	for i := range t.spans {
		s := &t.spans[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"traceId":"`...)
		b = w.traceID(b)
		b = append(b, `","id":"`...)
		b = w.spanID(b, i)
		b = append(b, '"')
		if s.parent >= 0 {
			b = append(b, `,"parentId":"`...)
			b = w.spanID(b, s.parent)
			b = append(b, '"')
		}
		b = append(b, `,"kind":"`...)
		b = append(b, s.kind...)
		b = append(b, `","name":"`...)
		b = append(b, s.name...)
		b = append(b, `","timestamp":`...)
		b = w.timestamp(b, s.off)
		b = append(b, `,"duration":`...)
		b = strconv.AppendInt(b, s.dur, 10)
		b = append(b, `,"localEndpoint":{"serviceName":"`...)
		b = append(b, ServiceName(s.svc)...)
		b = fmt.Appendf(b, `","ipv4":"10.0.%d.%d","port":8080}`, s.svc, 1+i)
		switch {
		case s.remote == remoteMySQL:
			b = append(b, `,"remoteEndpoint":{"serviceName":"mysql","ipv4":"10.1.0.1","port":3306}`...)
		case s.remote >= 0:
			b = fmt.Appendf(b, `,"remoteEndpoint":{"serviceName":"%s","ipv4":"10.0.%d.1","port":8080}`,
				ServiceName(s.remote), s.remote)
		}
		b = append(b, `,"annotations":[{"timestamp":`...)
		b = w.timestamp(b, s.off+s.dur/2)
		if s.remote == remoteMySQL {
			b = append(b, `,"value":"`+annotationSQL+`"}]`...)
		} else {
			b = append(b, `,"value":"`+annotationEntry+`"}]`...)
		}
		b = append(b, `,"tags":{"http.method":"`...)
		b = append(b, s.method()...)
		b = append(b, `","http.path":"`...)
		b = append(b, s.path()...)
		b = append(b, `","http.status_code":"`...)
		b = append(b, t.status...)
		b = append(b, '"')
		if t.failed && i == 0 {
			b = append(b, `,"error":"`+errorMessage+`"`...)
		}
		if s.remote == remoteMySQL {
			b = append(b, `,"sql.query":"`+sqlQuery+`"`...)
		}
		if otelTags {
			b = append(b, `,"service.name":"`...)
			b = append(b, ServiceName(s.svc)...)
			b = append(b, '"')
			switch {
			case s.remote == remoteMySQL:
				b = append(b, `,"peer.service":"mysql"`...)
			case s.remote >= 0:
				b = append(b, `,"peer.service":"`...)
				b = append(b, ServiceName(s.remote)...)
				b = append(b, '"')
			}
			if t.failed && i == 0 {
				b = append(b, `,"otel.status_code":"ERROR"`...)
			}
		}
		b = append(b, `}}`...)
	}
	return append(b, ']')
}

// luaScript returns a wrk script that POSTs templates traces to
// /api/v2/spans, each with a unique trace ID (a random 64-bit prefix per
// wrk thread and a counter) and timestamps from the wall clock. Its done
// hook prints one line "WRKJSON {…}" with the run's summary, which
// parseWrk reads.
func luaScript(templates int, seed uint64) string {
	return luaJSONScript(templates, seed, appendTrace)
}

// luaOTelJSONScript is luaScript with the traces of appendOTelJSONTrace.
func luaOTelJSONScript(templates int, seed uint64) string {
	return luaJSONScript(templates, seed, appendOTelJSONTrace)
}

func luaJSONScript(templates int, seed uint64, appendTrace func([]byte, *rand.Rand, traceWriter) []byte) string {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var sb strings.Builder
	sb.WriteString(luaHead)
	sb.WriteString("local templates = {\n")
	for t := 0; t < templates; t++ {
		body := appendTrace(nil, rng, markerIDs{})
		sb.WriteString("  {")
		for i, part := range bytes.Split(body, []byte{0}) {
			if i%2 == 0 {
				if len(part) > 0 {
					fmt.Fprintf(&sb, "%q,", part)
				}
				continue
			}
			switch part[0] {
			case 'T':
				sb.WriteString("{1},")
			case 'S':
				fmt.Fprintf(&sb, "{2,%s},", part[1:])
			case 'U':
				fmt.Fprintf(&sb, "{3,%s},", part[1:])
			}
		}
		sb.WriteString("},\n")
	}
	sb.WriteString("}\n")
	sb.WriteString(luaTail)
	return sb.String()
}

// The wrk script around the templates. Go's %q quoting is valid Lua for
// the ASCII bodies written here.
const luaHead = `-- generated by bench/load: Zipkin JSON v2 traces with unique 128-bit IDs
local counter = 0
local prefix = ""
local tid = ""
local threads = {}
`

const luaTail = `
function setup(thread)
  thread:set("tn", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  math.randomseed(os.time() * 1000 + (tn or 0))
  prefix = string.format("%08x%08x", math.random(0, 2147483647), math.random(0, 2147483647) + (tn or 0))
end

local headers = {["Content-Type"] = "application/json"}

function request()
  counter = counter + 1
  tid = prefix .. string.format("%08x%08x", tn or 0, counter)
  local now = os.time() * 1000000 + (counter % 1000000)
  local t = templates[(counter % #templates) + 1]
  local out = {}
  for i = 1, #t do
    local p = t[i]
    if type(p) == "string" then
      out[i] = p
    elseif p[1] == 1 then
      out[i] = tid
    elseif p[1] == 2 then
      out[i] = string.format("%08x%08x", counter, p[2])
    else
      out[i] = string.format("%.0f", now + p[2])
    end
  end
  return wrk.format("POST", "/api/v2/spans", headers, table.concat(out))
end
` + luaDone
