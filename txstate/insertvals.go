package txstate

import (
	"database/sql/driver"
	"math"
	"strconv"
	"strings"
	"time"
)

// The explicit values of an INSERT, for the deferred LAST_INSERT_ID() reset (lastid.go). The
// last insert id an Exec reports is the AUTO_INCREMENT id the INSERT generated or, when it gave
// that column a value, the value; the server cannot tell the two apart afterwards. The Tracker
// can, before and after the statement, when the INSERT is a plain
//
//	INSERT|REPLACE [options] [INTO] name [(columns)] VALUES|VALUE (v, …)[, (…)]
//
// whose every v is a placeholder, a number, a string literal, NULL, DEFAULT, TRUE or FALSE: an
// id no value could equal was generated. Anything else (INSERT … SELECT, INSERT … SET, ON
// DUPLICATE KEY UPDATE, an expression, a user variable, a backslash anywhere, a double-quoted
// value unless the quoting is known not to be ANSI_QUOTES) is not plain, and any of its values
// could be any id.

// scanValues reads the rows of a plain INSERT … VALUES from start (just past VALUES): may has
// the bit of each position (in any row) whose value could be id (with any, a non-zero
// integer; positions from 63 on share bit 63), rows counts the rows, ok false means q is not
// plain or its placeholders do not match args.
func scanValues(q string, start int, args []driver.NamedValue, quoting Quoting, id int64, any bool) (may uint64, rows int, ok bool) {
	if strings.IndexByte(q, '\\') >= 0 {
		return 0, 0, false // a backslash escapes or not by sql_mode: not worth reading
	}
	i, ph := start, 0 // ph: placeholders seen
	for {
		i = skipSpaceComments(q, i)
		if i < 0 || i >= len(q) || q[i] != '(' {
			return 0, 0, false
		}
		rows++
		i = skipSpaceComments(q, i+1)
		if i < 0 || i >= len(q) {
			return 0, 0, false
		}
		if q[i] == ')' { // VALUES (): every column its default
			i++
		} else {
			for pos := 0; ; pos++ {
				var m bool
				switch c := q[i]; {
				case c == '?':
					if ph >= len(args) {
						return 0, 0, false
					}
					m = mayEqual(args[ph].Value, id, any)
					ph++
					i++
				case c == '\'' || c == '"' && (quoting == QuotingBackslash || quoting == QuotingNoBackslash):
					j := skipQuoted(q, i, false)
					if q[j-1] != c || j-i < 2 {
						return 0, 0, false
					}
					m = numMayEqual(q[i+1:j-1], id, any)
					i = j
				case c == '-' || c == '+' || c == '.' || c >= '0' && c <= '9':
					j := i + 1
					for j < len(q) && (q[j] >= '0' && q[j] <= '9' || q[j] == '.' || q[j] == 'e' || q[j] == 'E' ||
						(q[j] == '-' || q[j] == '+') && (q[j-1] == 'e' || q[j-1] == 'E')) {
						j++
					}
					if j < len(q) && isWord(q[j]) { // 0x1F, 1abc: not a plain number
						return 0, 0, false
					}
					if _, err := strconv.ParseFloat(q[i:j], 64); err != nil {
						return 0, 0, false
					}
					m = numMayEqual(q[i:j], id, any)
					i = j
				case isWord(c):
					j := i
					for j < len(q) && isWord(q[j]) {
						j++
					}
					switch w := q[i:j]; {
					case eqFold(w, "null"), eqFold(w, "default"), eqFold(w, "false"):
					case eqFold(w, "true"):
						m = any || id == 1
					default:
						return 0, 0, false // a column, a function, an introducer: an expression
					}
					i = j
				default:
					return 0, 0, false
				}
				if m {
					may |= 1 << min(pos, 63)
				}
				i = skipSpaceComments(q, i)
				if i < 0 || i >= len(q) {
					return 0, 0, false
				}
				if q[i] == ')' {
					i++
					break
				}
				if q[i] != ',' {
					return 0, 0, false
				}
				i = skipSpaceComments(q, i+1)
				if i < 0 || i >= len(q) {
					return 0, 0, false
				}
			}
		}
		i = skipSpaceComments(q, i)
		if i < 0 {
			return 0, 0, false
		}
		if i < len(q) && q[i] == ',' {
			i++
			continue
		}
		if i < len(q) && q[i] == ';' {
			i = skipSpaceComments(q, i+1)
		}
		// more text (ON DUPLICATE KEY UPDATE, RETURNING, …), or unused arguments
		return may, rows, i == len(q) && ph == len(args)
	}
}

// valuesStart returns the index just past the VALUES (or VALUE) keyword of an INSERT or REPLACE
// at the top level, when nothing before it is a SELECT, SET, TABLE or WITH, a placeholder or a
// backslash; ok false otherwise.
func valuesStart(q string, quoting Quoting) (int, bool) {
	first := true
	for i := 0; ; {
		i = skipSpaceComments(q, i)
		if i < 0 || i >= len(q) {
			return 0, false
		}
		switch c := q[i]; {
		case c == '`':
			j := skipQuoted(q, i, false)
			if j > len(q) || q[j-1] != '`' || j-i < 2 {
				return 0, false
			}
			i = j
		case c == '(':
			// the column list: names only
			j := i + 1
			for ; j < len(q) && q[j] != ')'; j++ {
				if c := q[j]; !(isWord(c) || c == '`' || c == ',' || c == '.' || isSpace(c)) {
					return 0, false
				}
			}
			if j == len(q) {
				return 0, false
			}
			i = j + 1
		case c == '.':
			i++
		case isWord(c):
			j := i
			for j < len(q) && isWord(q[j]) {
				j++
			}
			w := q[i:j]
			switch {
			case first && !eqFold(w, "insert") && !eqFold(w, "replace"):
				return 0, false
			case eqFold(w, "values"), eqFold(w, "value"):
				return j, true
			case eqFold(w, "select"), eqFold(w, "set"), eqFold(w, "table"), eqFold(w, "with"):
				return 0, false
			}
			first = false
			i = j
		default:
			return 0, false
		}
	}
}

// skipSpaceComments returns the index of the next byte of q from i that is not white space or
// inside a comment, or -1 at an executable comment (/*! or /*M!), whose text runs, or a
// backslash (whose meaning depends on the quoting mode).
func skipSpaceComments(q string, i int) int {
	for i < len(q) {
		c := q[i]
		switch {
		case isSpace(c):
			i++
		case c == '#' || c == '-' && isDashComment(q, i):
			i = skipLine(q, i)
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			if i+2 < len(q) && (q[i+2] == '!' || q[i+2] == 'M') {
				return -1
			}
			i = skipBlock(q, i)
		case c == '\\':
			return -1
		default:
			return i
		}
	}
	return i
}

// mayEqual reports whether the argument v, stored in an integer column, could be id (with any,
// any id: a non-zero integer). A value beyond an integer type's range is stored as its bound
// (without STRICT_TRANS_TABLES), so it could be an id that is such a bound.
func mayEqual(v any, id int64, any bool) bool {
	switch x := v.(type) {
	case nil:
		return false
	case int64:
		return any && x != 0 || !any && (x == id || clipped(float64(x), id))
	case uint64:
		return any && x != 0 || !any && (x == uint64(id) || clipped(float64(x), id))
	case float64:
		return floatMayEqual(x, id, any)
	case bool:
		return x && (any || id == 1)
	case string:
		return numMayEqual(x, id, any)
	case []byte:
		return numMayEqual(string(x), id, any)
	case time.Time:
		if any {
			return !x.IsZero()
		}
		y, m, d := x.Date()
		ymd := int64(y)*10000 + int64(m)*100 + int64(d)
		hms := int64(x.Hour())*10000 + int64(x.Minute())*100 + int64(x.Second())
		return id == int64(y) || id == ymd || id == ymd*1000000+hms || clipped(float64(ymd*1000000+hms), id)
	}
	return true // a type this package does not know: assume it could
}

// clipped reports whether f, out of an integer type's range, could be stored as id, that
// type's bound.
func clipped(f float64, id int64) bool {
	for _, b := range [...]int64{127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807} {
		if id == b && f > float64(b) || id == -b-1 && f < float64(-b-1) {
			return true
		}
	}
	return id == -1 && f > 9223372036854775807 // 18446744073709551615, an unsigned BIGINT's bound
}

// numMayEqual reports whether the text s, converted to a number as the server converts a string
// (leading space, a sign, digits, a fraction, an exponent; the rest ignored), could be id.
func numMayEqual(s string, id int64, any bool) bool {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	j := i
	if j < len(s) && (s[j] == '-' || s[j] == '+') {
		j++
	}
	digits := 0
	for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
		if s[j] != '.' {
			digits++
		}
		j++
	}
	if digits == 0 {
		return false // 0
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '-' || s[k] == '+') {
			k++
		}
		if k < len(s) && s[k] >= '0' && s[k] <= '9' {
			for k < len(s) && s[k] >= '0' && s[k] <= '9' {
				k++
			}
			j = k
		}
	}
	f, err := strconv.ParseFloat(s[i:j], 64)
	if err != nil {
		return true
	}
	return floatMayEqual(f, id, any)
}

// floatMayEqual reports whether f, rounded or truncated to an integer, could be id.
func floatMayEqual(f float64, id int64, any bool) bool {
	if math.IsNaN(f) {
		return false
	}
	if any {
		return math.Abs(f) >= 0.5
	}
	return math.Abs(f-float64(id)) < 1 || clipped(f, id)
}
