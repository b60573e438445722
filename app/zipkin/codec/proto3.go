package codec

import (
	"encoding/binary"
	"math"
	"net/netip"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// Field numbers of zipkin.proto (ListOfSpans, Span, Endpoint, Annotation).
const (
	pbListSpans = 1

	pbTraceID        = 1
	pbParentID       = 2
	pbID             = 3
	pbKind           = 4
	pbName           = 5
	pbTimestamp      = 6
	pbDuration       = 7
	pbLocalEndpoint  = 8
	pbRemoteEndpoint = 9
	pbAnnotations    = 10
	pbTags           = 11
	pbDebug          = 12
	pbShared         = 13

	pbEndpointServiceName = 1
	pbEndpointIPv4        = 2
	pbEndpointIPv6        = 3
	pbEndpointPort        = 4

	pbAnnotationTimestamp = 1
	pbAnnotationValue     = 2

	pbMapKey   = 1
	pbMapValue = 2
)

var pbKinds = [...]model.Kind{"", model.KindClient, model.KindServer, model.KindProducer, model.KindConsumer}

// DecodeProto3 decodes a proto3 ListOfSpans (POST /api/v2/spans with
// Content-Type application/x-protobuf), validates and normalises each
// span, and reports invalid spans by index in a *BatchError, as
// DecodeJSONV2 does. An empty body decodes to no spans and no error.
//
// It follows Zipkin's proto3 reader: trace_id must be 8 or 16 bytes and
// id 8 bytes, neither all zeros, and both present; parent_id is 8 bytes,
// all zeros meaning absent; a port above 65535 is an error. Unknown
// fields, fields of an unexpected wire type, unknown kinds, IP addresses
// of the wrong length, annotations without a timestamp or value, and tags
// without a key are ignored, as Zipkin's reader does. A span whose bytes
// are corrupt within its own length is one invalid span; a break in the
// list's own framing stops the read (BatchError.Malformed).
//
// Strings in the result share one copy of data, as with DecodeJSONV2.
func DecodeProto3(data []byte) ([]model.Span, error) {
	if len(data) == 0 {
		return nil, nil
	}
	d := pbDecoder{s: string(data), capData: cap(data)}
	b := data
	index := 0
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			d.malformed(index, len(data)-len(b), n)
			break
		}
		b = b[n:]
		if num != pbListSpans || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				d.malformed(index, len(data)-len(b), n)
				break
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			d.malformed(index, len(data)-len(b), n)
			break
		}
		b = b[n:]
		d.span(index, v)
		index++
	}
	if len(d.errs) > 0 {
		return d.out, &BatchError{Format: Proto3, Errors: d.errs, Malformed: d.broken}
	}
	return d.out, nil
}

type pbDecoder struct {
	s       string // the input, for substrings
	capData int    // cap of the input slice: a sub-slice v starts at capData-cap(v)
	out     []model.Span
	errs    []SpanError
	broken  bool
	epSlab  []model.Endpoint

	index int
	fail  *SpanError
}

func (d *pbDecoder) malformed(index, off, n int) {
	d.broken = true
	d.errs = append(d.errs, SpanError{Index: index, Err: &syntaxError{msg: protowire.ParseError(n).Error(), off: off}})
}

// str returns the input's bytes v (a sub-slice of it) as a string without
// copying.
func (d *pbDecoder) str(v []byte) string {
	off := d.capData - cap(v)
	return d.s[off : off+len(v)]
}

// bad records the current span's first problem.
func (d *pbDecoder) bad(path string, err error) {
	if d.fail == nil {
		p := "spans[" + strconv.Itoa(d.index) + "]"
		if path != "" {
			p += "." + path
		}
		d.fail = &SpanError{Index: d.index, Path: p, Err: err}
	}
}

// corrupt records broken framing inside the current span at b.
func (d *pbDecoder) corrupt(path string, b []byte, n int) {
	d.bad(path, &syntaxError{msg: protowire.ParseError(n).Error(), off: d.capData - cap(b)})
}

// fields calls f for each field of message m, skipping values f leaves
// (f returns how many bytes of b it consumed, or -1 to skip the value, or
// a negative protowire code). It reports whether m was well formed.
func (d *pbDecoder) fields(path string, m []byte, f func(num protowire.Number, typ protowire.Type, b []byte) int) bool {
	for b := m; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			d.corrupt(path, b, n)
			return false
		}
		b = b[n:]
		n = f(num, typ, b)
		if n == -1 {
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			d.corrupt(path, b, n)
			return false
		}
		b = b[n:]
	}
	return true
}

// span decodes one Span message m.
func (d *pbDecoder) span(index int, m []byte) {
	d.index, d.fail = index, nil
	var sp model.Span
	var hasTrace, hasID bool
	var anns []model.Annotation
	d.fields("", m, func(num protowire.Number, typ protowire.Type, b []byte) int {
		switch typ {
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return n
			}
			switch num {
			case pbTraceID:
				hasTrace = true
				switch len(v) {
				case 16:
					sp.TraceID = model.TraceID{High: binary.BigEndian.Uint64(v), Low: binary.BigEndian.Uint64(v[8:])}
				case 8:
					sp.TraceID = model.TraceID{Low: binary.BigEndian.Uint64(v)}
				default:
					d.bad("trace_id", errString("trace_id must be 8 or 16 bytes but was "+strconv.Itoa(len(v))))
					return n
				}
				if sp.TraceID.IsZero() {
					d.bad("trace_id", &model.IDError{Field: "traceId", Value: sp.TraceID.String(), Msg: "traceId is all zeros"})
				}
			case pbParentID, pbID:
				field := "parent_id"
				if num == pbID {
					field, hasID = "id", true
				}
				if len(v) != 8 {
					d.bad(field, errString(field+" must be 8 bytes but was "+strconv.Itoa(len(v))))
					return n
				}
				id := model.ID(binary.BigEndian.Uint64(v))
				if num == pbParentID {
					sp.ParentID = id
				} else if sp.ID = id; id == 0 {
					d.bad(field, &model.IDError{Field: "id", Value: "0000000000000000", Msg: "id is all zeros"})
				}
			case pbName:
				sp.Name = d.str(v)
			case pbLocalEndpoint:
				sp.LocalEndpoint = d.endpoint("local_endpoint", v)
			case pbRemoteEndpoint:
				sp.RemoteEndpoint = d.endpoint("remote_endpoint", v)
			case pbAnnotations:
				var a model.Annotation
				hasTS, hasValue := false, false
				d.fields("annotations["+strconv.Itoa(len(anns))+"]", v, func(num protowire.Number, typ protowire.Type, b []byte) int {
					switch {
					case num == pbAnnotationTimestamp && typ == protowire.Fixed64Type:
						ts, n := protowire.ConsumeFixed64(b)
						a.Timestamp, hasTS = int64(ts), n > 0
						return n
					case num == pbAnnotationValue && typ == protowire.BytesType:
						s, n := protowire.ConsumeBytes(b)
						if n > 0 {
							a.Value, hasValue = d.str(s), true
						}
						return n
					}
					return -1
				})
				if hasTS && a.Timestamp != 0 && hasValue {
					anns = append(anns, a)
				}
			case pbTags:
				var k, val string
				hasKey := false
				d.fields("tags", v, func(num protowire.Number, typ protowire.Type, b []byte) int {
					if typ != protowire.BytesType || (num != pbMapKey && num != pbMapValue) {
						return -1
					}
					s, n := protowire.ConsumeBytes(b)
					if n > 0 {
						if num == pbMapKey {
							k, hasKey = d.str(s), true
						} else {
							val = d.str(s)
						}
					}
					return n
				})
				if hasKey {
					if sp.Tags == nil {
						sp.Tags = make(map[string]string, 8)
					}
					sp.Tags[k] = val
				}
			}
			return n
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return n
			}
			switch num {
			case pbKind:
				if v < uint64(len(pbKinds)) {
					sp.Kind = pbKinds[v]
				}
			case pbDuration:
				if v <= math.MaxInt64 {
					sp.Duration = int64(v)
				}
			case pbDebug:
				sp.Debug = sp.Debug || v != 0
			case pbShared:
				sp.Shared = sp.Shared || v != 0
			}
			return n
		case protowire.Fixed64Type:
			if num != pbTimestamp {
				return -1
			}
			v, n := protowire.ConsumeFixed64(b)
			if n > 0 && v <= math.MaxInt64 {
				sp.Timestamp = int64(v)
			}
			return n
		}
		return -1
	})
	if err := missingIDs(hasTrace, hasID); err != nil {
		d.bad("", err)
	}
	if d.fail != nil {
		d.errs = append(d.errs, *d.fail)
		return
	}
	sp.Annotations = anns
	sp.Normalize()
	d.out = append(d.out, sp)
}

// endpoint decodes an Endpoint message; nil when empty.
func (d *pbDecoder) endpoint(path string, m []byte) *model.Endpoint {
	var e model.Endpoint
	d.fields(path, m, func(num protowire.Number, typ protowire.Type, b []byte) int {
		switch {
		case typ == protowire.BytesType && num >= pbEndpointServiceName && num <= pbEndpointIPv6:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return n
			}
			switch num {
			case pbEndpointServiceName:
				e.ServiceName = d.str(v)
			default: // ipv4 or ipv6: Zipkin takes either length in either field
				if a, ok := netip.AddrFromSlice(v); ok {
					if a = a.Unmap(); a.Is4() {
						e.IPv4 = a
					} else {
						e.IPv6 = a
					}
				}
			}
			return n
		case typ == protowire.VarintType && num == pbEndpointPort:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return n
			}
			port := int32(v)
			if port > 0xffff {
				d.bad(path+".port", errString("invalid port "+strconv.Itoa(int(port))))
			} else if port > 0 {
				e.Port = int(port)
			}
			return n
		}
		return -1
	})
	if e.IsZero() {
		return nil
	}
	if len(d.epSlab) == cap(d.epSlab) {
		// Slabs grow from 2 to 32 endpoints, so that a message of one
		// span (a Kafka record, a RabbitMQ message) does not keep a
		// 32-endpoint slab alive in the ingest queue.
		d.epSlab = make([]model.Endpoint, 0, min(32, max(2, 2*cap(d.epSlab))))
	}
	d.epSlab = append(d.epSlab, e)
	return &d.epSlab[len(d.epSlab)-1]
}

// AppendProto3Spans appends spans as a proto3 ListOfSpans to b, fields in
// number order, absent fields left out, annotations sorted and tags sorted
// by key (so the output is deterministic). A trace ID is written as 16
// bytes when its high half is set, else 8.
func AppendProto3Spans(b []byte, spans []model.Span) []byte {
	for i := range spans {
		s := &spans[i]
		b = protowire.AppendTag(b, pbListSpans, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(pbSpanSize(s)))
		b = appendPBSpan(b, s)
	}
	return b
}

func pbBytesSize(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

func pbSpanSize(s *model.Span) int {
	n := pbBytesSize(pbTraceID, 8)
	if s.TraceID.High != 0 {
		n = pbBytesSize(pbTraceID, 16)
	}
	if s.ParentID != 0 {
		n += pbBytesSize(pbParentID, 8)
	}
	n += pbBytesSize(pbID, 8)
	if k := pbKindNumber(s.Kind); k != 0 {
		n += protowire.SizeTag(pbKind) + protowire.SizeVarint(k)
	}
	if s.Name != "" {
		n += pbBytesSize(pbName, len(s.Name))
	}
	if s.Timestamp > 0 {
		n += protowire.SizeTag(pbTimestamp) + protowire.SizeFixed64()
	}
	if s.Duration > 0 {
		n += protowire.SizeTag(pbDuration) + protowire.SizeVarint(uint64(s.Duration))
	}
	if !s.LocalEndpoint.IsZero() {
		n += pbBytesSize(pbLocalEndpoint, pbEndpointSize(s.LocalEndpoint))
	}
	if !s.RemoteEndpoint.IsZero() {
		n += pbBytesSize(pbRemoteEndpoint, pbEndpointSize(s.RemoteEndpoint))
	}
	for _, a := range s.Annotations {
		n += pbBytesSize(pbAnnotations, pbAnnotationSize(a))
	}
	for k, v := range s.Tags {
		n += pbBytesSize(pbTags, pbBytesSize(pbMapKey, len(k))+pbBytesSize(pbMapValue, len(v)))
	}
	if s.Debug {
		n += protowire.SizeTag(pbDebug) + 1
	}
	if s.Shared {
		n += protowire.SizeTag(pbShared) + 1
	}
	return n
}

func pbKindNumber(k model.Kind) uint64 {
	for i, pk := range pbKinds {
		if pk == k {
			return uint64(i)
		}
	}
	return 0
}

func pbAnnotationSize(a model.Annotation) int {
	n := pbBytesSize(pbAnnotationValue, len(a.Value))
	if a.Timestamp != 0 {
		n += protowire.SizeTag(pbAnnotationTimestamp) + protowire.SizeFixed64()
	}
	return n
}

func pbEndpointSize(e *model.Endpoint) int {
	n := 0
	if e.ServiceName != "" {
		n += pbBytesSize(pbEndpointServiceName, len(e.ServiceName))
	}
	if e.IPv4.Is4() {
		n += pbBytesSize(pbEndpointIPv4, 4)
	}
	if e.IPv6.Is6() {
		n += pbBytesSize(pbEndpointIPv6, 16)
	}
	if e.Port > 0 {
		n += protowire.SizeTag(pbEndpointPort) + protowire.SizeVarint(uint64(e.Port))
	}
	return n
}

func appendPBSpan(b []byte, s *model.Span) []byte {
	b = protowire.AppendTag(b, pbTraceID, protowire.BytesType)
	if s.TraceID.High != 0 {
		b = protowire.AppendVarint(b, 16)
		b = binary.BigEndian.AppendUint64(b, s.TraceID.High)
	} else {
		b = protowire.AppendVarint(b, 8)
	}
	b = binary.BigEndian.AppendUint64(b, s.TraceID.Low)
	if s.ParentID != 0 {
		b = protowire.AppendTag(b, pbParentID, protowire.BytesType)
		b = protowire.AppendVarint(b, 8)
		b = binary.BigEndian.AppendUint64(b, uint64(s.ParentID))
	}
	b = protowire.AppendTag(b, pbID, protowire.BytesType)
	b = protowire.AppendVarint(b, 8)
	b = binary.BigEndian.AppendUint64(b, uint64(s.ID))
	if k := pbKindNumber(s.Kind); k != 0 {
		b = protowire.AppendTag(b, pbKind, protowire.VarintType)
		b = protowire.AppendVarint(b, k)
	}
	if s.Name != "" {
		b = protowire.AppendTag(b, pbName, protowire.BytesType)
		b = protowire.AppendString(b, s.Name)
	}
	if s.Timestamp > 0 {
		b = protowire.AppendTag(b, pbTimestamp, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, uint64(s.Timestamp))
	}
	if s.Duration > 0 {
		b = protowire.AppendTag(b, pbDuration, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(s.Duration))
	}
	if !s.LocalEndpoint.IsZero() {
		b = appendPBEndpoint(b, pbLocalEndpoint, s.LocalEndpoint)
	}
	if !s.RemoteEndpoint.IsZero() {
		b = appendPBEndpoint(b, pbRemoteEndpoint, s.RemoteEndpoint)
	}
	for _, a := range sortedAnnotations(s.Annotations) {
		b = protowire.AppendTag(b, pbAnnotations, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(pbAnnotationSize(a)))
		if a.Timestamp != 0 {
			b = protowire.AppendTag(b, pbAnnotationTimestamp, protowire.Fixed64Type)
			b = protowire.AppendFixed64(b, uint64(a.Timestamp))
		}
		b = protowire.AppendTag(b, pbAnnotationValue, protowire.BytesType)
		b = protowire.AppendString(b, a.Value)
	}
	if len(s.Tags) > 0 {
		var buf [16]string
		for _, k := range sortedKeys(buf[:0], s.Tags) {
			v := s.Tags[k]
			b = protowire.AppendTag(b, pbTags, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(pbBytesSize(pbMapKey, len(k))+pbBytesSize(pbMapValue, len(v))))
			b = protowire.AppendTag(b, pbMapKey, protowire.BytesType)
			b = protowire.AppendString(b, k)
			b = protowire.AppendTag(b, pbMapValue, protowire.BytesType)
			b = protowire.AppendString(b, v)
		}
	}
	if s.Debug {
		b = protowire.AppendTag(b, pbDebug, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	if s.Shared {
		b = protowire.AppendTag(b, pbShared, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	return b
}

func appendPBEndpoint(b []byte, num protowire.Number, e *model.Endpoint) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(pbEndpointSize(e)))
	if e.ServiceName != "" {
		b = protowire.AppendTag(b, pbEndpointServiceName, protowire.BytesType)
		b = protowire.AppendString(b, e.ServiceName)
	}
	if e.IPv4.Is4() {
		a := e.IPv4.As4()
		b = protowire.AppendTag(b, pbEndpointIPv4, protowire.BytesType)
		b = protowire.AppendBytes(b, a[:])
	}
	if e.IPv6.Is6() {
		a := e.IPv6.As16()
		b = protowire.AppendTag(b, pbEndpointIPv6, protowire.BytesType)
		b = protowire.AppendBytes(b, a[:])
	}
	if e.Port > 0 {
		b = protowire.AppendTag(b, pbEndpointPort, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(e.Port))
	}
	return b
}
