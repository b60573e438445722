// Package model is Zipkin's v2 span model as the span store and server use
// it: IDs, spans, endpoints and annotations with Zipkin's normalisation, the
// query request of the v2 API with its validation rules, and dependency
// links. It has no I/O and no dependencies outside the standard library;
// codecs live in package zipkin/codec and storage in zipkin/mysqlstore.
//
// Absent values are Go zero values: an ID of 0, an empty string, a zero
// Timestamp or Duration, a nil *Endpoint, a zero netip.Addr. Zipkin's JSON
// never distinguishes "absent" from these zero values, so neither does the
// model.
package model
