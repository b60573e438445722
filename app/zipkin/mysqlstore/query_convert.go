package mysqlstore

import (
	"encoding/binary"
	"net/netip"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	v1 "github.com/sqlpool/sqlpool/app/zipkin/model/v1"
)

// Reading: Zipkin stores a span as one zipkin_spans row (a v1 span) and its
// v1 annotations and binary annotations as zipkin_annotations rows. The read
// path rebuilds the v1 span from those rows (addRow) and converts it to one
// or more v2 spans with v1.Converter (Zipkin's V1SpanConverter), the same
// converter the JSON v1 decoder uses.

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
// becomes the IPv4 address). The result is never nil; it may be empty,
// which v1.Converter treats as no endpoint, as Zipkin's reader does.
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
// other row is ignored. An empty endpoint counts as none (v1.Converter).
func addRow(s *v1.Span, r *annotationRow) {
	switch r.aType {
	case aTypeAnnotation:
		s.Annotations = append(s.Annotations, v1.Annotation{Timestamp: r.ts, Value: r.key, Endpoint: r.endpoint()})
	case aTypeString:
		s.BinaryAnnotations = append(s.BinaryAnnotations, v1.BinaryAnnotation{Key: r.key, Value: string(r.value), Endpoint: r.endpoint()})
	case aTypeBool:
		switch r.key {
		case "sa", "ca", "ma":
		default:
			return
		}
		if len(r.value) != 1 || r.value[0] != 1 {
			return
		}
		s.BinaryAnnotations = append(s.BinaryAnnotations, v1.BinaryAnnotation{Key: r.key, Address: true, Endpoint: r.endpoint()})
	}
}
