package codec

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sqlpool/sqlpool/zipkin/model"
)

// DecodeJSONV1 decodes a JSON v1 list of spans (the body of POST
// /api/v1/spans) and converts each to v2 spans as Zipkin's V1SpanConverter
// does: core annotations (cs, sr, cr, ss, ms, mr, ws, wr) with an endpoint
// become kind, timestamp and duration; string binary annotations become
// tags (an empty "lc" marker is dropped); true boolean binary annotations
// "sa", "ca" and "ma" with an endpoint become the remote endpoint; one v1
// span with both cs and sr becomes a CLIENT span and a shared SERVER span;
// annotations are split among spans by their endpoint's service name.
//
// Errors are reported as DecodeJSONV2 reports them, by the index of the v1
// span; the spans returned are the v2 spans of the valid v1 spans.
func DecodeJSONV1(data []byte) ([]model.Span, error) {
	return DecodeJSONV1String(string(data))
}

// DecodeJSONV1String is DecodeJSONV1 for a body already held in a string;
// it does not copy s.
func DecodeJSONV1String(s string) ([]model.Span, error) {
	d := jsonDecoder{r: jsonReader{s: s}, format: JSONV1, v1: &v1State{}}
	return d.decodeList((*jsonDecoder).spanV1)
}

type v1Annotation struct {
	ts       int64
	value    string
	endpoint *model.Endpoint
}

type v1Binary struct {
	key      string
	value    string
	address  bool // a true boolean sa/ca/ma with an endpoint; else a string tag
	endpoint *model.Endpoint
}

type v1State struct {
	annotations []v1Annotation
	binary      []v1Binary
	// converter state
	spans                          []*model.Span
	cs, sr, ss, cr, ms, mr, ws, wr *v1Annotation
}

type v1Span struct {
	traceID             model.TraceID
	parentID, id        model.ID
	name                string
	timestamp, duration int64
	debug               bool
}

// spanV1 reads one v1 span and appends its v2 spans to d.out when valid.
func (d *jsonDecoder) spanV1() {
	r := &d.r
	if err := r.startObject(); err != nil {
		d.spanErr(d.path(""), err)
		return
	}
	st := d.v1
	st.annotations = st.annotations[:0]
	st.binary = st.binary[:0]
	var src v1Span
	var hasTrace, hasID bool
	for first := true; r.more(&first, '}'); {
		name := r.name()
		if r.failed() {
			return
		}
		switch name {
		case "traceId":
			s, err := r.readString()
			if err == nil {
				src.traceID, err = model.ParseTraceID(s)
			}
			if err != nil {
				d.spanErr(d.path(".traceId"), err)
			}
			hasTrace = true
			continue
		case "id":
			s, err := r.readString()
			if err == nil {
				src.id, err = model.ParseID("id", s)
			}
			if err != nil {
				d.spanErr(d.path(".id"), err)
			}
			hasID = true
			continue
		}
		if r.isNull() {
			continue
		}
		switch name {
		case "name":
			s, err := r.readString()
			if err != nil {
				d.spanErr(d.path(".name"), err)
			}
			src.name = s
		case "parentId":
			s, err := r.readString()
			if err == nil {
				src.parentID, err = model.ParseID("parentId", s)
				if errors.Is(err, model.ErrZeroID) {
					err = nil
				}
			}
			if err != nil {
				d.spanErr(d.path(".parentId"), err)
			}
		case "timestamp", "duration":
			v, err := r.readLong("a long", math.MinInt64, math.MaxInt64)
			if err != nil {
				d.spanErr(d.path("."+name), err)
			}
			if name == "timestamp" {
				src.timestamp = max(v, 0)
			} else {
				src.duration = max(v, 0)
			}
		case "annotations":
			d.annotations(".annotations", true)
		case "binaryAnnotations":
			d.binaryAnnotations()
		case "debug":
			v, err := r.readBool()
			if err != nil {
				d.spanErr(d.path(".debug"), err)
			}
			src.debug = src.debug || v
		default:
			r.skip()
		}
	}
	if r.failed() {
		return
	}
	if err := missingIDs(hasTrace, hasID); err != nil {
		d.spanErr(d.path(""), err)
	}
	if d.bad {
		return
	}
	d.convertV1(&src)
}

func (d *jsonDecoder) binaryAnnotations() {
	r := &d.r
	const field = ".binaryAnnotations"
	if err := r.startArray(); err != nil {
		d.spanErr(d.path(field), err)
		return
	}
	j := 0
	for first := true; r.more(&first, ']'); j++ {
		if err := r.startObject(); err != nil {
			d.spanErr(d.path(field+"["+strconv.Itoa(j)+"]"), err)
			continue
		}
		var key, str string
		var hasKey, hasStr, boolValue bool
		var ep *model.Endpoint
		for f := true; r.more(&f, '}'); {
			name := r.name()
			if r.isNull() {
				continue
			}
			switch name {
			case "key":
				s, err := r.readString()
				if err != nil {
					d.spanErr(d.path(field+"["+strconv.Itoa(j)+"].key"), err)
				}
				key, hasKey = s, true
			case "value":
				switch r.peek() {
				case '"':
					str, hasStr = r.str(), true
				case 't', 'f':
					boolValue, _ = r.readBool()
				default:
					r.skip()
				}
			case "endpoint":
				ep = d.endpoint(field + "[" + strconv.Itoa(j) + "].endpoint")
			default:
				r.skip()
			}
		}
		if r.failed() {
			return
		}
		if !hasKey {
			d.spanErr("", errString("No key at "+d.path(field+"["+strconv.Itoa(j)+"]")))
			continue
		}
		switch {
		case hasStr:
			d.v1.binary = append(d.v1.binary, v1Binary{key: key, value: str, endpoint: ep})
		case boolValue && ep != nil && (key == "sa" || key == "ca" || key == "ma"):
			d.v1.binary = append(d.v1.binary, v1Binary{key: key, address: true, endpoint: ep})
		}
	}
}

// convertV1 is Zipkin's V1SpanConverter: it appends the v2 spans of src.
func (d *jsonDecoder) convertV1(src *v1Span) {
	st := d.v1
	st.spans = st.spans[:0]
	st.cs, st.sr, st.ss, st.cr, st.ms, st.mr, st.ws, st.wr = nil, nil, nil, nil, nil, nil, nil, nil
	d.newV2(src, nil) // the first span
	slices.SortStableFunc(st.annotations, func(a, b v1Annotation) int { return cmp.Compare(a.ts, b.ts) })

	// Annotations: core ones (with an endpoint) set kind; others are kept.
	for i := range st.annotations {
		a := &st.annotations[i]
		cur := d.forEndpoint(src, a.endpoint)
		if len(a.value) == 2 && a.endpoint != nil {
			switch a.value {
			case "cs":
				cur.Kind, st.cs = model.KindClient, a
				continue
			case "sr":
				cur.Kind, st.sr = model.KindServer, a
				continue
			case "ss":
				cur.Kind, st.ss = model.KindServer, a
				continue
			case "cr":
				cur.Kind, st.cr = model.KindClient, a
				continue
			case "ms":
				cur.Kind, st.ms = model.KindProducer, a
				continue
			case "mr":
				cur.Kind, st.mr = model.KindConsumer, a
				continue
			case "ws":
				st.ws = a
				continue
			case "wr":
				st.wr = a
				continue
			}
		}
		cur.Annotations = append(cur.Annotations, model.Annotation{Timestamp: a.ts, Value: a.value})
	}

	// A missing start annotation implied by the span's own timing.
	if st.cs == nil && endReflectsDuration(st.cr, src) {
		st.cs = &v1Annotation{src.timestamp, "cs", st.cr.endpoint}
	}
	if st.sr == nil && endReflectsDuration(st.ss, src) {
		st.sr = &v1Annotation{src.timestamp, "sr", st.ss.endpoint}
	}

	switch {
	case st.cs != nil && st.sr != nil:
		// The client owns the span's timing; the server half is shared.
		d.timestampDuration(src, st.cs, st.cr)
		client := d.forEndpoint(src, st.cs.endpoint)
		var server *model.Span
		if sameService(st.cs.endpoint, st.sr.endpoint) {
			client.Kind = model.KindClient
			server = d.newV2(src, st.sr.endpoint)
			server.Kind = model.KindServer
		} else {
			server = d.forEndpoint(src, st.sr.endpoint)
		}
		server.Shared = true
		server.Timestamp = st.sr.ts
		if st.ss != nil {
			server.Duration = st.ss.ts - st.sr.ts
		}
		if st.cr == nil && src.duration == 0 {
			client.Duration = 0
		}
	case st.cs != nil && st.cr != nil:
		d.timestampDuration(src, st.cs, st.cr)
	case st.sr != nil && st.ss != nil:
		d.timestampDuration(src, st.sr, st.ss)
	default: // an incomplete RPC
		for _, s := range st.spans {
			switch s.Kind {
			case model.KindClient:
				if st.cs != nil {
					s.Timestamp = st.cs.ts
				}
				if st.cr != nil {
					s.Annotations = append(s.Annotations, model.Annotation{Timestamp: st.cr.ts, Value: st.cr.value})
				}
			case model.KindServer:
				if st.sr != nil {
					s.Timestamp = st.sr.ts
				}
				if st.ss != nil {
					s.Annotations = append(s.Annotations, model.Annotation{Timestamp: st.ss.ts, Value: st.ss.value})
				}
			}
		}
		if src.timestamp != 0 {
			st.spans[0].Timestamp, st.spans[0].Duration = src.timestamp, src.duration
		}
	}

	// v1 had no shared flag: a server side without the span's own timestamp
	// (or without its duration despite "ss") is shared.
	if st.cs == nil && st.sr != nil && (src.timestamp == 0 || (st.ss != nil && src.duration == 0)) {
		d.forEndpoint(src, st.sr.endpoint).Shared = true
	}

	switch {
	case st.ms != nil && st.mr != nil:
		producer := d.forEndpoint(src, st.ms.endpoint)
		var consumer *model.Span
		if sameService(st.ms.endpoint, st.mr.endpoint) {
			producer.Kind = model.KindProducer
			consumer = d.newV2(src, st.mr.endpoint)
			consumer.Kind = model.KindConsumer
		} else {
			consumer = d.forEndpoint(src, st.mr.endpoint)
		}
		consumer.Shared = true
		if st.wr != nil {
			consumer.Timestamp, consumer.Duration = st.wr.ts, st.mr.ts-st.wr.ts
		} else {
			consumer.Timestamp = st.mr.ts
		}
		producer.Timestamp, producer.Duration = st.ms.ts, 0
		if st.ws != nil {
			producer.Duration = st.ws.ts - st.ms.ts
		}
	case st.ms != nil:
		d.timestampDuration(src, st.ms, st.ws)
	case st.mr != nil:
		if st.wr != nil {
			d.timestampDuration(src, st.wr, st.mr)
		} else {
			d.timestampDuration(src, st.mr, nil)
		}
	default:
		if st.ws != nil {
			s := d.forEndpoint(src, st.ws.endpoint)
			s.Annotations = append(s.Annotations, model.Annotation{Timestamp: st.ws.ts, Value: st.ws.value})
		}
		if st.wr != nil {
			s := d.forEndpoint(src, st.wr.endpoint)
			s.Annotations = append(s.Annotations, model.Annotation{Timestamp: st.wr.ts, Value: st.wr.value})
		}
	}

	// Binary annotations: string ones are tags, addresses are remotes.
	var ca, sa, ma *model.Endpoint
	for i := range st.binary {
		b := &st.binary[i]
		if b.address {
			switch b.key {
			case "ca":
				ca = b.endpoint
			case "sa":
				sa = b.endpoint
			case "ma":
				ma = b.endpoint
			}
			continue
		}
		cur := d.forEndpoint(src, b.endpoint)
		if b.key == "lc" && b.value == "" {
			continue
		}
		if cur.Tags == nil {
			cur.Tags = make(map[string]string, len(st.binary))
		}
		cur.Tags[b.key] = b.value
	}
	noCore := st.cs == nil && st.cr == nil && st.ss == nil && st.sr == nil
	if noCore && (ca != nil || sa != nil) {
		switch {
		case ca != nil && sa != nil:
			d.forEndpoint(src, ca).RemoteEndpoint = d.keepEndpoint(sa)
		case sa != nil: // a default remote address: not a client span
			d.forEndpoint(src, nil).RemoteEndpoint = d.keepEndpoint(sa)
		default: // ca alone: a server
			s := d.forEndpoint(src, nil)
			s.Kind = model.KindServer
			s.RemoteEndpoint = d.keepEndpoint(ca)
		}
	} else {
		server := st.sr
		if server == nil {
			server = st.ss
		}
		if ca != nil && server != nil && !endpointsEqual(ca, server.endpoint) {
			c := *ca
			// Finagle reports the client socket as "ca" under the server's
			// own name: drop the name so it does not look like a loopback.
			if sameService(ca, server.endpoint) {
				c.ServiceName = ""
			}
			d.forEndpoint(src, server.endpoint).RemoteEndpoint = d.keepEndpoint(&c)
		}
		if sa != nil {
			if st.cs != nil {
				d.forEndpoint(src, st.cs.endpoint).RemoteEndpoint = d.keepEndpoint(sa)
			} else if st.cr != nil {
				d.forEndpoint(src, st.cr.endpoint).RemoteEndpoint = d.keepEndpoint(sa)
			}
		}
		if ma != nil {
			if st.ms != nil {
				d.forEndpoint(src, st.ms.endpoint).RemoteEndpoint = d.keepEndpoint(ma)
			}
			if st.mr != nil {
				d.forEndpoint(src, st.mr.endpoint).RemoteEndpoint = d.keepEndpoint(ma)
			}
		}
	}

	for _, s := range st.spans {
		s.Normalize()
		d.out = append(d.out, *s)
	}
}

func endReflectsDuration(end *v1Annotation, src *v1Span) bool {
	return end != nil && src.timestamp != 0 && src.duration != 0 && src.timestamp+src.duration == end.ts
}

// timestampDuration takes the span's own timing when complete, else the
// begin and end annotations'.
func (d *jsonDecoder) timestampDuration(src *v1Span, begin, end *v1Annotation) {
	s := d.forEndpoint(src, begin.endpoint)
	if src.timestamp != 0 && src.duration != 0 {
		s.Timestamp, s.Duration = src.timestamp, src.duration
		return
	}
	s.Timestamp = begin.ts
	if end != nil {
		s.Duration = end.ts - begin.ts
	}
}

// newV2 starts a v2 span of src with local endpoint e (copied).
func (d *jsonDecoder) newV2(src *v1Span, e *model.Endpoint) *model.Span {
	s := &model.Span{TraceID: src.traceID, ParentID: src.parentID, ID: src.id, Name: src.name, Debug: src.debug}
	if e != nil {
		s.LocalEndpoint = d.keepEndpoint(e)
	}
	d.v1.spans = append(d.v1.spans, s)
	return s
}

// forEndpoint returns the v2 span whose local service is e's, claiming the
// first span without a local endpoint, or starts one; nil e is the first.
func (d *jsonDecoder) forEndpoint(src *v1Span, e *model.Endpoint) *model.Span {
	if e == nil {
		return d.v1.spans[0]
	}
	for _, s := range d.v1.spans {
		if s.LocalEndpoint == nil {
			s.LocalEndpoint = d.keepEndpoint(e)
			return s
		}
		if sameService(s.LocalEndpoint, e) {
			return s
		}
	}
	return d.newV2(src, e)
}

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

func endpointsEqual(a, b *model.Endpoint) bool {
	if a == nil || b == nil {
		return a == b
	}
	return strings.EqualFold(a.ServiceName, b.ServiceName) && a.IPv4 == b.IPv4 && a.IPv6 == b.IPv6 && a.Port == b.Port
}
