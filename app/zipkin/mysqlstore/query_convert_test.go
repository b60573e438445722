package mysqlstore

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	v1 "github.com/sqlpool/sqlpool/app/zipkin/model/v1"
)

// Rows become a v1 span as Zipkin's reader builds it: NULL endpoint columns
// are no endpoint (so a cs row without one is a plain annotation, and an
// address row without one is dropped), an IPv4-mapped IPv6 column is the
// IPv4 address, a SMALLINT-wrapped port reads as 0, and rows of other types
// or non-0x01 booleans are ignored.
func TestRowsToV2(t *testing.T) {
	v4 := netip.MustParseAddr("10.0.0.1")
	mapped := netip.MustParseAddr("::ffff:10.0.0.2").As16()
	rows := []annotationRow{
		{key: "cs", aType: aTypeAnnotation, ts: 10},                       // NULL endpoint
		{key: "cr", aType: aTypeAnnotation, ts: 20, serviceName: ""},      // empty endpoint
		{key: "sa", aType: aTypeBool, value: []byte{1}, ts: 10},           // address without endpoint
		{key: "ca", aType: aTypeBool, value: []byte{0}, serviceName: "x"}, // false boolean
		{key: "n", aType: 3, value: []byte{0, 0, 0, 1}, serviceName: "x"}, // I32: no v2 form
		{key: "http.path", aType: aTypeString, value: []byte("/"), ts: 10, serviceName: "web",
			ipv4: int32(0x0a000001), ipv4Valid: true, port: -32768},
		{key: "ma", aType: aTypeBool, value: []byte{1}, serviceName: "kafka", ipv6: mapped[:], port: 9092},
	}
	src := &v1.Span{TraceID: model.TraceID{Low: 1}, ID: 2, Name: "get", Timestamp: 10, Duration: 10}
	for i := range rows {
		addRow(src, &rows[i])
	}
	got := v1.ToV2(src)
	want := []model.Span{{
		TraceID: model.TraceID{Low: 1}, ID: 2, Name: "get", Timestamp: 10, Duration: 10,
		LocalEndpoint: &model.Endpoint{ServiceName: "web", IPv4: v4},
		Annotations:   []model.Annotation{{Timestamp: 10, Value: "cs"}, {Timestamp: 20, Value: "cr"}},
		Tags:          map[string]string{"http.path": "/"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v %+v\nwant %+v %+v", got, got[0].LocalEndpoint, want, want[0].LocalEndpoint)
	}
	var ma *v1.BinaryAnnotation
	for i := range src.BinaryAnnotations {
		if src.BinaryAnnotations[i].Key == "ma" {
			ma = &src.BinaryAnnotations[i]
		}
	}
	if ma == nil || !ma.Address || ma.Endpoint.IPv4 != netip.MustParseAddr("10.0.0.2") || ma.Endpoint.IPv6.IsValid() || ma.Endpoint.Port != 9092 {
		t.Fatalf("ma row read as %+v", ma)
	}
}
