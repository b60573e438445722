package model

import (
	"errors"
	"fmt"
)

// TraceID is a 64- or 128-bit trace ID. High is 0 for a 64-bit ID.
type TraceID struct {
	High uint64
	Low  uint64
}

// IsZero reports whether the ID is all zeros, which Zipkin treats as absent
// and rejects wherever a trace ID is required.
func (t TraceID) IsZero() bool { return t.High == 0 && t.Low == 0 }

// String returns the lower-hex form Zipkin writes: 16 characters for a
// 64-bit ID, 32 for a 128-bit one.
func (t TraceID) String() string {
	if t.High == 0 {
		return fmt.Sprintf("%016x", t.Low)
	}
	return fmt.Sprintf("%016x%016x", t.High, t.Low)
}

// AppendHex appends String's form to b without allocating.
func (t TraceID) AppendHex(b []byte) []byte {
	if t.High != 0 {
		b = appendHex64(b, t.High)
	}
	return appendHex64(b, t.Low)
}

// ID is a 64-bit span ID; 0 means absent.
type ID uint64

// String returns the 16-character lower-hex form, or "" for 0.
func (id ID) String() string {
	if id == 0 {
		return ""
	}
	return fmt.Sprintf("%016x", uint64(id))
}

// AppendHex appends the 16-character lower-hex form to b.
func (id ID) AppendHex(b []byte) []byte { return appendHex64(b, uint64(id)) }

func appendHex64(b []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, digits[(v>>uint(shift))&0xf])
	}
	return b
}

// ErrZeroID is wrapped by the parse functions for an all-zero ID.
var ErrZeroID = errors.New("is all zeros")

// IDError reports an ID that is not lower-hex or has the wrong length. Its
// message is the one Zipkin answers with, so the HTTP layer can pass it on.
type IDError struct {
	Field string // "traceId", "id" or "parentId"
	Value string // the input as received
	Msg   string // Zipkin's wording
}

func (e *IDError) Error() string { return e.Msg }

// ParseTraceID parses a trace ID as Zipkin's decoders do: 1 to 32 lower-hex
// characters, left-padded with zeros (to 16 when up to 16 characters, else
// to 32); upper case, a "0x" prefix, other characters, more than 32
// characters or all zeros are errors. A 32-character ID whose first 16
// characters are zeros is the 64-bit ID of its last 16.
func ParseTraceID(s string) (TraceID, error) {
	if len(s) == 0 {
		return TraceID{}, &IDError{"traceId", s, "traceId was empty"}
	}
	if len(s) > 32 {
		return TraceID{}, &IDError{"traceId", s, "traceId.length > 32"}
	}
	if !isLowerHex(s) {
		return TraceID{}, &IDError{"traceId", s, s + " should be lower-hex encoded with no prefix"}
	}
	var t TraceID
	lo := s
	if len(s) > 16 {
		t.High = hexValue(s[:len(s)-16])
		lo = s[len(s)-16:]
	}
	t.Low = hexValue(lo)
	if t.IsZero() {
		return TraceID{}, &IDError{"traceId", s, "traceId is all zeros"}
	}
	return t, nil
}

// ParseID parses a span or parent ID: 1 to 16 lower-hex characters,
// left-padded. field names the JSON field in error messages ("id" or
// "parentId"). All zeros is an error wrapping ErrZeroID; callers decide
// whether that means absent (parentId) or invalid (id).
func ParseID(field, s string) (ID, error) {
	if len(s) == 0 {
		return 0, &IDError{field, s, field + " was empty"}
	}
	if len(s) > 16 {
		return 0, &IDError{field, s, field + ".length > 16"}
	}
	if !isLowerHex(s) {
		return 0, &IDError{field, s, s + " should be lower-hex encoded with no prefix"}
	}
	v := hexValue(s)
	if v == 0 {
		return 0, fmt.Errorf("%s %w", field, ErrZeroID)
	}
	return ID(v), nil
}

// hexValue is the value of at most 16 lower-hex digits (checked by
// isLowerHex).
func hexValue(s string) uint64 {
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= '9' {
			c -= '0'
		} else {
			c -= 'a' - 10
		}
		v = v<<4 | uint64(c)
	}
	return v
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
