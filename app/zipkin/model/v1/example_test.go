package v1_test

import (
	"fmt"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	v1 "github.com/sqlpool/sqlpool/app/zipkin/model/v1"
)

// A v1 span holding both sides of an RPC becomes a CLIENT span, timed by
// the span, and a shared SERVER span, timed by sr and ss.
func ExampleToV2() {
	client, server := &model.Endpoint{ServiceName: "frontend"}, &model.Endpoint{ServiceName: "backend"}
	src := v1.Span{
		TraceID: model.TraceID{Low: 0x5af7183fb1d4cf5f}, ID: 0x352bff9a74ca9ad2, Name: "get /api",
		Timestamp: 1000, Duration: 500,
		Annotations: []v1.Annotation{
			{Timestamp: 1000, Value: "cs", Endpoint: client},
			{Timestamp: 1100, Value: "sr", Endpoint: server},
			{Timestamp: 1400, Value: "ss", Endpoint: server},
			{Timestamp: 1500, Value: "cr", Endpoint: client},
		},
		BinaryAnnotations: []v1.BinaryAnnotation{
			{Key: "http.path", Value: "/api", Endpoint: client},
			{Key: "sa", Address: true, Endpoint: server},
		},
	}
	for _, s := range v1.ToV2(&src) {
		fmt.Println(s.Kind, s.LocalServiceName(), s.RemoteServiceName(), s.Timestamp, s.Duration, s.Shared, s.Tags)
	}
	// Output:
	// CLIENT frontend backend 1000 500 false map[http.path:/api]
	// SERVER backend  1100 300 true map[]
}
