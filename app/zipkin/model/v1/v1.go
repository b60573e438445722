// Package v1 is Zipkin's v1 span model and its conversion to the v2 model
// (Zipkin's V1Span and V1SpanConverter).
//
// A v1 span repeats the reporting endpoint on each annotation and binary
// annotation, and one v1 span may hold both sides of an RPC. Two readers
// build v1 spans: the JSON v1 decoder (POST /api/v1/spans) and the MySQL
// store, whose rows are v1 spans. Both convert them with [ToV2] or a
// reusable [Converter], so the conversion rules live in one place.
package v1

import (
	"cmp"
	"slices"
	"strings"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// Annotation is a v1 timeline annotation. Endpoint is the host that
// recorded it (the v2 local endpoint); nil or an empty endpoint means
// unknown.
type Annotation struct {
	Timestamp int64 // epoch microseconds
	Value     string
	Endpoint  *model.Endpoint
}

// BinaryAnnotation is a v1 binary annotation of one of the two kinds that
// map to the v2 model: a string tag (Address false; Endpoint is the local
// endpoint of the tag's span) or an address annotation (Address true: a
// true boolean "sa", "ca" or "ma" whose Endpoint is the remote endpoint).
// Other binary annotations have no v2 form; readers drop them.
type BinaryAnnotation struct {
	Key      string
	Value    string // the tag value; unused for an address
	Address  bool
	Endpoint *model.Endpoint // nil or empty means unknown
}

// Span is a v1 span. Timestamp and Duration are 0 when absent (a negative
// value should be stored as 0). Debug false means unset.
type Span struct {
	TraceID           model.TraceID
	ParentID          model.ID // 0 for a root span
	ID                model.ID
	Name              string
	Timestamp         int64 // epoch microseconds
	Duration          int64 // microseconds
	Debug             bool
	Annotations       []Annotation
	BinaryAnnotations []BinaryAnnotation
}

// ToV2 returns the v2 spans of src; see [Converter.Convert].
func ToV2(src *Span) []model.Span {
	var c Converter
	return c.Convert(src, nil)
}

// Converter turns v1 spans into v2 spans as Zipkin's V1SpanConverter does.
// It keeps scratch state between calls to save allocations; the zero value
// is ready to use. It is not safe for concurrent use.
type Converter struct {
	spans []*model.Span // the v2 spans of the span being converted; [0] is "first"
	free  []*model.Span // reusable span structs (their contents were copied out)
	eps   []model.Endpoint
	// core annotations of the span being converted
	cs, sr, ss, cr, ms, mr, ws, wr *Annotation
	impliedCS, impliedSR           Annotation
}

// Convert appends the v2 spans of src to out and returns the extended
// slice. It sorts src's annotations by (timestamp, value) and its binary
// annotations by key, in place and stably, as Zipkin's V1Span does; the
// spans returned share no memory with src.
//
// The rules are Zipkin's: an empty endpoint counts as none, and an address
// annotation without an endpoint is ignored. Annotations and tags are split
// among v2 spans by their endpoint's service name (case-insensitive), the
// first v2 span taking those without an endpoint. The core annotations cs,
// sr, ss, cr, ms, mr (with an endpoint) set the kind; cs/cr, sr/ss, ms/ws
// and wr/mr set timestamp and duration, the span's own timestamp and
// duration winning when both are set; a span holding both cs and sr becomes
// a CLIENT span and a shared SERVER span (two spans even when both sides
// have the same service: loopback), and likewise ms and mr a PRODUCER and a
// shared CONSUMER span. A server side without the span's own timestamp (or
// with ss but no duration) is shared. A missing cs or sr is implied when
// the span's timestamp plus duration is cr's or ss's time. A string binary
// annotation is a tag, except the "lc" marker with an empty value. The
// addresses become remote endpoints: "sa" of the client side, "ca" of the
// server side (with its service name cleared when it is the server's own
// name, as Finagle reports it), "ma" of the messaging sides; without core
// annotations, "sa" is the first span's remote endpoint, "ca" alone makes
// it a SERVER span, and both make "sa" the remote of "ca"'s span. Every
// span returned is normalized ([model.Span.Normalize]).
func (c *Converter) Convert(src *Span, out []model.Span) []model.Span {
	c.free = append(c.free, c.spans...)
	c.spans = c.spans[:0]
	c.cs, c.sr, c.ss, c.cr, c.ms, c.mr, c.ws, c.wr = nil, nil, nil, nil, nil, nil, nil, nil
	if !slices.IsSortedFunc(src.Annotations, compareAnnotations) {
		slices.SortStableFunc(src.Annotations, compareAnnotations)
	}
	if !slices.IsSortedFunc(src.BinaryAnnotations, compareBinary) {
		slices.SortStableFunc(src.BinaryAnnotations, compareBinary)
	}
	c.newSpan(src, nil) // the first span
	c.processAnnotations(src)
	c.processBinaryAnnotations(src)
	for _, s := range c.spans {
		s.Normalize()
		out = append(out, *s)
	}
	return out
}

func compareAnnotations(a, b Annotation) int {
	if c := cmp.Compare(a.Timestamp, b.Timestamp); c != 0 {
		return c
	}
	return strings.Compare(a.Value, b.Value)
}

func compareBinary(a, b BinaryAnnotation) int { return strings.Compare(a.Key, b.Key) }

// endpoint returns e, or nil for an empty endpoint (Zipkin's V1Span builder
// drops empty endpoints).
func endpoint(e *model.Endpoint) *model.Endpoint {
	if e.IsZero() {
		return nil
	}
	return e
}

func (c *Converter) processAnnotations(src *Span) {
	for i := range src.Annotations {
		a := &src.Annotations[i]
		ep := endpoint(a.Endpoint)
		cur := c.forEndpoint(src, ep)
		// Core annotations need an endpoint; without one they are plain.
		if len(a.Value) == 2 && ep != nil {
			switch a.Value {
			case "cs":
				cur.Kind, c.cs = model.KindClient, a
				continue
			case "sr":
				cur.Kind, c.sr = model.KindServer, a
				continue
			case "ss":
				cur.Kind, c.ss = model.KindServer, a
				continue
			case "cr":
				cur.Kind, c.cr = model.KindClient, a
				continue
			case "ms":
				cur.Kind, c.ms = model.KindProducer, a
				continue
			case "mr":
				cur.Kind, c.mr = model.KindConsumer, a
				continue
			case "ws":
				c.ws = a
				continue
			case "wr":
				c.wr = a
				continue
			}
		}
		addAnnotation(cur, a)
	}

	// A start annotation missing but implied by the span's own timing.
	if c.cs == nil && endReflectsDuration(c.cr, src) {
		c.impliedCS = Annotation{src.Timestamp, "cs", c.cr.Endpoint}
		c.cs = &c.impliedCS
	}
	if c.sr == nil && endReflectsDuration(c.ss, src) {
		c.impliedSR = Annotation{src.Timestamp, "sr", c.ss.Endpoint}
		c.sr = &c.impliedSR
	}

	switch {
	case c.cs != nil && c.sr != nil:
		// Both sides of an RPC: the client owns the span's timing; the
		// server side is shared, timed by its own annotations.
		c.timestampDuration(src, c.cs, c.cr)
		client := c.forEndpoint(src, c.cs.Endpoint)
		var server *model.Span
		if sameService(c.cs.Endpoint, c.sr.Endpoint) { // loopback: fork the server side
			client.Kind = model.KindClient
			server = c.newSpan(src, c.sr.Endpoint)
			server.Kind = model.KindServer
		} else {
			server = c.forEndpoint(src, c.sr.Endpoint)
		}
		server.Shared = true
		server.Timestamp = c.sr.Timestamp
		if c.ss != nil {
			server.Duration = c.ss.Timestamp - c.sr.Timestamp
		}
		if c.cr == nil && src.Duration == 0 { // a one-way RPC has no duration
			client.Duration = 0
		}
	case c.cs != nil && c.cr != nil:
		c.timestampDuration(src, c.cs, c.cr)
	case c.sr != nil && c.ss != nil:
		c.timestampDuration(src, c.sr, c.ss)
	default:
		c.incompleteRPC(src)
	}

	// v1 had no shared flag: a server side without the span's own timestamp
	// (or with ss but no duration: a row shared with the client in MySQL)
	// is shared.
	if c.cs == nil && c.sr != nil && (src.Timestamp == 0 || (c.ss != nil && src.Duration == 0)) {
		c.forEndpoint(src, c.sr.Endpoint).Shared = true
	}

	switch {
	case c.ms != nil && c.mr != nil: // not supposed to share a span, but may
		producer := c.forEndpoint(src, c.ms.Endpoint)
		var consumer *model.Span
		if sameService(c.ms.Endpoint, c.mr.Endpoint) {
			producer.Kind = model.KindProducer
			consumer = c.newSpan(src, c.mr.Endpoint)
			consumer.Kind = model.KindConsumer
		} else {
			consumer = c.forEndpoint(src, c.mr.Endpoint)
		}
		consumer.Shared = true
		if c.wr != nil {
			consumer.Timestamp, consumer.Duration = c.wr.Timestamp, c.mr.Timestamp-c.wr.Timestamp
		} else {
			consumer.Timestamp = c.mr.Timestamp
		}
		producer.Timestamp, producer.Duration = c.ms.Timestamp, 0
		if c.ws != nil {
			producer.Duration = c.ws.Timestamp - c.ms.Timestamp
		}
	case c.ms != nil:
		c.timestampDuration(src, c.ms, c.ws)
	case c.mr != nil:
		if c.wr != nil {
			c.timestampDuration(src, c.wr, c.mr)
		} else {
			c.timestampDuration(src, c.mr, nil)
		}
	default:
		if c.ws != nil {
			addAnnotation(c.forEndpoint(src, c.ws.Endpoint), c.ws)
		}
		if c.wr != nil {
			addAnnotation(c.forEndpoint(src, c.wr.Endpoint), c.wr)
		}
	}
}

// incompleteRPC keeps what is known of an RPC missing a core annotation:
// the begin annotation's time as timestamp, the end one as a plain
// annotation, and the span's own timing on the first span.
func (c *Converter) incompleteRPC(src *Span) {
	for _, s := range c.spans {
		switch s.Kind {
		case model.KindClient:
			if c.cs != nil {
				s.Timestamp = c.cs.Timestamp
			}
			if c.cr != nil {
				addAnnotation(s, c.cr)
			}
		case model.KindServer:
			if c.sr != nil {
				s.Timestamp = c.sr.Timestamp
			}
			if c.ss != nil {
				addAnnotation(s, c.ss)
			}
		}
	}
	if src.Timestamp != 0 {
		c.spans[0].Timestamp, c.spans[0].Duration = src.Timestamp, src.Duration
	}
}

func endReflectsDuration(end *Annotation, src *Span) bool {
	return end != nil && src.Timestamp != 0 && src.Duration != 0 && src.Timestamp+src.Duration == end.Timestamp
}

// timestampDuration times the span of begin's endpoint: with the span's own
// timestamp and duration when both are set, else with the annotations'.
func (c *Converter) timestampDuration(src *Span, begin, end *Annotation) {
	s := c.forEndpoint(src, begin.Endpoint)
	if src.Timestamp != 0 && src.Duration != 0 {
		s.Timestamp, s.Duration = src.Timestamp, src.Duration
		return
	}
	s.Timestamp = begin.Timestamp
	if end != nil {
		s.Duration = end.Timestamp - begin.Timestamp
	}
}

func (c *Converter) processBinaryAnnotations(src *Span) {
	var ca, sa, ma *model.Endpoint
	for i := range src.BinaryAnnotations {
		b := &src.BinaryAnnotations[i]
		ep := endpoint(b.Endpoint)
		if b.Address {
			if ep == nil { // Zipkin's V1Span drops addresses without endpoint
				continue
			}
			switch b.Key {
			case "ca":
				ca = ep
			case "sa":
				sa = ep
			case "ma":
				ma = ep
			}
			continue
		}
		cur := c.forEndpoint(src, ep)
		if b.Key == "lc" && b.Value == "" { // the local-component marker
			continue
		}
		if cur.Tags == nil {
			cur.Tags = make(map[string]string, len(src.BinaryAnnotations)-i)
		}
		cur.Tags[b.Key] = b.Value
	}

	noCore := c.cs == nil && c.cr == nil && c.ss == nil && c.sr == nil
	if noCore && (ca != nil || sa != nil) {
		switch {
		case ca != nil && sa != nil:
			c.forEndpoint(src, ca).RemoteEndpoint = c.keep(sa)
		case sa != nil: // a default remote address: not a client span
			c.forEndpoint(src, nil).RemoteEndpoint = c.keep(sa)
		default: // ca alone: a server
			s := c.forEndpoint(src, nil)
			s.Kind = model.KindServer
			s.RemoteEndpoint = c.keep(ca)
		}
		return
	}

	server := c.sr
	if server == nil {
		server = c.ss
	}
	if ca != nil && server != nil && !sameEndpoint(ca, server.Endpoint) {
		remote := c.keep(ca)
		// Finagle reports the client socket as "ca" under the server's own
		// service name: clearing it avoids a false loopback link.
		if sameService(remote, server.Endpoint) {
			remote.ServiceName = ""
		}
		c.forEndpoint(src, server.Endpoint).RemoteEndpoint = endpoint(remote)
	}
	if sa != nil {
		if c.cs != nil {
			c.forEndpoint(src, c.cs.Endpoint).RemoteEndpoint = c.keep(sa)
		} else if c.cr != nil {
			c.forEndpoint(src, c.cr.Endpoint).RemoteEndpoint = c.keep(sa)
		}
	}
	if ma != nil { // both messaging sides get the broker's address
		if c.ms != nil {
			c.forEndpoint(src, c.ms.Endpoint).RemoteEndpoint = c.keep(ma)
		}
		if c.mr != nil {
			c.forEndpoint(src, c.mr.Endpoint).RemoteEndpoint = c.keep(ma)
		}
	}
}

func addAnnotation(s *model.Span, a *Annotation) {
	s.Annotations = append(s.Annotations, model.Annotation{Timestamp: a.Timestamp, Value: a.Value})
}

// newSpan starts a v2 span of src with local endpoint e (copied; nil for
// none).
func (c *Converter) newSpan(src *Span, e *model.Endpoint) *model.Span {
	var s *model.Span
	if n := len(c.free); n > 0 {
		s, c.free = c.free[n-1], c.free[:n-1]
	} else {
		s = new(model.Span)
	}
	*s = model.Span{TraceID: src.TraceID, ParentID: src.ParentID, ID: src.ID, Name: src.Name, Debug: src.Debug}
	s.LocalEndpoint = c.keep(e)
	c.spans = append(c.spans, s)
	return s
}

// forEndpoint returns the v2 span for local endpoint e: the first span when
// e is nil or empty, else the first span with e's service name, claiming a
// span without a local endpoint on the way, else a new span.
func (c *Converter) forEndpoint(src *Span, e *model.Endpoint) *model.Span {
	if e = endpoint(e); e == nil {
		return c.spans[0]
	}
	for _, s := range c.spans {
		if s.LocalEndpoint == nil {
			s.LocalEndpoint = c.keep(e)
			return s
		}
		if sameService(s.LocalEndpoint, e) {
			return s
		}
	}
	return c.newSpan(src, e)
}

// keep returns a copy of e that the spans returned may own, or nil for an
// empty endpoint. Copies come from a slab that is never reused.
func (c *Converter) keep(e *model.Endpoint) *model.Endpoint {
	if e.IsZero() {
		return nil
	}
	if len(c.eps) == cap(c.eps) {
		c.eps = make([]model.Endpoint, 0, 16)
	}
	c.eps = append(c.eps, *e)
	return &c.eps[len(c.eps)-1]
}

// sameService compares service names as Zipkin does after lower-casing
// them; nil has no service name.
func sameService(a, b *model.Endpoint) bool {
	an, bn := "", ""
	if a != nil {
		an = a.ServiceName
	}
	if b != nil {
		bn = b.ServiceName
	}
	return strings.EqualFold(an, bn)
}

// sameEndpoint is Zipkin's Endpoint.equals on lower-cased service names.
func sameEndpoint(a, b *model.Endpoint) bool {
	if a == nil || b == nil {
		return a == b
	}
	return strings.EqualFold(a.ServiceName, b.ServiceName) && a.IPv4 == b.IPv4 && a.IPv6 == b.IPv6 && a.Port == b.Port
}
