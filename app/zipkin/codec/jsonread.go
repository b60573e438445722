package codec

import (
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonReader is a small pull parser over a string (the request body,
// converted once, so that unescaped string values are substrings of it and
// cost no allocation). A syntax error is sticky: it sets err and every
// later call fails fast; callers check failed() at loop boundaries.
type jsonReader struct {
	s     string
	pos   int
	depth int
	err   *syntaxError
}

// syntaxError is broken JSON; nothing after it can be read.
type syntaxError struct {
	msg string
	off int
}

func (e *syntaxError) Error() string {
	return "Malformed (" + e.msg + " at byte " + strconv.Itoa(e.off) + ")"
}

const maxJSONDepth = 512

func (r *jsonReader) failed() bool { return r.err != nil }

func (r *jsonReader) fail(msg string) {
	if r.err == nil {
		r.err = &syntaxError{msg: msg, off: r.pos}
	}
	r.pos = len(r.s)
}

// peek skips white space and returns the next byte, or 0 at the end.
func (r *jsonReader) peek() byte {
	for r.pos < len(r.s) {
		switch c := r.s[r.pos]; c {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return c
		}
	}
	return 0
}

// kind names the next value's type as Zipkin's reader does in messages.
func (r *jsonReader) kind() string {
	switch r.peek() {
	case '"':
		return "STRING"
	case '{':
		return "BEGIN_OBJECT"
	case '[':
		return "BEGIN_ARRAY"
	case 't', 'f':
		return "BOOLEAN"
	case 'n':
		return "NULL"
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return "NUMBER"
	case 0:
		return "END_DOCUMENT"
	}
	return "an unexpected character"
}

func (r *jsonReader) expect(c byte) bool {
	if r.peek() != c {
		if r.pos >= len(r.s) {
			r.fail("unexpected end of input, expected '" + string(c) + "'")
		} else {
			r.fail("expected '" + string(c) + "'")
		}
		return false
	}
	r.pos++
	return true
}

// more is used in a loop over an object's fields or an array's elements
// after the opening bracket: it consumes a separating comma and reports
// whether another member follows; it consumes the closing bracket and
// returns false at the end or on error.
func (r *jsonReader) more(first *bool, closing byte) bool {
	if r.err != nil {
		return false
	}
	c := r.peek()
	if c == closing {
		r.pos++
		r.depth--
		return false
	}
	if !*first {
		if c != ',' {
			if c == 0 {
				r.fail("unexpected end of input")
			} else {
				r.fail("expected ',' or '" + string(closing) + "'")
			}
			return false
		}
		r.pos++
		if p := r.peek(); p == closing {
			r.fail("trailing comma")
			return false
		}
	}
	*first = false
	return true
}

// open consumes '{' or '['.
func (r *jsonReader) open(c byte) bool {
	if !r.expect(c) {
		return false
	}
	r.depth++
	if r.depth > maxJSONDepth {
		r.fail("nesting deeper than 512")
		return false
	}
	return true
}

// name reads an object member's name and the colon after it.
func (r *jsonReader) name() string {
	if r.peek() != '"' {
		r.fail("expected a field name")
		return ""
	}
	n := r.str()
	r.expect(':')
	return n
}

// isNull reports whether the next value is null, consuming it if so.
func (r *jsonReader) isNull() bool {
	if r.peek() == 'n' {
		r.literal("null")
		return true
	}
	return false
}

func (r *jsonReader) literal(lit string) {
	if len(r.s)-r.pos >= len(lit) && r.s[r.pos:r.pos+len(lit)] == lit {
		r.pos += len(lit)
		return
	}
	r.fail("invalid literal")
}

// str reads a JSON string; the caller has checked that one starts here.
func (r *jsonReader) str() string {
	r.pos++ // opening quote
	start := r.pos
	for i := start; i < len(r.s); i++ {
		switch r.s[i] {
		case '"':
			r.pos = i + 1
			return r.s[start:i]
		case '\\':
			return r.strEscaped(start, i)
		}
	}
	r.pos = len(r.s)
	r.fail("unterminated string")
	return ""
}

func (r *jsonReader) strEscaped(start, i int) string {
	buf := make([]byte, 0, i-start+16)
	buf = append(buf, r.s[start:i]...)
	for i < len(r.s) {
		c := r.s[i]
		switch {
		case c == '"':
			r.pos = i + 1
			return string(buf)
		case c != '\\':
			buf = append(buf, c)
			i++
			continue
		}
		if i+1 >= len(r.s) {
			break
		}
		e := r.s[i+1]
		i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r1, ok := hex4(r.s, i)
			if !ok {
				r.pos = i
				r.fail("invalid \\u escape")
				return ""
			}
			i += 4
			if utf16.IsSurrogate(r1) {
				if r2, ok := hex4(r.s, i+2); ok && i+1 < len(r.s) && r.s[i] == '\\' && r.s[i+1] == 'u' {
					if dec := utf16.DecodeRune(r1, r2); dec != utf8.RuneError {
						i += 6
						buf = utf8.AppendRune(buf, dec)
						continue
					}
				}
				r1 = utf8.RuneError
			}
			buf = utf8.AppendRune(buf, r1)
		default:
			r.pos = i - 1
			r.fail("invalid escape")
			return ""
		}
	}
	r.pos = len(r.s)
	r.fail("unterminated string")
	return ""
}

func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var v rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | rune(c)
	}
	return v, true
}

// number reads a JSON number literal and returns its text.
func (r *jsonReader) number() string {
	start := r.pos
	i := r.pos
	if i < len(r.s) && r.s[i] == '-' {
		i++
	}
	digits := func() bool {
		j := i
		for i < len(r.s) && '0' <= r.s[i] && r.s[i] <= '9' {
			i++
		}
		return i > j
	}
	if !digits() {
		r.pos = i
		r.fail("invalid number")
		return ""
	}
	if i < len(r.s) && r.s[i] == '.' {
		i++
		if !digits() {
			r.pos = i
			r.fail("invalid number")
			return ""
		}
	}
	if i < len(r.s) && (r.s[i] == 'e' || r.s[i] == 'E') {
		i++
		if i < len(r.s) && (r.s[i] == '+' || r.s[i] == '-') {
			i++
		}
		if !digits() {
			r.pos = i
			r.fail("invalid number")
			return ""
		}
	}
	r.pos = i
	return r.s[start:i]
}

// skip skips one value of any type.
func (r *jsonReader) skip() {
	switch r.peek() {
	case '"':
		r.str()
	case '{':
		if !r.open('{') {
			return
		}
		for first := true; r.more(&first, '}'); {
			r.name()
			r.skip()
		}
	case '[':
		if !r.open('[') {
			return
		}
		for first := true; r.more(&first, ']'); {
			r.skip()
		}
	case 't':
		r.literal("true")
	case 'f':
		r.literal("false")
	case 'n':
		r.literal("null")
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		r.number()
	case 0:
		r.fail("unexpected end of input")
	default:
		r.fail("unexpected character")
	}
}

// typeError is a value of the wrong JSON type; the value is skipped and
// the span is invalid, but reading goes on.
type typeError struct{ want, got string }

func (e *typeError) Error() string { return "Expected " + e.want + " but was " + e.got }

// readString reads a string value; a number is accepted as its text, as
// Zipkin's reader does. Other types are skipped and reported.
func (r *jsonReader) readString() (string, error) {
	switch r.peek() {
	case '"':
		return r.str(), nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return r.number(), nil
	}
	err := &typeError{"a string", r.kind()}
	r.skip()
	return "", err
}

// readLong reads an integer: a number literal (an integral value in
// exponent or decimal form is accepted) or a string holding one.
func (r *jsonReader) readLong(want string, min, max int64) (int64, error) {
	var lit string
	switch r.peek() {
	case '"':
		lit = r.str()
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		lit = r.number()
	default:
		err := &typeError{want, r.kind()}
		r.skip()
		return 0, err
	}
	if r.err != nil {
		return 0, nil
	}
	v, ok := smallInt(lit)
	var err error
	if !ok {
		v, err = strconv.ParseInt(lit, 10, 64)
	}
	if err != nil {
		f, ferr := strconv.ParseFloat(lit, 64)
		if ferr != nil || f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
			return 0, errString("Expected " + want + " but was " + lit)
		}
		v = int64(f)
	}
	if v < min || v > max {
		return 0, errString("Expected " + want + " but was " + lit)
	}
	return v, nil
}

// smallInt is the value of lit when it is an optional '-' and 1 to 18
// decimal digits (what strconv.ParseInt returns for it, without its
// generality); ok is false for anything else.
func smallInt(lit string) (v int64, ok bool) {
	digits := lit
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if len(digits) != len(lit) {
		v = -v
	}
	return v, true
}

// readBool reads true or false.
func (r *jsonReader) readBool() (bool, error) {
	switch r.peek() {
	case 't':
		r.literal("true")
		return true, nil
	case 'f':
		r.literal("false")
		return false, nil
	}
	err := &typeError{"a boolean", r.kind()}
	r.skip()
	return false, err
}

// startObject consumes '{' or, for another type, skips the value and
// returns an error.
func (r *jsonReader) startObject() error {
	if r.peek() == '{' {
		r.open('{')
		return nil
	}
	err := &typeError{"BEGIN_OBJECT", r.kind()}
	r.skip()
	return err
}

// startArray consumes '[' or, for another type, skips the value and returns
// an error.
func (r *jsonReader) startArray() error {
	if r.peek() == '[' {
		r.open('[')
		return nil
	}
	err := &typeError{"BEGIN_ARRAY", r.kind()}
	r.skip()
	return err
}
