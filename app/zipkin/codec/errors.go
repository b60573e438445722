package codec

import (
	"strconv"
	"strings"
)

// SpanError is the first problem found in one span of a batch.
type SpanError struct {
	// Index is the span's position in the input list, counting from 0. For
	// JSON v1 it is the index of the v1 span (which may become two v2
	// spans). It is -1 for a problem outside any span, such as a body that
	// is not a list.
	Index int
	// Path locates the problem, e.g. "$[3].tags.key" for JSON or
	// "spans[3].trace_id" for proto3; "" when the message already says
	// where.
	Path string
	// Err is the problem itself; for an ID it is a *model.IDError.
	Err error
}

func (e *SpanError) Error() string {
	msg := e.Err.Error()
	if e.Path == "" || strings.Contains(msg, e.Path) {
		return msg
	}
	return msg + " at " + e.Path
}

// Unwrap returns Err.
func (e *SpanError) Unwrap() error { return e.Err }

// BatchError reports every invalid span of a batch. The decoder that
// returns it also returns the spans that were valid.
type BatchError struct {
	// Format is the format that was being read.
	Format Format
	// Errors holds one entry per invalid span, in input order, and, when
	// Malformed, a last entry for where parsing stopped (which may be in a
	// span already listed, or outside any span).
	Errors []SpanError
	// Malformed is true when the input could not be parsed to its end
	// (broken JSON or protobuf framing); spans after the point of failure
	// were neither read nor validated. The last entry of Errors says where.
	Malformed bool
}

// maxListedErrors bounds how many span errors Error spells out.
const maxListedErrors = 5

// Error returns a message in Zipkin's style, such as
// "No value at $[3].tags.key reading List<Span> from json". When several
// spans are invalid the first few problems are listed, separated by "; ",
// followed by the number of invalid spans.
func (e *BatchError) Error() string {
	var b strings.Builder
	for i := range e.Errors {
		if i == maxListedErrors {
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Errors[i].Error())
	}
	if len(e.Errors) == 0 {
		b.WriteString("Malformed")
	}
	b.WriteString(" reading List<Span> from ")
	if e.Format == Proto3 {
		b.WriteString("proto3")
	} else {
		b.WriteString("json")
	}
	if n := len(e.Indexes()); n > 1 {
		b.WriteString(" (")
		b.WriteString(strconv.Itoa(n))
		b.WriteString(" invalid spans)")
	}
	return b.String()
}

// Unwrap returns the span errors, so that errors.As finds, say, the
// *model.IDError of an invalid span.
func (e *BatchError) Unwrap() []error {
	out := make([]error, len(e.Errors))
	for i := range e.Errors {
		out[i] = &e.Errors[i]
	}
	return out
}

// Indexes returns the input indexes of the invalid spans, ascending and
// without duplicates (-1, for a problem outside any span, is left out).
func (e *BatchError) Indexes() []int {
	out := make([]int, 0, len(e.Errors))
	for _, se := range e.Errors {
		if se.Index >= 0 && (len(out) == 0 || out[len(out)-1] != se.Index) {
			out = append(out, se.Index)
		}
	}
	return out
}

// missingIDs is Zipkin's error for a span without its trace ID or span ID
// ("Missing : traceId id"), or nil when it has both.
func missingIDs(hasTrace, hasID bool) error {
	if hasTrace && hasID {
		return nil
	}
	msg := "Missing :"
	if !hasTrace {
		msg += " traceId"
	}
	if !hasID {
		msg += " id"
	}
	return errString(msg)
}

// errString is a constant error message.
type errString string

func (e errString) Error() string { return string(e) }
