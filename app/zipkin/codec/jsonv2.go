package codec

import (
	"errors"
	"math"
	"net/netip"
	"strconv"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	v1 "github.com/sqlpool/sqlpool/app/zipkin/model/v1"
)

// DecodeJSONV2 decodes a JSON v2 list of spans (the body of POST
// /api/v2/spans) with Zipkin's leniency and validation, and normalises each
// span.
//
// It returns the valid spans in input order. When some span is invalid, or
// the JSON is broken, the error is a *BatchError naming every invalid span
// by index, and the returned spans are the valid ones read (after broken
// JSON: those before the break). An empty body (or one of only white space)
// decodes to no spans and no error.
//
// Unescaped strings in the result share memory with one copy of data, so
// the spans keep that copy alive while they are referenced; data itself is
// not retained and may be reused by the caller.
func DecodeJSONV2(data []byte) ([]model.Span, error) {
	return DecodeJSONV2String(string(data))
}

// DecodeJSONV2String is DecodeJSONV2 for a body already held in a string;
// it does not copy s.
func DecodeJSONV2String(s string) ([]model.Span, error) {
	d := jsonDecoder{r: jsonReader{s: s}, format: JSONV2}
	return d.decodeList((*jsonDecoder).spanV2)
}

// jsonDecoder holds the state shared by the JSON v1 and v2 decoders.
type jsonDecoder struct {
	r      jsonReader
	format Format
	out    []model.Span
	errs   []SpanError
	index  int  // of the span being read
	bad    bool // the span being read has an error recorded

	epSlab  []model.Endpoint
	annSlab []model.Annotation
	anns    []model.Annotation // scratch for the current span
	tags    []tagKV            // scratch for the current span
	v1      *v1State
}

type tagKV struct{ k, v string }

func (d *jsonDecoder) decodeList(readSpan func(*jsonDecoder)) ([]model.Span, error) {
	r := &d.r
	if r.peek() == 0 {
		return nil, nil
	}
	d.index = -1
	if r.peek() != '[' {
		r.fail("expected '[', a list of spans")
	} else {
		r.open('[')
		if n := len(r.s) / 400; n > 0 {
			d.out = make([]model.Span, 0, min(n, 4096))
		}
		i := 0
		for first := true; r.more(&first, ']'); i++ {
			d.index = i
			d.bad = false
			readSpan(d)
			if r.err != nil {
				break
			}
			d.index = -1
		}
		if r.err == nil {
			if r.peek() != 0 {
				r.fail("unexpected data after the list")
			}
		}
	}
	if r.err != nil {
		d.errs = append(d.errs, SpanError{Index: d.index, Err: r.err})
	}
	if len(d.errs) > 0 {
		return d.out, &BatchError{Format: d.format, Errors: d.errs, Malformed: r.err != nil}
	}
	return d.out, nil
}

// spanErr records the current span's first error; path is built by the
// caller only when there is an error.
func (d *jsonDecoder) spanErr(path string, err error) {
	if d.bad {
		return
	}
	d.bad = true
	d.errs = append(d.errs, SpanError{Index: d.index, Path: path, Err: err})
}

func (d *jsonDecoder) path(field string) string {
	return "$[" + strconv.Itoa(d.index) + "]" + field
}

// spanV2 reads one v2 span and appends it to d.out when valid.
func (d *jsonDecoder) spanV2() {
	r := &d.r
	if err := r.startObject(); err != nil {
		d.spanErr(d.path(""), err)
		return
	}
	var sp model.Span
	var hasTrace, hasID bool
	d.anns = d.anns[:0]
	d.tags = d.tags[:0]
	hasTags := false
	for first := true; r.more(&first, '}'); {
		name := r.name()
		if r.failed() {
			return
		}
		switch name {
		case "traceId":
			s, err := r.readString()
			if err == nil {
				sp.TraceID, err = model.ParseTraceID(s)
			}
			if err != nil {
				d.spanErr(d.path(".traceId"), err)
			}
			hasTrace = true
			continue
		case "id":
			s, err := r.readString()
			if err == nil {
				var id model.ID
				id, err = model.ParseID("id", s)
				sp.ID = id
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
		case "parentId":
			s, err := r.readString()
			if err == nil {
				sp.ParentID, err = model.ParseID("parentId", s)
				if errors.Is(err, model.ErrZeroID) {
					err = nil
				}
			}
			if err != nil {
				d.spanErr(d.path(".parentId"), err)
			}
		case "kind":
			s, err := r.readString()
			if err == nil {
				sp.Kind = model.Kind(s)
				if s == "" || !sp.Kind.Valid() {
					err = errString("No enum constant zipkin2.Span.Kind." + s)
				}
			}
			if err != nil {
				d.spanErr(d.path(".kind"), err)
			}
		case "name":
			s, err := r.readString()
			if err != nil {
				d.spanErr(d.path(".name"), err)
			}
			sp.Name = s
		case "timestamp":
			v, err := r.readLong("a long", math.MinInt64, math.MaxInt64)
			if err != nil {
				d.spanErr(d.path(".timestamp"), err)
			}
			sp.Timestamp = max(v, 0)
		case "duration":
			v, err := r.readLong("a long", math.MinInt64, math.MaxInt64)
			if err != nil {
				d.spanErr(d.path(".duration"), err)
			}
			sp.Duration = max(v, 0)
		case "localEndpoint":
			sp.LocalEndpoint = d.endpoint(".localEndpoint")
		case "remoteEndpoint":
			sp.RemoteEndpoint = d.endpoint(".remoteEndpoint")
		case "annotations":
			d.annotations(".annotations", false)
		case "tags":
			hasTags = true
			d.readTags()
		case "debug":
			v, err := r.readBool()
			if err != nil {
				d.spanErr(d.path(".debug"), err)
			}
			sp.Debug = sp.Debug || v
		case "shared":
			v, err := r.readBool()
			if err != nil {
				d.spanErr(d.path(".shared"), err)
			}
			sp.Shared = sp.Shared || v
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
	sp.Annotations = d.takeAnnotations()
	if hasTags {
		sp.Tags = d.takeTags()
	}
	sp.Normalize()
	d.out = append(d.out, sp)
}

// endpoint reads an endpoint object; nil when it has no known field.
func (d *jsonDecoder) endpoint(field string) *model.Endpoint {
	r := &d.r
	if err := r.startObject(); err != nil {
		d.spanErr(d.path(field), err)
		return nil
	}
	var e model.Endpoint
	for first := true; r.more(&first, '}'); {
		name := r.name()
		if r.isNull() {
			continue
		}
		switch name {
		case "serviceName":
			s, err := r.readString()
			if err != nil {
				d.spanErr(d.path(field+".serviceName"), err)
			}
			e.ServiceName = s
		case "ipv4", "ipv6":
			s, err := r.readString()
			if err != nil {
				d.spanErr(d.path(field+"."+name), err)
			}
			setIP(&e, s)
		case "port":
			v, err := r.readLong("an int", math.MinInt32, math.MaxInt32)
			if err == nil && v > 0xffff {
				err = errString("invalid port " + strconv.FormatInt(v, 10))
			}
			if err != nil {
				d.spanErr(d.path(field+".port"), err)
			}
			if v > 0 {
				e.Port = int(v)
			}
		default:
			r.skip()
		}
	}
	return d.keepEndpoint(&e)
}

// keepEndpoint returns a stable pointer to a copy of e from a slab, or nil
// for an empty endpoint.
func (d *jsonDecoder) keepEndpoint(e *model.Endpoint) *model.Endpoint {
	if e.IsZero() {
		return nil
	}
	if len(d.epSlab) == cap(d.epSlab) {
		// Slabs grow from 2 to 32 endpoints, so that a message of one
		// span (a Kafka record, a RabbitMQ message) does not keep a
		// 32-endpoint slab alive in the ingest queue.
		d.epSlab = make([]model.Endpoint, 0, min(32, max(2, 2*cap(d.epSlab))))
	}
	d.epSlab = append(d.epSlab, *e)
	return &d.epSlab[len(d.epSlab)-1]
}

// setIP stores s in the IPv4 or IPv6 field by what it parses as; text that
// is not an IP address is ignored, as Zipkin does.
func setIP(e *model.Endpoint, s string) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return
	}
	a = a.WithZone("")
	if a.Is4In6() {
		a = a.Unmap()
	}
	if a.Is4() {
		e.IPv4 = a
	} else {
		e.IPv6 = a
	}
}

// annotations reads an annotation list into d.anns. withEndpoint is for v1,
// whose annotations carry an endpoint: they go to the v1 span being read.
func (d *jsonDecoder) annotations(field string, withEndpoint bool) {
	r := &d.r
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
		var a model.Annotation
		var ep *model.Endpoint
		hasTS, hasValue := false, false
		for f := true; r.more(&f, '}'); {
			name := r.name()
			switch name {
			case "timestamp":
				v, err := r.readLong("a long", math.MinInt64, math.MaxInt64)
				if err != nil {
					d.spanErr(d.path(field+"["+strconv.Itoa(j)+"].timestamp"), err)
				}
				a.Timestamp, hasTS = v, true
			case "value":
				s, err := r.readString()
				if err != nil {
					d.spanErr(d.path(field+"["+strconv.Itoa(j)+"].value"), err)
				}
				a.Value, hasValue = s, true
			case "endpoint":
				if withEndpoint && !r.isNull() {
					ep = d.endpoint(field + "[" + strconv.Itoa(j) + "].endpoint")
					continue
				}
				r.skip()
			default:
				r.skip()
			}
		}
		if r.failed() {
			return
		}
		if !hasTS || !hasValue {
			d.spanErr("", errString("Incomplete annotation at "+d.path(field+"["+strconv.Itoa(j)+"]")))
			continue
		}
		if withEndpoint {
			d.v1.span.Annotations = append(d.v1.span.Annotations, v1.Annotation{Timestamp: a.Timestamp, Value: a.Value, Endpoint: ep})
		} else {
			d.anns = append(d.anns, a)
		}
	}
}

func (d *jsonDecoder) readTags() {
	r := &d.r
	if err := r.startObject(); err != nil {
		d.spanErr(d.path(".tags"), err)
		return
	}
	for first := true; r.more(&first, '}'); {
		k := r.name()
		if r.isNull() {
			d.spanErr("", errString("No value at "+d.path(".tags."+k)))
			continue
		}
		v, err := r.readString()
		if err != nil {
			d.spanErr(d.path(".tags."+k), err)
		}
		d.tags = append(d.tags, tagKV{k, v})
	}
}

// takeAnnotations moves d.anns into the annotation slab and returns the
// span's slice of it (capacity-limited, so appends never overwrite a
// neighbour), or nil.
func (d *jsonDecoder) takeAnnotations() []model.Annotation {
	n := len(d.anns)
	if n == 0 {
		return nil
	}
	if cap(d.annSlab)-len(d.annSlab) < n {
		d.annSlab = make([]model.Annotation, 0, max(n, min(128, 2*cap(d.annSlab)))) // grows as the endpoint slabs do
	}
	start := len(d.annSlab)
	d.annSlab = append(d.annSlab, d.anns...)
	return d.annSlab[start : start+n : start+n]
}

func (d *jsonDecoder) takeTags() map[string]string {
	if len(d.tags) == 0 {
		return nil
	}
	m := make(map[string]string, len(d.tags))
	for _, kv := range d.tags {
		m[kv.k] = kv.v
	}
	return m
}
