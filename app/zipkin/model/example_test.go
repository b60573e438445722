package model_test

import (
	"fmt"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// Trace IDs are 64 or 128 bits of lower-case hex; shorter IDs are padded and
// a 128-bit ID whose upper half is zero is a 64-bit ID, as in Zipkin.
func ExampleParseTraceID() {
	for _, s := range []string{"5af7183fb1d4cf5f", "463ac35c9f6413ad48485a3953bb6124", "0000000000000000463ac35c9f6413ad", "abc", "XYZ"} {
		id, err := model.ParseTraceID(s)
		fmt.Println(id, err)
	}
	// Output:
	// 5af7183fb1d4cf5f <nil>
	// 463ac35c9f6413ad48485a3953bb6124 <nil>
	// 463ac35c9f6413ad <nil>
	// 0000000000000abc <nil>
	// 0000000000000000 XYZ should be lower-hex encoded with no prefix
}

// Normalize applies Zipkin's rules before storage: names lower-cased,
// empty endpoints dropped, a parent ID equal to the span ID cleared.
func ExampleSpan_Normalize() {
	tid, _ := model.ParseTraceID("5af7183fb1d4cf5f")
	s := model.Span{TraceID: tid, ID: 7, ParentID: 7, Name: "GET /API",
		LocalEndpoint: &model.Endpoint{ServiceName: "FrontEnd"}, RemoteEndpoint: &model.Endpoint{}}
	s.Normalize()
	fmt.Println(s.Name, s.LocalEndpoint.ServiceName, s.ParentID == 0, s.RemoteEndpoint == nil)
	// Output:
	// get /api frontend true true
}

// An annotation query is terms joined by " and ": a key alone matches an
// annotation or a tag key, key=value a tag.
func ExampleParseAnnotationQuery() {
	q := model.ParseAnnotationQuery("error and http.method=GET")
	fmt.Println(len(q), q["error"] == "", q["http.method"])
	fmt.Println(model.FormatAnnotationQuery(q))
	// Output:
	// 2 true GET
	// error and http.method=GET
}
