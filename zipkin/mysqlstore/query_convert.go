package mysqlstore

import (
	"encoding/binary"
	"net/netip"

	"github.com/sqlpool/sqlpool/zipkin/model"
)

// Reading: Zipkin stores a span as one zipkin_spans row (a v1 span) and its
// v1 annotations and binary annotations as zipkin_annotations rows. The read
// path rebuilds the v1 span from those rows (decodeAnnotation) and converts
// it to one or more v2 spans with the rules of Zipkin's V1SpanConverter
// (v1Converter): core annotations give kind, timestamp and duration; a row
// that holds both the client (cs) and server (sr) side of an RPC becomes a
// CLIENT span and a shared SERVER span; address annotations (sa, ca, ma)
// become remote endpoints; the "lc" marker is not a tag.

// v1Annotation is a timeline annotation of a stored span. ep is the
// endpoint of its row, never nil for rows read from the database (it may be
// empty, which V1SpanConverter treats as "no local endpoint").
type v1Annotation struct {
	ts    int64
	value string
	ep    *model.Endpoint
}

// v1Binary is a tag (addr false) or an address annotation (addr true).
type v1Binary struct {
	key   string
	value string
	addr  bool
	ep    *model.Endpoint
}

// v1Span is a zipkin_spans row with its annotation rows.
type v1Span struct {
	traceID   model.TraceID
	parentID  model.ID
	id        model.ID
	name      string
	timestamp int64
	duration  int64
	debug     bool
	annots    []v1Annotation
	binaries  []v1Binary
}

// annotationRow is one zipkin_annotations row as read.
type annotationRow struct {
	key         string
	value       []byte
	aType       int
	ts          int64
	ipv4        int32
	ipv4Valid   bool
	ipv6        []byte
	port        int64
	serviceName string
}

// endpoint rebuilds the row's endpoint as Zipkin does: the service name
// ("" when NULL or empty), the port (a negative stored port, the wrap of a
// port above 32767 in SMALLINT, reads as 0), the IPv4 address from its
// signed big-endian int (0 = none) and the IPv6 address (an IPv4-mapped one
// becomes the IPv4 address). The result is never nil; it may be empty.
func (r *annotationRow) endpoint() *model.Endpoint {
	e := &model.Endpoint{ServiceName: r.serviceName}
	if r.port > 0 {
		e.Port = int(r.port)
	}
	if r.ipv4Valid && r.ipv4 != 0 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(r.ipv4))
		e.IPv4 = netip.AddrFrom4(b)
	}
	if len(r.ipv6) == 16 {
		a := netip.AddrFrom16([16]byte(r.ipv6))
		if a.Is4In6() {
			e.IPv4 = a.Unmap()
		} else if !a.IsUnspecified() {
			e.IPv6 = a
		}
	}
	return e
}

// addRow adds one annotation row to the span as Zipkin's reader does:
// a_type -1 is a timeline annotation, 6 a tag, 0 an address annotation only
// when its key is sa, ca or ma and its value is the single byte 0x01; any
// other row is ignored.
func (s *v1Span) addRow(r *annotationRow) {
	switch r.aType {
	case aTypeAnnotation:
		s.annots = append(s.annots, v1Annotation{ts: r.ts, value: r.key, ep: r.endpoint()})
	case aTypeString:
		s.binaries = append(s.binaries, v1Binary{key: r.key, value: string(r.value), ep: r.endpoint()})
	case aTypeBool:
		switch r.key {
		case "sa", "ca", "ma":
		default:
			return
		}
		if len(r.value) != 1 || r.value[0] != 1 {
			return
		}
		s.binaries = append(s.binaries, v1Binary{key: r.key, addr: true, ep: r.endpoint()})
	}
}

// nilIfEmpty returns nil for an empty endpoint, as Zipkin's span builder
// does when an empty endpoint is set.
func nilIfEmpty(e *model.Endpoint) *model.Endpoint {
	if e.IsZero() {
		return nil
	}
	return e
}

func sameService(a, b *model.Endpoint) bool {
	return a.ServiceName == b.ServiceName
}

func sameEndpoint(a, b *model.Endpoint) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// v1Converter turns one v1 span into v2 spans (Zipkin's V1SpanConverter).
// It is not safe for concurrent use; one is used per read.
type v1Converter struct {
	spans                          []*model.Span // spans[0] is "first"
	cs, sr, ss, cr, ms, mr, ws, wr *v1Annotation
}

// convert appends the v2 spans of src to out.
func (c *v1Converter) convert(src *v1Span, out []model.Span) []model.Span {
	c.spans = c.spans[:0]
	c.cs, c.sr, c.ss, c.cr, c.ms, c.mr, c.ws, c.wr = nil, nil, nil, nil, nil, nil, nil, nil
	c.spans = append(c.spans, c.newSpan(src, nil))
	c.processAnnotations(src)
	c.processBinaries(src)
	for _, sp := range c.spans {
		sp.Normalize()
		out = append(out, *sp)
	}
	return out
}

func (c *v1Converter) newSpan(src *v1Span, local *model.Endpoint) *model.Span {
	return &model.Span{
		TraceID:       src.traceID,
		ParentID:      src.parentID,
		ID:            src.id,
		Name:          src.name,
		Debug:         src.debug,
		LocalEndpoint: nilIfEmpty(copyEndpoint(local)),
	}
}

// forkSpan adds a new v2 span for the local endpoint e.
func (c *v1Converter) forkSpan(src *v1Span, e *model.Endpoint) *model.Span {
	sp := c.newSpan(src, e)
	c.spans = append(c.spans, sp)
	return sp
}

// closeEnough claims sp for endpoint e when sp has no local endpoint yet,
// or reports whether its service name is e's.
func closeEnough(sp *model.Span, e *model.Endpoint) bool {
	if sp.LocalEndpoint == nil {
		sp.LocalEndpoint = nilIfEmpty(copyEndpoint(e))
		return true
	}
	return sameService(sp.LocalEndpoint, e)
}

// forEndpoint returns the v2 span for local endpoint e: the first span for
// no endpoint, else the first span whose service name matches (claiming a
// span without endpoint), else a new one.
func (c *v1Converter) forEndpoint(src *v1Span, e *model.Endpoint) *model.Span {
	if e == nil {
		return c.spans[0]
	}
	for _, sp := range c.spans {
		if closeEnough(sp, e) {
			return sp
		}
	}
	return c.forkSpan(src, e)
}

func addAnnotation(sp *model.Span, ts int64, value string) {
	sp.Annotations = append(sp.Annotations, model.Annotation{Timestamp: ts, Value: value})
}

func (c *v1Converter) processAnnotations(src *v1Span) {
	for i := range src.annots {
		a := &src.annots[i]
		sp := c.forEndpoint(src, a.ep)
		if len(a.value) != 2 || a.ep == nil {
			addAnnotation(sp, a.ts, a.value)
			continue
		}
		switch a.value {
		case "cs":
			sp.Kind, c.cs = model.KindClient, a
		case "sr":
			sp.Kind, c.sr = model.KindServer, a
		case "ss":
			sp.Kind, c.ss = model.KindServer, a
		case "cr":
			sp.Kind, c.cr = model.KindClient, a
		case "ms":
			sp.Kind, c.ms = model.KindProducer, a
		case "mr":
			sp.Kind, c.mr = model.KindConsumer, a
		case "ws":
			c.ws = a
		case "wr":
			c.wr = a
		default:
			addAnnotation(sp, a.ts, a.value)
		}
	}

	// A start annotation may be missing when the span's timestamp and
	// duration say where it was.
	if c.cs == nil && endReflectsDuration(c.cr, src) {
		c.cs = &v1Annotation{ts: src.timestamp, value: "cs", ep: c.cr.ep}
	}
	if c.sr == nil && endReflectsDuration(c.ss, src) {
		c.sr = &v1Annotation{ts: src.timestamp, value: "sr", ep: c.ss.ep}
	}

	switch {
	case c.cs != nil && c.sr != nil:
		// One row holds both sides of an RPC: the client owns the span's
		// timestamp and duration; the server becomes a shared span timed by
		// its own annotations.
		c.timestampDuration(src, c.cs, c.cr)
		client := c.forEndpoint(src, c.cs.ep)
		var server *model.Span
		if sameService(c.cs.ep, c.sr.ep) { // loopback: two spans all the same
			client.Kind = model.KindClient
			server = c.forkSpan(src, c.sr.ep)
			server.Kind = model.KindServer
		} else {
			server = c.forEndpoint(src, c.sr.ep)
		}
		server.Shared = true
		server.Timestamp = c.sr.ts
		if c.ss != nil {
			server.Duration = c.ss.ts - c.sr.ts
		}
		if c.cr == nil && src.duration == 0 { // one-way RPC has no duration
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
	// (or with ss but no duration, the row shared with a client) is shared.
	if c.cs == nil && c.sr != nil && (src.timestamp == 0 || (c.ss != nil && src.duration == 0)) {
		c.forEndpoint(src, c.sr.ep).Shared = true
	}

	switch {
	case c.ms != nil && c.mr != nil:
		producer := c.forEndpoint(src, c.ms.ep)
		var consumer *model.Span
		if sameService(c.ms.ep, c.mr.ep) {
			producer.Kind = model.KindProducer
			consumer = c.forkSpan(src, c.mr.ep)
			consumer.Kind = model.KindConsumer
		} else {
			consumer = c.forEndpoint(src, c.mr.ep)
		}
		consumer.Shared = true
		if c.wr != nil {
			consumer.Timestamp, consumer.Duration = c.wr.ts, c.mr.ts-c.wr.ts
		} else {
			consumer.Timestamp = c.mr.ts
		}
		producer.Timestamp, producer.Duration = c.ms.ts, 0
		if c.ws != nil {
			producer.Duration = c.ws.ts - c.ms.ts
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
			addAnnotation(c.forEndpoint(src, c.ws.ep), c.ws.ts, c.ws.value)
		}
		if c.wr != nil {
			addAnnotation(c.forEndpoint(src, c.wr.ep), c.wr.ts, c.wr.value)
		}
	}
}

// incompleteRPC keeps what is known of an RPC missing one of its core
// annotations: the begin annotation's time as timestamp, the end one as a
// plain annotation, and the span's own timestamp and duration on the first
// span.
func (c *v1Converter) incompleteRPC(src *v1Span) {
	for _, sp := range c.spans {
		switch sp.Kind {
		case model.KindClient:
			if c.cs != nil {
				sp.Timestamp = c.cs.ts
			}
			if c.cr != nil {
				addAnnotation(sp, c.cr.ts, c.cr.value)
			}
		case model.KindServer:
			if c.sr != nil {
				sp.Timestamp = c.sr.ts
			}
			if c.ss != nil {
				addAnnotation(sp, c.ss.ts, c.ss.value)
			}
		}
	}
	if src.timestamp != 0 {
		c.spans[0].Timestamp, c.spans[0].Duration = src.timestamp, src.duration
	}
}

func endReflectsDuration(end *v1Annotation, src *v1Span) bool {
	return end != nil && src.timestamp != 0 && src.duration != 0 && src.timestamp+src.duration == end.ts
}

// timestampDuration times the span of begin's endpoint: from the span row
// when it has both timestamp and duration, else from the annotations.
func (c *v1Converter) timestampDuration(src *v1Span, begin, end *v1Annotation) {
	sp := c.forEndpoint(src, begin.ep)
	if src.timestamp != 0 && src.duration != 0 {
		sp.Timestamp, sp.Duration = src.timestamp, src.duration
		return
	}
	sp.Timestamp = begin.ts
	if end != nil {
		sp.Duration = end.ts - begin.ts
	}
}

func (c *v1Converter) processBinaries(src *v1Span) {
	var ca, sa, ma *model.Endpoint
	for i := range src.binaries {
		b := &src.binaries[i]
		if b.addr {
			switch b.key {
			case "ca":
				ca = b.ep
			case "sa":
				sa = b.ep
			case "ma":
				ma = b.ep
			}
			continue
		}
		sp := c.forEndpoint(src, b.ep)
		if b.key == "lc" && b.value == "" { // the local-component marker
			continue
		}
		if sp.Tags == nil {
			sp.Tags = make(map[string]string)
		}
		sp.Tags[b.key] = b.value
	}

	noCore := c.cs == nil && c.cr == nil && c.ss == nil && c.sr == nil
	if noCore && (ca != nil || sa != nil) {
		switch {
		case ca != nil && sa != nil:
			c.forEndpoint(src, ca).RemoteEndpoint = nilIfEmpty(copyEndpoint(sa))
		case sa != nil: // a remote address alone does not make a client
			c.forEndpoint(src, nil).RemoteEndpoint = nilIfEmpty(copyEndpoint(sa))
		default: // ca alone: a server
			sp := c.forEndpoint(src, nil)
			sp.Kind = model.KindServer
			sp.RemoteEndpoint = nilIfEmpty(copyEndpoint(ca))
		}
		return
	}

	server := c.sr
	if server == nil {
		server = c.ss
	}
	if ca != nil && server != nil && !sameEndpoint(ca, server.ep) {
		remote := copyEndpoint(ca)
		// Finagle records the client socket as "ca" with the server's own
		// service name; dropping it avoids a false loopback.
		if sameService(remote, server.ep) {
			remote.ServiceName = ""
		}
		c.forEndpoint(src, server.ep).RemoteEndpoint = nilIfEmpty(remote)
	}
	if sa != nil {
		if c.cs != nil {
			c.forEndpoint(src, c.cs.ep).RemoteEndpoint = nilIfEmpty(copyEndpoint(sa))
		} else if c.cr != nil {
			c.forEndpoint(src, c.cr.ep).RemoteEndpoint = nilIfEmpty(copyEndpoint(sa))
		}
	}
	if ma != nil {
		if c.ms != nil {
			c.forEndpoint(src, c.ms.ep).RemoteEndpoint = nilIfEmpty(copyEndpoint(ma))
		}
		if c.mr != nil {
			c.forEndpoint(src, c.mr.ep).RemoteEndpoint = nilIfEmpty(copyEndpoint(ma))
		}
	}
}

func copyEndpoint(e *model.Endpoint) *model.Endpoint {
	if e == nil {
		return nil
	}
	c := *e
	return &c
}
