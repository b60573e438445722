package main

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP/HTTP protobuf payload: the traces of newTrace encoded as an
// opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest, as an
// OpenTelemetry SDK (or a Collector batching several services) sends them
// to POST /v1/traces with Content-Type application/x-protobuf.
//
// The trace is the JSON v2 one, span for span: the same IDs, names, kinds,
// timestamps, durations, parents, the same tags as span attributes, the
// annotation as an event without attributes, the entry span's error as an
// ERROR status with the same message. What OTLP expresses differently:
//
//   - the local service is the resource's service.name: one ResourceSpans
//     per service of the trace, in the order the services first appear;
//     the server also stores service.name as a tag of every span (resource
//     attributes become tags);
//   - a CLIENT span names its remote service with the peer.service
//     attribute, which becomes the remote endpoint's service name and also
//     a tag; OTLP has no attribute for both a remote service name and its
//     address, and none for the local endpoint's address, so neither
//     endpoint carries an IPv4 or port;
//   - a failed entry span also gets otel.status_code=ERROR.
//
// So an OTLP trace stores the JSON trace's 10 spans and 10 annotations
// with 15 more tags (46 instead of 31: service.name on every span,
// peer.service on the 5 CLIENT spans; otel.status_code too on the 1 % of
// failed traces) and no endpoint addresses (TestOTLPTraceMatchesJSON). The
// body has no scope (no otel.scope.name tag). A body is about half the
// size of the JSON one (2.3 KB against 4.6 KB).
//
// The IDs and timestamps are holes in a fixed encoding (IDs are bytes
// fields of fixed length, times fixed64), so that the same encoding serves
// the Go generator, which fills them with real values, and the wrk
// script, which fills them per request.

// Field numbers of the OTLP protos (opentelemetry-proto v1).
const (
	fExportResourceSpans = 1 // ExportTraceServiceRequest.resource_spans
	fRSResource          = 1 // ResourceSpans.resource
	fRSScopeSpans        = 2 // ResourceSpans.scope_spans
	fResourceAttributes  = 1 // Resource.attributes
	fSSSpans             = 2 // ScopeSpans.spans
	fSpanTraceID         = 1
	fSpanSpanID          = 2
	fSpanParentSpanID    = 4
	fSpanName            = 5
	fSpanKind            = 6
	fSpanStart           = 7 // fixed64
	fSpanEnd             = 8 // fixed64
	fSpanAttributes      = 9
	fSpanEvents          = 11
	fSpanStatus          = 15
	fEventTime           = 1 // fixed64
	fEventName           = 2
	fStatusMessage       = 2
	fStatusCode          = 3
	fKVKey               = 1
	fKVValue             = 2
	fAnyString           = 1

	spanKindServer  = 2
	spanKindClient  = 3
	statusCodeError = 2
)

// holeKind is what fills a hole of an encoded trace.
type holeKind uint8

const (
	holeTraceID holeKind = iota + 1 // 16 bytes: trace ID high, low, big-endian
	holeSpanID                      // 8 bytes: the ID of span arg-1 (big-endian)
	holeTime                        // fixed64 little-endian: (base + arg µs) in ns
)

// hole is a place in an encoded body that a value of fixed size fills.
type hole struct {
	off  int
	kind holeKind
	arg  int64 // holeSpanID: span index + 1; holeTime: µs after the base time
}

// pbuf is an encoded protobuf message with holes.
type pbuf struct {
	b     []byte
	holes []hole
}

func (p *pbuf) str(field protowire.Number, s string) {
	p.b = protowire.AppendTag(p.b, field, protowire.BytesType)
	p.b = protowire.AppendString(p.b, s)
}

func (p *pbuf) varint(field protowire.Number, v uint64) {
	p.b = protowire.AppendTag(p.b, field, protowire.VarintType)
	p.b = protowire.AppendVarint(p.b, v)
}

// id appends a bytes field of n bytes to be filled by kind.
func (p *pbuf) id(field protowire.Number, kind holeKind, n int, arg int64) {
	p.b = protowire.AppendTag(p.b, field, protowire.BytesType)
	p.b = protowire.AppendVarint(p.b, uint64(n))
	p.holes = append(p.holes, hole{off: len(p.b), kind: kind, arg: arg})
	p.b = append(p.b, make([]byte, n)...)
}

// time appends a fixed64 field to be filled with the time arg µs after
// the base time.
func (p *pbuf) time(field protowire.Number, arg int64) {
	p.b = protowire.AppendTag(p.b, field, protowire.Fixed64Type)
	p.holes = append(p.holes, hole{off: len(p.b), kind: holeTime, arg: arg})
	p.b = append(p.b, make([]byte, 8)...)
}

// msg appends child as an embedded message.
func (p *pbuf) msg(field protowire.Number, child *pbuf) {
	p.b = protowire.AppendTag(p.b, field, protowire.BytesType)
	p.b = protowire.AppendVarint(p.b, uint64(len(child.b)))
	for _, h := range child.holes {
		h.off += len(p.b)
		p.holes = append(p.holes, h)
	}
	p.b = append(p.b, child.b...)
}

// attr appends a KeyValue with a string value.
func (p *pbuf) attr(field protowire.Number, key, value string) {
	var v, kv pbuf
	v.str(fAnyString, value)
	kv.str(fKVKey, key)
	kv.msg(fKVValue, &v)
	p.msg(field, &kv)
}

// encodeOTLP encodes t as an ExportTraceServiceRequest with holes for the
// IDs and times.
func encodeOTLP(t *trace) *pbuf {
	var req pbuf
	var done [NumServices]bool
	for first := range t.spans {
		svc := t.spans[first].svc
		if done[svc] {
			continue
		}
		done[svc] = true
		var scope pbuf
		for i := range t.spans {
			if s := &t.spans[i]; s.svc == svc {
				sp := encodeOTLPSpan(t, i)
				scope.msg(fSSSpans, sp)
			}
		}
		var res, rs pbuf
		res.attr(fResourceAttributes, "service.name", ServiceName(svc))
		rs.msg(fRSResource, &res)
		rs.msg(fRSScopeSpans, &scope)
		req.msg(fExportResourceSpans, &rs)
	}
	return &req
}

func encodeOTLPSpan(t *trace, i int) *pbuf {
	s := &t.spans[i]
	var sp pbuf
	sp.id(fSpanTraceID, holeTraceID, 16, 0)
	sp.id(fSpanSpanID, holeSpanID, 8, int64(i+1))
	if s.parent >= 0 {
		sp.id(fSpanParentSpanID, holeSpanID, 8, int64(s.parent+1))
	}
	sp.str(fSpanName, s.name)
	kind := uint64(spanKindServer)
	if s.kind == "CLIENT" {
		kind = spanKindClient
	}
	sp.varint(fSpanKind, kind)
	sp.time(fSpanStart, s.off)
	sp.time(fSpanEnd, s.off+s.dur)
	sp.attr(fSpanAttributes, "http.method", s.method())
	sp.attr(fSpanAttributes, "http.path", s.path())
	sp.attr(fSpanAttributes, "http.status_code", t.status)
	switch {
	case s.remote == remoteMySQL:
		sp.attr(fSpanAttributes, "sql.query", sqlQuery)
		sp.attr(fSpanAttributes, "peer.service", "mysql")
	case s.remote >= 0:
		sp.attr(fSpanAttributes, "peer.service", ServiceName(s.remote))
	}
	var ev pbuf
	ev.time(fEventTime, s.off+s.dur/2)
	if s.remote == remoteMySQL {
		ev.str(fEventName, annotationSQL)
	} else {
		ev.str(fEventName, annotationEntry)
	}
	sp.msg(fSpanEvents, &ev)
	if t.failed && i == 0 {
		var st pbuf
		st.str(fStatusMessage, errorMessage)
		st.varint(fStatusCode, statusCodeError)
		sp.msg(fSpanStatus, &st)
	}
	return &sp
}

// fill appends p's body to dst with the holes filled from ids: the trace
// ID, span IDs as appendTrace writes them (low<<8 | index+1) and times in
// nanoseconds from ids.baseMicro.
func (p *pbuf) fill(dst []byte, ids *realIDs) []byte {
	n := len(dst)
	dst = append(dst, p.b...)
	body := dst[n:]
	for _, h := range p.holes {
		switch h.kind {
		case holeTraceID:
			binary.BigEndian.PutUint64(body[h.off:], ids.high)
			binary.BigEndian.PutUint64(body[h.off+8:], ids.low)
		case holeSpanID:
			binary.BigEndian.PutUint64(body[h.off:], ids.low<<8|uint64(h.arg))
		case holeTime:
			binary.LittleEndian.PutUint64(body[h.off:], uint64((ids.baseMicro+h.arg)*1000))
		}
	}
	return dst
}

// appendOTLPTrace appends one trace (newTrace) as an OTLP protobuf body.
func appendOTLPTrace(b []byte, rng *rand.Rand, ids *realIDs) []byte {
	return encodeOTLP(newTrace(rng)).fill(b, ids)
}

// Payloads: what a configuration's load generator sends.
const (
	payloadJSON = "json" // Zipkin JSON v2 to POST /api/v2/spans
	// payloadOTelJSON is the same JSON v2 with the tags OpenTelemetry's
	// Zipkin exporter adds (appendOTelJSONTrace): what a service sent
	// before moving from that exporter to OTLP.
	payloadOTelJSON = "otel-json"
	payloadOTLP     = "otlp" // OTLP/HTTP protobuf to POST /v1/traces
)

// Configuration suffixes: "pool-otlp" is the pool server, on its own
// database, sent OTLP/HTTP protobuf; "pool-otel-json" the pool sent
// payloadOTelJSON.
const (
	otlpSuffix     = "-otlp"
	otelJSONSuffix = "-otel-json"
)

// payloadOf is the payload of a configuration.
func payloadOf(config string) string {
	switch {
	case strings.HasSuffix(config, otlpSuffix):
		return payloadOTLP
	case strings.HasSuffix(config, otelJSONSuffix):
		return payloadOTelJSON
	}
	return payloadJSON
}

// baseConfig is the server configuration of a configuration ("pool-otlp"
// → "pool").
func baseConfig(config string) string {
	return strings.TrimSuffix(strings.TrimSuffix(config, otlpSuffix), otelJSONSuffix)
}

// postTarget is the path, content type and success status of a payload.
func postTarget(payload string) (path, contentType string, ok int) {
	if payload == payloadOTLP {
		return "/v1/traces", "application/x-protobuf", 200
	}
	return "/api/v2/spans", "application/json", 202
}

// luaQuote quotes b as a Lua string literal: printable ASCII as it is,
// every other byte (and " and \) as a three-digit decimal escape, which
// every Lua, LuaJIT included, reads.
func luaQuote(b []byte) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, c := range b {
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
			sb.WriteByte(c)
			continue
		}
		fmt.Fprintf(&sb, "\\%03d", c)
	}
	sb.WriteByte('"')
	return sb.String()
}

// luaOTLPScript returns a wrk script that POSTs templates OTLP protobuf
// traces to /v1/traces: the templates are encodeOTLP's bodies split at
// their holes, which the script fills per request as the JSON script
// does (trace ID: a random 64-bit prefix per wrk thread, the thread
// number and a counter; span IDs: the counter and the span's number;
// times: the wall clock in µs, encoded as fixed64 nanoseconds).
func luaOTLPScript(templates int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var sb strings.Builder
	sb.WriteString(luaOTLPHead)
	sb.WriteString("local templates = {\n")
	for t := 0; t < templates; t++ {
		p := encodeOTLP(newTrace(rng))
		sb.WriteString("  {")
		at := 0
		for _, h := range p.holes {
			if h.off > at {
				sb.WriteString(luaQuote(p.b[at:h.off]) + ",")
			}
			switch h.kind {
			case holeTraceID:
				sb.WriteString("{1},")
				at = h.off + 16
			case holeSpanID:
				fmt.Fprintf(&sb, "{2,%d},", h.arg)
				at = h.off + 8
			case holeTime:
				fmt.Fprintf(&sb, "{3,%d},", h.arg)
				at = h.off + 8
			}
		}
		if at < len(p.b) {
			sb.WriteString(luaQuote(p.b[at:]) + ",")
		}
		sb.WriteString("},\n")
	}
	sb.WriteString("}\n")
	sb.WriteString(luaOTLPTail)
	return sb.String()
}

const luaOTLPHead = `-- generated by bench/load: OTLP/HTTP protobuf traces with unique 128-bit IDs
local counter = 0
local prefix = ""
local tid = ""
local threads = {}
`

// Numbers are doubles in Lua 5.1 and LuaJIT: exact up to 2^53, which
// holds microseconds since 1970 but not nanoseconds; nanos multiplies by
// 1000 in two 32-bit halves.
const luaOTLPTail = `
local function be32(x)
  local b3 = x % 256; x = (x - b3) / 256
  local b2 = x % 256; x = (x - b2) / 256
  local b1 = x % 256; x = (x - b1) / 256
  return string.char(x % 256, b1, b2, b3)
end

local function le32(x)
  local b0 = x % 256; x = (x - b0) / 256
  local b1 = x % 256; x = (x - b1) / 256
  local b2 = x % 256; x = (x - b2) / 256
  return string.char(b0, b1, b2, x % 256)
end

local function nanos(us)
  local lous = us % 4294967296
  local hius = (us - lous) / 4294967296
  local p = lous * 1000
  local lo = p % 4294967296
  local hi = hius * 1000 + (p - lo) / 4294967296
  return le32(lo) .. le32(hi)
end

function setup(thread)
  thread:set("tn", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  math.randomseed(os.time() * 1000 + (tn or 0))
  prefix = be32(math.random(1, 2147483647)) .. be32(math.random(0, 2147483647) + (tn or 0))
end

local headers = {["Content-Type"] = "application/x-protobuf"}

function request()
  counter = counter + 1
  tid = prefix .. be32(tn or 0) .. be32(counter)
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
      out[i] = be32(counter) .. be32(p[2])
    else
      out[i] = nanos(now + p[2])
    end
  end
  return wrk.format("POST", "/v1/traces", headers, table.concat(out))
end
` + luaDone

// luaDone is the done hook both scripts share.
const luaDone = `
function done(summary, latency, requests)
  local s = summary
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"connect_errors":%d,"read_errors":%d,"write_errors":%d,"status_errors":%d,"timeouts":%d,' ..
    '"p50_us":%d,"p99_us":%d,"p999_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    s.requests, s.duration, s.bytes, s.errors.connect, s.errors.read, s.errors.write,
    s.errors.status, s.errors.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max, latency.mean))
end
`
