package pgdialect

// A small PostgreSQL lexer: enough to split a query string into statements and see their
// keywords, identifiers, string literals and punctuation, with PostgreSQL's comments (-- and
// nested /* */), strings ('', E'' with backslash escapes), dollar quotes ($tag$ … $tag$),
// quoted identifiers ("") and parameters ($1).

type tokKind uint8

const (
	tWord   tokKind = iota // keyword or unquoted identifier; text lower-cased
	tQIdent                // "quoted identifier"; text unescaped, case kept
	tString                // string literal (any form); text unescaped
	tNumber
	tParam // $1
	tPunct // one character: ( ) , = . ; and others
)

type token struct {
	kind tokKind
	text string
}

// lexer walks one query string.
type lexer struct {
	s   string
	pos int
	// bad is set when the input ends inside a string, comment or quoted identifier.
	bad bool
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' || c == '$' }

func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// next returns the next token, and false at the end of the input.
func (l *lexer) next() (token, bool) {
	s := l.s
	for l.pos < len(s) {
		c := s[l.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			l.pos++
		case c == '-' && l.pos+1 < len(s) && s[l.pos+1] == '-':
			for l.pos < len(s) && s[l.pos] != '\n' {
				l.pos++
			}
		case c == '/' && l.pos+1 < len(s) && s[l.pos+1] == '*':
			depth := 0
			for l.pos < len(s) {
				if s[l.pos] == '/' && l.pos+1 < len(s) && s[l.pos+1] == '*' {
					depth++
					l.pos += 2
				} else if s[l.pos] == '*' && l.pos+1 < len(s) && s[l.pos+1] == '/' {
					depth--
					l.pos += 2
					if depth == 0 {
						break
					}
				} else {
					l.pos++
				}
			}
			if depth != 0 {
				l.bad = true
			}
		case c == '\'':
			return token{kind: tString, text: l.quoted('\'', false)}, true
		case (c == 'e' || c == 'E') && l.pos+1 < len(s) && s[l.pos+1] == '\'':
			l.pos++
			return token{kind: tString, text: l.quoted('\'', true)}, true
		case (c == 'u' || c == 'U' || c == 'b' || c == 'B' || c == 'x' || c == 'X' || c == 'n' || c == 'N') &&
			l.pos+1 < len(s) && s[l.pos+1] == '\'':
			l.pos++
			return token{kind: tString, text: l.quoted('\'', false)}, true
		case (c == 'u' || c == 'U') && l.pos+2 < len(s) && s[l.pos+1] == '&' && s[l.pos+2] == '\'':
			l.pos += 2
			return token{kind: tString, text: l.quoted('\'', false)}, true
		case c == '"':
			return token{kind: tQIdent, text: l.quoted('"', false)}, true
		case (c == 'u' || c == 'U') && l.pos+2 < len(s) && s[l.pos+1] == '&' && s[l.pos+2] == '"':
			l.pos += 2
			return token{kind: tQIdent, text: l.quoted('"', false)}, true
		case c == '$':
			if t, ok := l.dollar(); ok {
				return t, true
			}
		case isIdentStart(c):
			start := l.pos
			for l.pos < len(s) && isIdentChar(s[l.pos]) {
				l.pos++
			}
			return token{kind: tWord, text: lower(s[start:l.pos])}, true
		case c >= '0' && c <= '9':
			start := l.pos
			for l.pos < len(s) && (s[l.pos] >= '0' && s[l.pos] <= '9' || s[l.pos] == '.' || s[l.pos] == '_' || isIdentStart(s[l.pos])) {
				l.pos++
			}
			return token{kind: tNumber, text: s[start:l.pos]}, true
		default:
			l.pos++
			return token{kind: tPunct, text: s[l.pos-1 : l.pos]}, true
		}
	}
	return token{}, false
}

// quoted reads a quoted string or identifier starting at the opening quote; a doubled quote
// stands for one; with backslash, a backslash escapes the next byte.
func (l *lexer) quoted(q byte, backslash bool) string {
	s := l.s
	l.pos++ // opening quote
	start := l.pos
	var b []byte
	for l.pos < len(s) {
		c := s[l.pos]
		switch {
		case backslash && c == '\\' && l.pos+1 < len(s):
			b = append(b, s[start:l.pos]...)
			b = append(b, s[l.pos+1])
			l.pos += 2
			start = l.pos
		case c == q && l.pos+1 < len(s) && s[l.pos+1] == q:
			b = append(b, s[start:l.pos+1]...)
			l.pos += 2
			start = l.pos
		case c == q:
			l.pos++
			if b == nil {
				return s[start : l.pos-1]
			}
			return string(append(b, s[start:l.pos-1]...))
		default:
			l.pos++
		}
	}
	l.bad = true
	return string(append(b, s[start:]...))
}

// dollar reads a parameter ($1) or a dollar-quoted string ($tag$…$tag$) at l.pos.
func (l *lexer) dollar() (token, bool) {
	s := l.s
	i := l.pos + 1
	if i < len(s) && s[i] >= '0' && s[i] <= '9' {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		t := token{kind: tParam, text: s[l.pos:i]}
		l.pos = i
		return t, true
	}
	for i < len(s) && isIdentChar(s[i]) && s[i] != '$' {
		i++
	}
	if i >= len(s) || s[i] != '$' {
		l.pos++
		return token{kind: tPunct, text: "$"}, true
	}
	tag := s[l.pos : i+1]
	body := i + 1
	for j := body; j+len(tag) <= len(s); j++ {
		if s[j] == '$' && s[j:j+len(tag)] == tag {
			l.pos = j + len(tag)
			return token{kind: tString, text: s[body:j]}, true
		}
	}
	l.bad = true
	l.pos = len(s)
	return token{kind: tString, text: s[body:]}, true
}

// statements splits q into statements of tokens (empty statements dropped); bad reports an
// unterminated string, comment or identifier.
func statements(q string) (out [][]token, bad bool) {
	l := lexer{s: q}
	var cur []token
	for {
		t, ok := l.next()
		if !ok {
			break
		}
		if t.kind == tPunct && t.text == ";" {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, t)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out, l.bad
}
