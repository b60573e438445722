package txstate

import "strings"

// maxUserVars bounds the user variables a Tracker remembers; beyond it the connection is
// discarded.
const maxUserVars = 32

// How userVarScan decides that a user variable is assigned.
const (
	assignOps = iota // only `@a :=` and `INTO @a, @b` assign
	assignSet        // a SET statement: `@a =` assigns too
	assignAll        // every variable named may be assigned (LOAD DATA's column lists)
)

// userVarScan calls add for each user variable the text assigns (@name, @`name`, @'name',
// @"name"; not @@system variables, not the host part of 'user'@'host'), outside literals and
// comments; executable comments are text. A variable is assigned when `:=` follows it, when it
// follows INTO (or another variable after INTO), in a SET statement (mode assignSet) when `=`
// follows it, and always with mode assignAll. Reading a variable does not change it, so
// `SELECT @tenant` leaves a variable Hooks.AfterConnect set alone. A name is passed as written,
// unquoted and unescaped. ok is false when a name cannot be read (a backslash or an
// unterminated quote in a quoted name): the caller then treats the session as unknown.
// backslash says whether a backslash escapes the next byte in literals.
func userVarScan(s string, backslash bool, mode int, add func(t *Tracker, name string) bool, t *Tracker) (ok bool) {
	into := false
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			i = skipQuotedAt(s, i, c, backslash && c != '`')
			into = false
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			if i+2 < len(s) && (s[i+2] == '!' || (s[i+2] == 'M' && i+3 < len(s) && s[i+3] == '!')) {
				i += 3 // an executable comment: its text counts
				continue
			}
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return true
			}
			i += j + 4
		case c == '#' || isDashComment(s, i):
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				return true
			}
			i += j + 1
		case c == '@':
			if i+1 < len(s) && s[i+1] == '@' {
				i += 2
				for i < len(s) && (isWord(s[i]) || s[i] == '.') {
					i++
				}
				into = false
				continue
			}
			if i > 0 && (s[i-1] == '\'' || s[i-1] == '"' || s[i-1] == '`') {
				i++ // 'user'@'host'
				if i < len(s) && (s[i] == '\'' || s[i] == '"' || s[i] == '`') {
					i = skipQuotedAt(s, i, s[i], false)
				}
				continue
			}
			i++
			if i >= len(s) {
				return true
			}
			var name string
			end := i
			if q := s[i]; q == '\'' || q == '"' || q == '`' {
				end = skipQuotedAt(s, i, q, false)
				if end > len(s) || s[end-1] != q || end-i < 2 {
					return false
				}
				raw := s[i+1 : end-1]
				if strings.IndexByte(raw, '\\') >= 0 {
					return false
				}
				name = raw
				if strings.IndexByte(raw, q) >= 0 {
					name = strings.ReplaceAll(raw, string([]byte{q, q}), string(q))
				}
			} else {
				for end < len(s) && (isWord(s[end]) || s[end] == '.' || s[end] >= 0x80) {
					end++
				}
				name = s[i:end]
			}
			i = end
			if name == "" {
				continue
			}
			k := skipGap(s, end)
			assigned := mode == assignAll || into ||
				k+1 < len(s) && s[k] == ':' && s[k+1] == '=' ||
				mode == assignSet && k < len(s) && s[k] == '='
			if assigned && !add(t, name) {
				return false
			}
		case isWord(c):
			j := i + 1
			for j < len(s) && isWord(s[j]) {
				j++
			}
			into = j-i == 4 && eqFold(s[i:j], "into")
			i = j
		default:
			i++
		}
	}
	return true
}

// skipQuotedAt returns the index just past the literal or identifier that starts with quote q at
// i (doubled quotes inside it; backslash escapes when backslash is true), or len(s)+1 when it
// is not terminated.
func skipQuotedAt(s string, i int, q byte, backslash bool) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			if backslash {
				j++
			}
		case q:
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(s) + 1
}

// addUserVar remembers a user variable to reset at release; false when there are too many.
func addUserVar(t *Tracker, name string) bool {
	if name == "" {
		return true
	}
	for _, n := range t.uvars {
		if eqFold(name, n) {
			return true
		}
	}
	if len(t.uvars) >= maxUserVars {
		return false
	}
	t.uvars = append(t.uvars, strings.ToLower(name))
	return true
}

// hasLastInsertIDArg reports whether s calls LAST_INSERT_ID with an argument (any case,
// spaces before the parenthesis allowed), anywhere in the text: a literal or comment that
// mentions it errs toward a reset. It visits only the text's '_' bytes, so a long INSERT of
// placeholders costs little.
func hasLastInsertIDArg(s string) bool {
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '_')
		if j < 0 {
			return false
		}
		p := i + j // the '_' between "insert" and "id"
		i = p + 1
		if p < 11 || p+3 > len(s) || s[p-7] != '_' || !eqFold(s[p-6:p], "insert") || !eqFold(s[p-11:p-7], "last") ||
			!eqFold(s[p+1:p+3], "id") {
			continue
		}
		a := p + 3
		for a < len(s) && isSpace(s[a]) {
			a++
		}
		if a >= len(s) || s[a] != '(' {
			continue
		}
		for a++; a < len(s) && isSpace(s[a]); a++ {
		}
		if a < len(s) && s[a] != ')' {
			return true
		}
	}
	return false
}

// containsFold reports whether s contains the lower-case ASCII word w in any case.
func containsFold(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		if s[i]|0x20 == w[0] && eqFold(s[i:i+len(w)], w) {
			return true
		}
	}
	return false
}

// skipGap returns the index of the first byte at or after i that is not whitespace or part of
// a comment (an executable comment's text is not skipped).
func skipGap(s string, i int) int {
	for i < len(s) {
		switch c := s[i]; {
		case isSpace(c):
			i++
		case c == '/' && i+1 < len(s) && s[i+1] == '*' && !(i+2 < len(s) && (s[i+2] == '!' || s[i+2] == 'M')):
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return len(s)
			}
			i += j + 4
		case c == '#' || isDashComment(s, i):
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				return len(s)
			}
			i += j + 1
		default:
			return i
		}
	}
	return i
}
