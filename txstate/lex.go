package txstate

import (
	"encoding/binary"
	"strings"
)

// Quoting says how the session's sql_mode lexes quoted text, which decides
// where a ';' that separates two statements can be. Only the backslash rule
// matters: NO_BACKSLASH_ESCAPES makes '\' an ordinary character inside
// literals, and ANSI_QUOTES makes "..." an identifier, in which '\' is
// always ordinary.
//
// The zero value, QuotingUnknown, makes the classifier try every mode and
// take the most cautious answer, so text such as 'a\'; DROP ...' counts as
// two statements. BaselineFromRow sets the mode from @@sql_mode.
type Quoting uint8

const (
	// QuotingUnknown lexes the text under every mode below and reports a
	// second statement if any mode finds one.
	QuotingUnknown Quoting = iota
	// QuotingBackslash is the server default: '\' escapes the next character
	// inside both '...' and "..." literals.
	QuotingBackslash
	// QuotingANSI is ANSI_QUOTES without NO_BACKSLASH_ESCAPES: '\' escapes
	// inside '...', and "..." is an identifier without escapes.
	QuotingANSI
	// QuotingNoBackslash is NO_BACKSLASH_ESCAPES: '\' is an ordinary
	// character everywhere.
	QuotingNoBackslash
)

// String returns the mode's name, such as "backslash".
func (q Quoting) String() string {
	switch q {
	case QuotingUnknown:
		return "unknown"
	case QuotingBackslash:
		return "backslash"
	case QuotingANSI:
		return "ansi"
	case QuotingNoBackslash:
		return "no-backslash"
	}
	return "Quoting(" + itoa(int(q)) + ")"
}

// QuotingFor returns the Quoting of a session whose @@sql_mode is sqlMode,
// a comma-separated list of mode names in any case (MySQL and MariaDB expand
// the combination modes ANSI and ORACLE, so ANSI_QUOTES appears by name).
func QuotingFor(sqlMode string) Quoting {
	nbe, ansi := false, false
	for len(sqlMode) > 0 {
		var m string
		if i := strings.IndexByte(sqlMode, ','); i >= 0 {
			m, sqlMode = sqlMode[:i], sqlMode[i+1:]
		} else {
			m, sqlMode = sqlMode, ""
		}
		m = strings.TrimSpace(m)
		switch {
		case strings.EqualFold(m, "NO_BACKSLASH_ESCAPES"):
			nbe = true
		case strings.EqualFold(m, "ANSI_QUOTES"), strings.EqualFold(m, "ANSI"), strings.EqualFold(m, "ORACLE"),
			strings.EqualFold(m, "POSTGRESQL"), strings.EqualFold(m, "DB2"), strings.EqualFold(m, "MSSQL"),
			strings.EqualFold(m, "MAXDB"):
			ansi = true
		}
	}
	switch {
	case nbe:
		return QuotingNoBackslash
	case ansi:
		return QuotingANSI
	}
	return QuotingBackslash
}

// Byte classes, in ctab.
const (
	cSpace   = 1 << iota // whitespace to the servers' lexers
	cWord                // may appear in an unquoted identifier or keyword
	cSpecial             // may start a comment or close an executable one
)

// ctab classifies bytes for the lexer's hot loops; lower maps ASCII
// letters to lower case and other bytes to themselves.
var (
	ctab  [256]uint8
	lower [256]byte
)

func init() {
	for c := 0; c < 256; c++ {
		b := byte(c)
		lower[c] = b
		if b >= 'A' && b <= 'Z' {
			lower[c] = b + 'a' - 'A'
		}
		switch {
		case b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\f' || b == '\v':
			ctab[c] = cSpace
		case b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '$' || b >= 0x80:
			// Bytes of multi-byte UTF-8 characters count, as the servers
			// accept them in identifiers.
			ctab[c] = cWord
		case b == '#' || b == '-' || b == '/' || b == '*':
			ctab[c] = cSpecial
		}
	}
}

// isSpace reports the bytes the servers' lexers treat as whitespace. Other
// control bytes are not skipped: they make the text unknown, which is safe.
func isSpace(c byte) bool { return ctab[c]&cSpace != 0 }

// isWord reports bytes that may appear in an unquoted identifier or keyword.
func isWord(c byte) bool { return ctab[c]&cWord != 0 }

// eqFold reports whether w equals the lower-case ASCII keyword kw, ignoring
// the case of w's letters. It does not allocate.
func eqFold(w, kw string) bool {
	if len(w) != len(kw) {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != kw[i] {
			return false
		}
	}
	return true
}

// execMarker returns the length of an executable-comment opener at s[i]
// ("/*!", "/*M!" or "/*m!" and up to six version digits) and whether the
// comment is conditional: a version number, or MariaDB-only, means some
// servers skip it. It returns 0 when s[i] starts no executable comment.
func execMarker(s string, i int) (n int, cond bool) {
	if i+2 >= len(s) || s[i] != '/' || s[i+1] != '*' {
		return 0, false
	}
	switch {
	case s[i+2] == '!':
		n = 3
	case (s[i+2] == 'M' || s[i+2] == 'm') && i+3 < len(s) && s[i+3] == '!':
		n, cond = 4, true
	default:
		return 0, false
	}
	for d := 0; d < 6 && i+n < len(s) && s[i+n] >= '0' && s[i+n] <= '9'; d++ {
		n++
		cond = true
	}
	return n, cond
}

// skipQuoted returns the index just past the quoted text that starts with
// the quote s[i]. A doubled quote stands for itself; with bs, a backslash
// escapes the next byte. Unterminated text runs to the end.
func skipQuoted(s string, i int, bs bool) int {
	q := s[i]
	i++
	for i < len(s) {
		c := s[i]
		if c == q {
			if i+1 < len(s) && s[i+1] == q {
				i += 2
				continue
			}
			return i + 1
		}
		if c == '\\' && bs {
			i += 2
			continue
		}
		i++
	}
	return len(s)
}

// skipLine returns the index just past the newline that ends the line
// comment starting at s[i], or len(s).
func skipLine(s string, i int) int {
	if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
		return i + j + 1
	}
	return len(s)
}

// skipBlock returns the index just past the "*/" that closes the comment
// opened at s[i], or len(s).
func skipBlock(s string, i int) int {
	if j := strings.Index(s[i+2:], "*/"); j >= 0 {
		return i + 2 + j + 2
	}
	return len(s)
}

// isDashComment reports whether s[i:] starts a "-- " comment: two dashes
// followed by whitespace, a control byte, or the end of the text.
func isDashComment(s string, i int) bool {
	return i+1 < len(s) && s[i] == '-' && s[i+1] == '-' && (i+2 == len(s) || s[i+2] <= ' ')
}

// swarMax is the length up to which quickScan beats strings.IndexByte.
const swarMax = 64

// quickScan reports whether s may contain a ';' and a 'k' or 'K' (the rare
// byte of GET_LOCK), so that the exact scans can be skipped. For short text
// it tests eight bytes at a time; for longer text it answers true and
// leaves the work to the exact scans, which use strings.IndexByte.
func quickScan(s string) (semi, k bool) {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	if len(s) > swarMax {
		return true, true
	}
	if len(s) < 8 {
		var b [8]byte // zero padding matches neither ';' nor 'k'|0x20
		copy(b[:], s)
		s = string(b[:]) // does not escape: no allocation
	}
	var acc uint64
	for i := 0; ; i += 8 {
		if i > len(s)-8 {
			i = len(s) - 8 // the last word overlaps the one before
		}
		x := binary.LittleEndian.Uint64([]byte(s[i : i+8]))
		v := x ^ (';' * ones)
		semiBits := (v - ones) &^ v & highs // the high bit of each zero byte
		w := (x | 0x20*ones) ^ ('k' * ones)
		kBits := (w - ones) &^ w & highs
		acc |= semiBits | kBits>>7
		if i == len(s)-8 {
			break
		}
	}
	return acc&highs != 0, acc&(highs>>7) != 0
}

// hasGetLock reports whether s mentions GET_LOCK in any case, anywhere:
// in a string or comment too, which errs toward a lock (safe). It looks for
// the rare byte 'k', then 'K', with strings.IndexByte and checks the seven
// bytes before each one.
func hasGetLock(s string) bool {
	return hasGetLockK(s, 'k') || hasGetLockK(s, 'K')
}

func hasGetLockK(s string, k byte) bool {
	for i := 7; i < len(s); {
		j := strings.IndexByte(s[i:], k)
		if j < 0 {
			return false
		}
		p := i + j
		if s[p-7]|0x20 == 'g' && s[p-6]|0x20 == 'e' && s[p-5]|0x20 == 't' && s[p-4] == '_' &&
			s[p-3]|0x20 == 'l' && s[p-2]|0x20 == 'o' && s[p-1]|0x20 == 'c' {
			return true
		}
		i = p + 1
	}
	return false
}

// hasConditional reports whether s contains an executable comment that
// some servers skip: "/*!" with a version, or "/*M!".
func hasConditional(s string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], "/*")
		if j < 0 {
			return false
		}
		if _, cond := execMarker(s, i+j); cond {
			return true
		}
		i += j + 2
	}
}

// hasSecondStatement reports whether s holds more than one statement: a ';'
// outside literals and comments followed by anything but whitespace,
// comments and further ';'. Executable comments are text, so a ';' inside
// one counts. q says how backslashes lex; QuotingUnknown tries every mode.
func hasSecondStatement(s string, q Quoting) bool {
	i := strings.IndexByte(s, ';')
	if i < 0 {
		return false
	}
	// Fast path: the only ';' ends the text, so nothing can follow it.
	if strings.TrimRight(s[i+1:], " \t\n\r\f\v") == "" {
		return false
	}
	switch q {
	case QuotingBackslash:
		return scanSecond(s, true, true)
	case QuotingANSI:
		return scanSecond(s, true, false)
	case QuotingNoBackslash:
		return scanSecond(s, false, false)
	}
	if strings.IndexByte(s, '\\') < 0 {
		return scanSecond(s, true, true)
	}
	return scanSecond(s, true, true) || scanSecond(s, true, false) || scanSecond(s, false, false)
}

// scanSecond is hasSecondStatement for one lexing mode: bsSingle and
// bsDouble say whether a backslash escapes inside '...' and "...".
func scanSecond(s string, bsSingle, bsDouble bool) bool {
	exec := 0
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case '\'':
			i = skipQuoted(s, i, bsSingle)
		case '"':
			i = skipQuoted(s, i, bsDouble)
		case '`':
			i = skipQuoted(s, i, false)
		case '#':
			i = skipLine(s, i)
		case '-':
			if isDashComment(s, i) {
				i = skipLine(s, i)
			} else {
				i++
			}
		case '/':
			if i+1 < len(s) && s[i+1] == '*' {
				if n, _ := execMarker(s, i); n > 0 {
					exec++
					i += n
				} else {
					i = skipBlock(s, i)
				}
			} else {
				i++
			}
		case '*':
			if exec > 0 && i+1 < len(s) && s[i+1] == '/' {
				exec--
				i += 2
			} else {
				i++
			}
		case ';':
			if !restIsEmpty(s, i+1) {
				return true
			}
			return false
		default:
			i++
		}
	}
	return false
}

// restIsEmpty reports whether s[i:] holds only whitespace, plain comments,
// ';' and the "*/" that closes an executable comment.
func restIsEmpty(s string, i int) bool {
	for i < len(s) {
		c := s[i]
		switch {
		case isSpace(c) || c == ';':
			i++
		case c == '#':
			i = skipLine(s, i)
		case isDashComment(s, i):
			i = skipLine(s, i)
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			if n, _ := execMarker(s, i); n > 0 {
				return false
			}
			i = skipBlock(s, i)
		case c == '*' && i+1 < len(s) && s[i+1] == '/':
			i += 2
		default:
			return false
		}
	}
	return true
}

// lexer walks statement text token by token for the classifier. It skips
// whitespace and plain comments, and treats executable comments as text:
// their openers and closers are skipped like whitespace.
type lexer struct {
	s        string
	i        int
	exec     int  // executable comments open at i
	bsSingle bool // a backslash escapes inside '...'
	bsDouble bool // a backslash escapes inside "..."
}

// skip moves past whitespace, plain comments and executable-comment
// openers and closers. Its fast path, already at a token, inlines.
func (l *lexer) skip() {
	if l.i < len(l.s) && ctab[l.s[l.i]]&(cSpace|cSpecial) == 0 {
		return
	}
	l.skipSlow()
}

// skipSlow is skip past the fast path.
func (l *lexer) skipSlow() {
	s := l.s
	for l.i < len(s) {
		c := s[l.i]
		t := ctab[c]
		if t&cSpace != 0 {
			l.i++
			continue
		}
		if t&cSpecial == 0 {
			return
		}
		switch {
		case c == '#':
			l.i = skipLine(s, l.i)
		case c == '-' && isDashComment(s, l.i):
			l.i = skipLine(s, l.i)
		case c == '/' && l.i+1 < len(s) && s[l.i+1] == '*':
			if n, _ := execMarker(s, l.i); n > 0 {
				l.exec++
				l.i += n
			} else {
				l.i = skipBlock(s, l.i)
			}
		case c == '*' && l.exec > 0 && l.i+1 < len(s) && s[l.i+1] == '/':
			l.exec--
			l.i += 2
		default:
			return
		}
	}
}

// word skips to the next token and returns it if it is an unquoted word,
// else "" without moving.
func (l *lexer) word() string {
	l.skip()
	s := l.s
	start, i := l.i, l.i
	for i < len(s) && ctab[s[i]]&cWord != 0 {
		i++
	}
	l.i = i
	return s[start:i]
}

// wordKey is word that also returns the word's key for a switch on the k*
// constants: its lower-case bytes packed big-endian, or 0 for a word longer
// than 8 bytes. ORing 0x20 into every byte lower-cases letters and maps no
// other word byte onto a letter, so keys match keywords exactly.
func (l *lexer) wordKey() (string, uint64) {
	l.skip()
	s := l.s
	start, i := l.i, l.i
	for i < len(s) && ctab[s[i]]&cWord != 0 {
		i++
	}
	l.i = i
	n := i - start
	if n == 0 || n > 8 {
		return s[start:i], 0
	}
	var k uint64
	if start+8 <= len(s) {
		k = binary.BigEndian.Uint64([]byte(s[start:start+8])) >> (64 - 8*n)
	} else {
		for j := start; j < i; j++ {
			k = k<<8 | uint64(s[j])
		}
	}
	return s[start:i], k | 0x2020202020202020>>(64-8*n)
}

// peek skips to the next token and returns its first byte, or 0 at the end.
func (l *lexer) peek() byte {
	l.skip()
	if l.i < len(l.s) {
		return l.s[l.i]
	}
	return 0
}

// is consumes the next word if it equals the lower-case keyword kw.
func (l *lexer) is(kw string) bool {
	l.skip() // so that restoring l.i never undoes an executable-comment closer
	save := l.i
	if eqFold(l.word(), kw) {
		return true
	}
	l.i = save
	return false
}

// atEnd reports whether only whitespace, comments or a ';' remain. Text
// after a ';' is the concern of hasSecondStatement.
func (l *lexer) atEnd() bool {
	c := l.peek()
	return c == 0 || c == ';'
}

// token consumes one token of any kind and returns its text: a quoted
// literal or identifier, a word, or a single other byte.
func (l *lexer) token() string {
	l.skip()
	start := l.i
	if l.i >= len(l.s) {
		return ""
	}
	switch c := l.s[l.i]; {
	case c == '\'':
		l.i = skipQuoted(l.s, l.i, l.bsSingle)
	case c == '"':
		l.i = skipQuoted(l.s, l.i, l.bsDouble)
	case c == '`':
		l.i = skipQuoted(l.s, l.i, false)
	case isWord(c):
		for l.i < len(l.s) && isWord(l.s[l.i]) {
			l.i++
		}
	default:
		l.i++
	}
	return l.s[start:l.i]
}

// ident consumes an identifier: an unquoted word or a `quoted` one. raw is
// its text as written; plain is its name, or "" when the name needs
// unescaping. ok is false for anything else, including "double-quoted"
// names, whose meaning depends on ANSI_QUOTES.
func (l *lexer) ident() (raw, plain string, ok bool) {
	l.skip()
	start := l.i
	if l.i >= len(l.s) {
		return "", "", false
	}
	switch c := l.s[l.i]; {
	case c == '`':
		l.i = skipQuoted(l.s, l.i, false)
		raw = l.s[start:l.i]
		if len(raw) < 2 || raw[len(raw)-1] != '`' {
			return "", "", false
		}
		inner := raw[1 : len(raw)-1]
		if inner == "" {
			return "", "", false
		}
		if strings.IndexByte(inner, '`') < 0 {
			plain = inner
		}
		return raw, plain, true
	case isWord(c):
		for l.i < len(l.s) && isWord(l.s[l.i]) {
			l.i++
		}
		raw = l.s[start:l.i]
		return raw, raw, true
	}
	return "", "", false
}

// itoa formats small integers for String methods without fmt.
func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
