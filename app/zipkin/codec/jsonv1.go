package codec

import (
	"errors"
	"math"
	"strconv"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	v1 "github.com/sqlpool/sqlpool/app/zipkin/model/v1"
)

// DecodeJSONV1 decodes a JSON v1 list of spans (the body of POST
// /api/v1/spans) and converts each to v2 spans with [v1.Converter]
// (Zipkin's V1SpanConverter, shared with the MySQL store's reader): core
// annotations (cs, sr, cr, ss, ms, mr, ws, wr) with an endpoint become
// kind, timestamp and duration; string binary annotations become tags (an
// empty "lc" marker is dropped); true boolean binary annotations "sa", "ca"
// and "ma" with an endpoint become the remote endpoint; one v1 span with
// both cs and sr becomes a CLIENT span and a shared SERVER span;
// annotations are split among spans by their endpoint's service name. Other
// binary annotation types have no v2 form and are ignored.
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

// v1State is the JSON v1 decoder's scratch: the v1 span being read and the
// converter, both reused from span to span.
type v1State struct {
	span v1.Span
	conv v1.Converter
}

// spanV1 reads one v1 span and appends its v2 spans to d.out when valid.
func (d *jsonDecoder) spanV1() {
	r := &d.r
	if err := r.startObject(); err != nil {
		d.spanErr(d.path(""), err)
		return
	}
	src := &d.v1.span
	*src = v1.Span{Annotations: src.Annotations[:0], BinaryAnnotations: src.BinaryAnnotations[:0]}
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
				src.TraceID, err = model.ParseTraceID(s)
			}
			if err != nil {
				d.spanErr(d.path(".traceId"), err)
			}
			hasTrace = true
			continue
		case "id":
			s, err := r.readString()
			if err == nil {
				src.ID, err = model.ParseID("id", s)
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
			src.Name = s
		case "parentId":
			s, err := r.readString()
			if err == nil {
				src.ParentID, err = model.ParseID("parentId", s)
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
				src.Timestamp = max(v, 0)
			} else {
				src.Duration = max(v, 0)
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
			src.Debug = src.Debug || v
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
	d.out = d.v1.conv.Convert(src, d.out)
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
			d.v1.span.BinaryAnnotations = append(d.v1.span.BinaryAnnotations, v1.BinaryAnnotation{Key: key, Value: str, Endpoint: ep})
		case boolValue && ep != nil && (key == "sa" || key == "ca" || key == "ma"):
			d.v1.span.BinaryAnnotations = append(d.v1.span.BinaryAnnotations, v1.BinaryAnnotation{Key: key, Address: true, Endpoint: ep})
		}
	}
}
