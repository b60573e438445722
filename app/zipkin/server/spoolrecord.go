package server

import (
	"fmt"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// spoolRecord is the payload of one spool record (spool.Record.Payload):
// the body of an accepted message as POST /api/v2/spans (JSON v2 or
// proto3) or POST /api/v1/spans (JSON v1) takes it, replayed at start by
// decoding it as such a POST. A collector whose message is not such a
// body (OTLP) is written as proto3 of its decoded spans.
//
// On disk: a byte naming the endpoint (0 /api/v2/spans, 1 /api/v1/spans),
// a byte that is 1 when the body is proto3, then the body. Records written
// by earlier releases have the same layout.
type spoolRecord struct {
	format codec.Format // codec.JSONV1, JSONV2 or Proto3
	body   []byte
}

// replayable reports whether the record's format is one replay decodes.
func (r spoolRecord) replayable() bool {
	return r.format == codec.JSONV1 || r.format == codec.JSONV2 || r.format == codec.Proto3
}

// marshal returns the record's payload.
func (r spoolRecord) marshal() []byte {
	ep, proto := v2Endpoint, byte(0)
	switch r.format {
	case codec.JSONV1:
		ep = v1Endpoint
	case codec.Proto3:
		proto = 1
	}
	return append([]byte{byte(ep), proto}, r.body...)
}

// parseSpoolRecord reads a payload written by marshal.
func parseSpoolRecord(p []byte) (spoolRecord, error) {
	if len(p) < 2 {
		return spoolRecord{}, fmt.Errorf("spool record of %d bytes: shorter than its header", len(p))
	}
	r := spoolRecord{format: codec.JSONV2, body: p[2:]}
	switch {
	case endpointKind(p[0]) == v1Endpoint:
		r.format = codec.JSONV1
	case p[1] == 1:
		r.format = codec.Proto3
	}
	return r, nil
}

// decode decodes the record's spans as the POST it came from would be.
func (r spoolRecord) decode() ([]model.Span, error) {
	if r.format == codec.JSONV1 {
		return decodeSpans(v1Endpoint, "", r.body)
	}
	ct := ""
	if r.format == codec.Proto3 {
		ct = "application/x-protobuf"
	}
	return decodeSpans(v2Endpoint, ct, r.body)
}
