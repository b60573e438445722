package codec

import "bytes"

// Format is an encoding of a list of spans, named as Zipkin names its
// decoders.
type Format int

// The formats Zipkin's collector tells apart. Thrift is detected only, for
// messages; this package does not decode it.
const (
	FormatUnknown Format = iota
	JSONV1
	JSONV2
	Proto3
	Thrift
)

// String returns Zipkin's name for f: "JSON_V1", "JSON_V2", "PROTO3",
// "THRIFT", or "UNKNOWN".
func (f Format) String() string {
	switch f {
	case JSONV1:
		return "JSON_V1"
	case JSONV2:
		return "JSON_V2"
	case Proto3:
		return "PROTO3"
	case Thrift:
		return "THRIFT"
	}
	return "UNKNOWN"
}

var (
	endpointSuffix   = []byte(`Endpoint"`)
	tagsField        = []byte(`"tags"`)
	binaryAnnotation = []byte(`yAnnotations"`)
)

// DetectFormat reports the format of a non-empty list body as Zipkin's
// collector detects it: '[' is JSON (v2 when the body contains `Endpoint"`
// or `"tags"`, v1 when it contains `yAnnotations"`, else ambiguous: want
// is returned when it is a JSON format, JSON_V2 otherwise); 11 or 12 is a
// thrift list; 10 followed by a non-zero byte is proto3. Anything else,
// including an empty body, is FormatUnknown.
func DetectFormat(body []byte, want Format) Format {
	if len(body) == 0 {
		return FormatUnknown
	}
	switch body[0] {
	case '[':
		switch {
		case bytes.Contains(body, endpointSuffix), bytes.Contains(body, tagsField):
			return JSONV2
		case bytes.Contains(body, binaryAnnotation):
			return JSONV1
		case want == JSONV1:
			return JSONV1
		}
		return JSONV2
	case 11, 12:
		return Thrift
	case 10:
		if len(body) > 1 && body[1] != 0 {
			return Proto3
		}
	}
	return FormatUnknown
}

// CheckFormat is the check Zipkin's collector makes before decoding a
// non-empty body that the request (path and Content-Type) says is in
// format want. It returns nil when the body looks like want, and otherwise
// an error whose message is Zipkin's, for a 400 response:
// "Expected a JSON_V2 encoded list\n" when the format is not recognised, or
// "Expected a JSON_V2 encoded list, but received: JSON_V1\n" when it is
// another one. An empty body passes (Zipkin accepts it with 202 and stores
// nothing; so does a body of exactly "[]").
func CheckFormat(want Format, body []byte) error {
	if len(body) == 0 {
		return nil
	}
	got := DetectFormat(body, want)
	switch got {
	case want:
		return nil
	case FormatUnknown:
		return &FormatError{Want: want}
	}
	return &FormatError{Want: want, Got: got}
}

// FormatError is a body in the wrong format (CheckFormat).
type FormatError struct {
	Want Format
	Got  Format // FormatUnknown when not recognised
}

func (e *FormatError) Error() string {
	if e.Got == FormatUnknown {
		return "Expected a " + e.Want.String() + " encoded list\n"
	}
	return "Expected a " + e.Want.String() + " encoded list, but received: " + e.Got.String() + "\n"
}
