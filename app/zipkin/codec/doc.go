// Package codec reads and writes Zipkin spans in the formats Zipkin's HTTP
// API uses: JSON v2 and proto3 (ListOfSpans) in both directions, and JSON v1
// for reading (POST /api/v1/spans), converted to v2 spans as Zipkin's
// V1SpanConverter does. It also holds the format sniffing Zipkin's collector
// applies before decoding, with Zipkin's exact messages.
//
// Decoders follow Zipkin's leniency: IDs of 1–32 (trace) or 1–16 (span)
// lower-hex characters are padded; unknown fields and JSON null for optional
// fields are ignored; negative timestamps and durations, zero durations,
// unparseable IP addresses, ports ≤ 0 and empty endpoints are dropped; only
// a true debug or shared flag is recorded. Decoded spans are normalised
// (model.Span.Normalize).
//
// A bad span never hides the rest of its batch: every span is validated,
// and the decoders return the valid spans together with a *BatchError that
// lists each invalid span by its index in the input. An HTTP server answers
// any decode error with 400 and err.Error() and stores nothing; a library
// user may keep the valid spans instead.
//
// Encoders append to a []byte and write what Zipkin's SpanBytesEncoder
// writes: fields in Zipkin's order, tags sorted by key, annotations sorted by
// (timestamp, value), and every string escaped (span content is untrusted).
package codec
