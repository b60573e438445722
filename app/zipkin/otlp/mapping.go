// Package otlp maps OpenTelemetry (OTLP) trace data to the Zipkin v2 model
// (ToSpans) and decodes OTLP export requests (DecodeProto, DecodeJSON).
// The collectors that receive them are collector/otlphttp (OTLP/HTTP) and
// collector/grpccollector (OTLP/gRPC).
//
// The mapping is the OpenTelemetry specification's Zipkin exporter mapping
// run in reverse, and where the specification leaves a choice it does what
// OpenTelemetry Go's deprecated Zipkin exporter
// (go.opentelemetry.io/otel/exporters/zipkin v1.47.0) does, so that a
// service moving from that exporter to an OTLP exporter stores the same
// spans. docs/server.md has the table; ToSpans documents each rule.
package otlp

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// Tag keys the mapping writes besides the attributes.
const (
	TagStatusCode           = "otel.status_code"
	TagScopeName            = "otel.scope.name"
	TagScopeVersion         = "otel.scope.version"
	TagDroppedAttributes    = "otel.dropped_attributes_count"
	TagDroppedEvents        = "otel.dropped_events_count"
	TagDroppedLinks         = "otel.dropped_links_count"
	TagError                = "error"
	defaultServiceName      = "unknown_service"
	attrServiceName         = "service.name"
	attrProcessExecutable   = "process.executable.name"
	eventException          = "exception"
	attrExceptionMessage    = "exception.message"
	attrExceptionType       = "exception.type"
	maxRejectedMessageSpans = 3
)

// Result is the outcome of mapping one export request.
type Result struct {
	// Spans are the valid spans, normalized (model.Span.Normalize).
	Spans []model.Span
	// Rejected counts the spans left out for invalid IDs; Message says
	// why, naming the first few (empty when Rejected is 0). OTLP answers
	// them as a partial success.
	Rejected int64
	Message  string
}

// ToSpans maps every span of resourceSpans to the Zipkin model:
//
//   - trace_id (16 bytes) → traceId, 128-bit (High = first 8 bytes, big
//     endian); span_id (8 bytes) → id; parent_span_id (empty or 8 bytes,
//     all zeros meaning none) → parentId. A span whose IDs have another
//     length, or whose trace or span ID is all zeros, is rejected.
//   - name → name; kind SERVER, CLIENT, PRODUCER, CONSUMER → the same kind,
//     INTERNAL and UNSPECIFIED → no kind.
//   - start_time_unix_nano → timestamp, rounded to the nearest microsecond
//     (0 → absent); end − start → duration, rounded to the nearest
//     microsecond, a positive duration under 1 µs → 1 µs, a negative one →
//     absent (as zipkin-go's JSON encoder, which the deprecated exporter
//     used).
//   - resource service.name → localEndpoint.serviceName; without it
//     "unknown_service:" + process.executable.name, or "unknown_service".
//   - tags: scope attributes, then span attributes, then resource
//     attributes (service.name included); a later source wins a key.
//     Values: strings as they are, booleans true/false, integers in
//     decimal, doubles in Go's shortest %v form; arrays whose elements all
//     have one primitive type as a JSON list (["a","b"], [1,2]); bytes as a
//     JSON list of byte values; mixed or nested arrays and key-value lists
//     in OpenTelemetry's non-OTLP JSON representation.
//   - status ERROR → otel.status_code=ERROR and error=the status message,
//     or, when that is empty, the first exception event's exception.message
//     (else exception.type, else ""); status OK → otel.status_code=OK; an
//     attribute named error is removed unless the status is ERROR (Zipkin
//     treats any error tag as a failure). An exception event alone does not
//     mark the span failed: OpenTelemetry records handled exceptions too.
//   - scope name and version → otel.scope.name, otel.scope.version (when
//     not empty).
//   - dropped_attributes_count, dropped_events_count, dropped_links_count →
//     otel.dropped_*_count when not zero (the span's own counts, as the
//     specification says; the attribute count also counts what
//     MaxAttributes left out).
//   - events → annotations at the event time (µs): the event name, or
//     "name: " + its attributes as a JSON object (keys sorted).
//   - CLIENT and PRODUCER spans only: remoteEndpoint from the attribute of
//     best rank in the specification's table (peer.service, server.address,
//     net.peer.name, network.peer.address + network.peer.port,
//     server.socket.domain, server.socket.address + server.socket.port,
//     net.sock.peer.name, net.sock.peer.addr + net.sock.peer.port,
//     peer.hostname, peer.address, db.name): an address rank gives the IP
//     (and port) when it parses as an IP, else no remote endpoint; the
//     others give the service name.
//   - Not kept: links, trace_state, flags, schema URLs, event and link
//     dropped counts, resource and scope dropped counts.
func ToSpans(resourceSpans []*tracepb.ResourceSpans) Result {
	var res Result
	var firstBad []string
	n := 0
	for _, rs := range resourceSpans {
		for _, ss := range rs.GetScopeSpans() {
			n += len(ss.GetSpans())
		}
	}
	res.Spans = make([]model.Span, 0, n)
	for _, rs := range resourceSpans {
		resAttrs := rs.GetResource().GetAttributes()
		service := serviceName(resAttrs)
		for _, ss := range rs.GetScopeSpans() {
			scope := ss.GetScope()
			for _, sp := range ss.GetSpans() {
				out, why := toSpan(sp, service, scope, resAttrs)
				if why != "" {
					res.Rejected++
					if len(firstBad) < maxRejectedMessageSpans {
						firstBad = append(firstBad, why)
					}
					continue
				}
				res.Spans = append(res.Spans, out)
			}
		}
	}
	if res.Rejected > 0 {
		res.Message = fmt.Sprintf("%d spans rejected: %s", res.Rejected, strings.Join(firstBad, "; "))
		if res.Rejected > int64(len(firstBad)) {
			res.Message += "; …"
		}
	}
	return res
}

func serviceName(attrs []*commonpb.KeyValue) string {
	exe := ""
	for _, kv := range attrs {
		switch kv.GetKey() {
		case attrServiceName:
			if s, ok := kv.GetValue().GetValue().(*commonpb.AnyValue_StringValue); ok && s.StringValue != "" {
				return s.StringValue
			}
		case attrProcessExecutable:
			exe = kv.GetValue().GetStringValue()
		}
	}
	if exe != "" {
		return defaultServiceName + ":" + exe
	}
	return defaultServiceName
}

// toSpan maps one span; a non-empty why says why it is rejected.
func toSpan(sp *tracepb.Span, service string, scope *commonpb.InstrumentationScope, resAttrs []*commonpb.KeyValue) (model.Span, string) {
	var out model.Span
	tid, sid, pid := sp.GetTraceId(), sp.GetSpanId(), sp.GetParentSpanId()
	switch {
	case len(tid) != 16:
		return out, fmt.Sprintf("span %x: traceId has %d bytes, want 16", sid, len(tid))
	case len(sid) != 8:
		return out, fmt.Sprintf("span of trace %x: spanId has %d bytes, want 8", tid, len(sid))
	case len(pid) != 0 && len(pid) != 8:
		return out, fmt.Sprintf("span %x: parentSpanId has %d bytes, want 0 or 8", sid, len(pid))
	}
	out.TraceID = model.TraceID{High: binary.BigEndian.Uint64(tid[:8]), Low: binary.BigEndian.Uint64(tid[8:])}
	out.ID = model.ID(binary.BigEndian.Uint64(sid))
	if out.TraceID.IsZero() {
		return out, fmt.Sprintf("span %x: traceId is all zeros", sid)
	}
	if out.ID == 0 {
		return out, fmt.Sprintf("span of trace %x: spanId is all zeros", tid)
	}
	if len(pid) == 8 {
		out.ParentID = model.ID(binary.BigEndian.Uint64(pid))
	}
	out.Name = sp.GetName()
	out.Kind = kind(sp.GetKind())
	start, end := sp.GetStartTimeUnixNano(), sp.GetEndTimeUnixNano()
	if start != 0 {
		out.Timestamp = time.Unix(0, int64(start)).Round(time.Microsecond).UnixMicro()
	}
	if end >= start && start != 0 {
		d := time.Duration(end - start)
		if d > 0 && d < time.Microsecond {
			d = time.Microsecond
		} else {
			d += 500 * time.Nanosecond
		}
		out.Duration = d.Microseconds()
	}
	out.LocalEndpoint = &model.Endpoint{ServiceName: service}
	out.Tags = tags(sp, scope, resAttrs)
	if evs := sp.GetEvents(); len(evs) > 0 {
		out.Annotations = make([]model.Annotation, 0, len(evs))
		for _, ev := range evs {
			out.Annotations = append(out.Annotations, model.Annotation{
				Timestamp: time.Unix(0, int64(ev.GetTimeUnixNano())).Round(time.Microsecond).UnixMicro(),
				Value:     eventValue(ev),
			})
		}
	}
	if out.Kind == model.KindClient || out.Kind == model.KindProducer {
		out.RemoteEndpoint = remoteEndpoint(sp.GetAttributes())
	}
	out.Normalize()
	return out, ""
}

func kind(k tracepb.Span_SpanKind) model.Kind {
	switch k {
	case tracepb.Span_SPAN_KIND_SERVER:
		return model.KindServer
	case tracepb.Span_SPAN_KIND_CLIENT:
		return model.KindClient
	case tracepb.Span_SPAN_KIND_PRODUCER:
		return model.KindProducer
	case tracepb.Span_SPAN_KIND_CONSUMER:
		return model.KindConsumer
	}
	return model.KindUnset
}

// MaxAttributes bounds the attributes taken from each of a span's three
// sources (scope, span, resource): the first MaxAttributes are kept, the
// others are dropped and added to otel.dropped_attributes_count. Each tag
// is a row in Zipkin's MySQL schema; OpenTelemetry SDKs keep 128 span
// attributes by default.
const MaxAttributes = 256

func tags(sp *tracepb.Span, scope *commonpb.InstrumentationScope, resAttrs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, min(len(sp.GetAttributes()), MaxAttributes)+min(len(resAttrs), MaxAttributes)+4)
	dropped := uint64(sp.GetDroppedAttributesCount())
	for _, src := range [][]*commonpb.KeyValue{scope.GetAttributes(), sp.GetAttributes(), resAttrs} {
		if len(src) > MaxAttributes {
			dropped += uint64(len(src) - MaxAttributes)
			src = src[:MaxAttributes]
		}
		for _, kv := range src {
			m[kv.GetKey()] = tagValue(anyValue(kv.GetValue()))
		}
	}
	st := sp.GetStatus()
	switch st.GetCode() {
	case tracepb.Status_STATUS_CODE_OK:
		m[TagStatusCode] = "OK"
		delete(m, TagError)
	case tracepb.Status_STATUS_CODE_ERROR:
		m[TagStatusCode] = "ERROR"
		msg := st.GetMessage()
		if msg == "" {
			msg = exceptionMessage(sp.GetEvents())
		}
		m[TagError] = msg
	default:
		delete(m, TagError)
	}
	if name := scope.GetName(); name != "" {
		m[TagScopeName] = name
		if v := scope.GetVersion(); v != "" {
			m[TagScopeVersion] = v
		}
	}
	for _, d := range []struct {
		key string
		n   uint64
	}{
		{TagDroppedAttributes, dropped},
		{TagDroppedEvents, uint64(sp.GetDroppedEventsCount())},
		{TagDroppedLinks, uint64(sp.GetDroppedLinksCount())},
	} {
		if d.n != 0 {
			m[d.key] = strconv.FormatUint(d.n, 10)
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// exceptionMessage is the message of the first exception event: its
// exception.message, else its exception.type, else "".
func exceptionMessage(evs []*tracepb.Span_Event) string {
	for _, ev := range evs {
		if ev.GetName() != eventException {
			continue
		}
		typ := ""
		for _, kv := range ev.GetAttributes() {
			switch kv.GetKey() {
			case attrExceptionMessage:
				if s := kv.GetValue().GetStringValue(); s != "" {
					return s
				}
			case attrExceptionType:
				typ = kv.GetValue().GetStringValue()
			}
		}
		return typ
	}
	return ""
}

func eventValue(ev *tracepb.Span_Event) string {
	attrs := ev.GetAttributes()
	if len(attrs) == 0 {
		return ev.GetName()
	}
	m := make(map[string]any, len(attrs))
	for _, kv := range attrs {
		m[kv.GetKey()] = anyValue(kv.GetValue()).AsInterface()
	}
	b, err := json.Marshal(m)
	if err != nil || len(b) == 0 {
		return ev.GetName()
	}
	return ev.GetName() + ": " + string(b)
}

// anyValue converts an OTLP value to the SDK's attribute.Value, the type
// the deprecated exporter rendered: an array whose elements all have one
// primitive type becomes the typed slice the SDK would have sent.
func anyValue(v *commonpb.AnyValue) attribute.Value {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return attribute.StringValue(x.StringValue)
	case *commonpb.AnyValue_BoolValue:
		return attribute.BoolValue(x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return attribute.Int64Value(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return attribute.Float64Value(x.DoubleValue)
	case *commonpb.AnyValue_BytesValue:
		return attribute.ByteSliceValue(x.BytesValue)
	case *commonpb.AnyValue_ArrayValue:
		return arrayValue(x.ArrayValue.GetValues())
	case *commonpb.AnyValue_KvlistValue:
		kvs := x.KvlistValue.GetValues()
		out := make([]attribute.KeyValue, 0, len(kvs))
		for _, kv := range kvs {
			out = append(out, attribute.KeyValue{Key: attribute.Key(kv.GetKey()), Value: anyValue(kv.GetValue())})
		}
		return attribute.MapValue(out...)
	}
	return attribute.Value{}
}

func arrayValue(vals []*commonpb.AnyValue) attribute.Value {
	if len(vals) == 0 {
		return attribute.StringSliceValue(nil)
	}
	same := func(pred func(*commonpb.AnyValue) bool) bool {
		for _, v := range vals {
			if !pred(v) {
				return false
			}
		}
		return true
	}
	switch vals[0].GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		if same(func(v *commonpb.AnyValue) bool { _, ok := v.GetValue().(*commonpb.AnyValue_StringValue); return ok }) {
			s := make([]string, len(vals))
			for i, v := range vals {
				s[i] = v.GetStringValue()
			}
			return attribute.StringSliceValue(s)
		}
	case *commonpb.AnyValue_BoolValue:
		if same(func(v *commonpb.AnyValue) bool { _, ok := v.GetValue().(*commonpb.AnyValue_BoolValue); return ok }) {
			s := make([]bool, len(vals))
			for i, v := range vals {
				s[i] = v.GetBoolValue()
			}
			return attribute.BoolSliceValue(s)
		}
	case *commonpb.AnyValue_IntValue:
		if same(func(v *commonpb.AnyValue) bool { _, ok := v.GetValue().(*commonpb.AnyValue_IntValue); return ok }) {
			s := make([]int64, len(vals))
			for i, v := range vals {
				s[i] = v.GetIntValue()
			}
			return attribute.Int64SliceValue(s)
		}
	case *commonpb.AnyValue_DoubleValue:
		if same(func(v *commonpb.AnyValue) bool { _, ok := v.GetValue().(*commonpb.AnyValue_DoubleValue); return ok }) {
			s := make([]float64, len(vals))
			for i, v := range vals {
				s[i] = v.GetDoubleValue()
			}
			return attribute.Float64SliceValue(s)
		}
	}
	out := make([]attribute.Value, len(vals))
	for i, v := range vals {
		out[i] = anyValue(v)
	}
	return attribute.SliceValue(out...)
}

// tagValue renders a value as the deprecated exporter did.
func tagValue(v attribute.Value) string {
	switch v.Type() {
	case attribute.BOOLSLICE:
		b, _ := json.Marshal(v.AsBoolSlice())
		return string(b)
	case attribute.INT64SLICE:
		b, _ := json.Marshal(v.AsInt64Slice())
		return string(b)
	case attribute.FLOAT64SLICE:
		b, _ := json.Marshal(v.AsFloat64Slice())
		return string(b)
	case attribute.STRINGSLICE:
		b, _ := json.Marshal(v.AsStringSlice())
		return string(b)
	case attribute.BYTESLICE:
		raw := v.AsByteSlice()
		ints := make([]int, len(raw))
		for i, c := range raw {
			ints[i] = int(c)
		}
		b, _ := json.Marshal(ints)
		return string(b)
	case attribute.SLICE, attribute.MAP:
		return v.String()
	case attribute.BOOL:
		return strconv.FormatBool(v.AsBool())
	case attribute.INT64:
		return strconv.FormatInt(v.AsInt64(), 10)
	case attribute.FLOAT64:
		return fmt.Sprint(v.AsFloat64())
	case attribute.STRING:
		return v.AsString()
	}
	return ""
}

// remoteRank is the specification's order of remote endpoint attributes;
// the address ranks name their port attribute.
var remoteRank = map[string]struct {
	rank int
	port string
}{
	"peer.service":          {1, ""},
	"server.address":        {2, ""},
	"net.peer.name":         {3, ""},
	"network.peer.address":  {4, "network.peer.port"},
	"server.socket.domain":  {5, ""},
	"server.socket.address": {6, "server.socket.port"},
	"net.sock.peer.name":    {7, ""},
	"net.sock.peer.addr":    {8, "net.sock.peer.port"},
	"peer.hostname":         {9, ""},
	"peer.address":          {10, ""},
	"db.name":               {11, ""},
}

func remoteEndpoint(attrs []*commonpb.KeyValue) *model.Endpoint {
	best := -1
	bestRank := 0
	for i, kv := range attrs {
		r, ok := remoteRank[kv.GetKey()]
		if ok && (best < 0 || r.rank < bestRank) {
			best, bestRank = i, r.rank
		}
	}
	if best < 0 {
		return nil
	}
	key := attrs[best].GetKey()
	v := attrs[best].GetValue().GetStringValue()
	portKey := remoteRank[key].port
	if portKey == "" {
		return &model.Endpoint{ServiceName: v}
	}
	ip, err := netip.ParseAddr(v)
	if err != nil {
		return nil
	}
	e := &model.Endpoint{}
	if ip.Is4() || ip.Is4In6() {
		e.IPv4 = ip.Unmap()
	} else {
		e.IPv6 = ip.WithZone("")
	}
	for _, kv := range attrs {
		if kv.GetKey() == portKey {
			p, _ := strconv.ParseUint(tagValue(anyValue(kv.GetValue())), 10, 16)
			e.Port = int(p)
			break
		}
	}
	return e
}
