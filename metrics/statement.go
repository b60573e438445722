package metrics

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sqlpool/sqlpool/stmtname"
)

// MaxStatementNameLen is the longest statement label, in bytes. A parsed name is cut to it
// (at a character boundary); a longer name from stmtname.With is ignored.
const MaxStatementNameLen = 96

// stmtSeries is the handles of one statement label in one pool.
type stmtSeries struct {
	name string
	hist *histogram
	max  windowMax
	errs [numClasses]atomic.Pointer[prometheus.Counter] // created on the first error of each class
}

// queryEntry maps one SQL text, by its 64-bit hash and length, to its series.
type queryEntry struct {
	hash uint64
	n    int
	s    *stmtSeries
}

const (
	queryCacheSlots = 4096 // per pool; a power of two
	queryProbes     = 8
	queryHashPrefix = 1024 // bytes of SQL text hashed; the length is compared too
)

// stmtTable names the statements of one pool.
//
// The hot path is lock-free and allocation-free: a name from the ctx is looked up in names, a
// copy-on-write map read with one atomic load; otherwise the SQL text (its first
// queryHashPrefix bytes) is hashed with maphash and looked up, with its length, in queries, a
// fixed open-addressing table of immutable entries, each published by compare-and-swap and
// never removed (texts that arrive once the table is full are parsed every time, which does not
// allocate either). A text not in the table is parsed into a stack buffer
// (verb + first table) and its name looked up in names; it is added to the table if a slot is
// free within queryProbes of its hash. Only a name never seen before takes mu, to add a series,
// and beyond m.maxNames names every new name maps to the "other" series. The table keeps no
// SQL text: two texts of the same length whose 64-bit seeded hashes collide (probability about
// 10^-12 with a full table), or that share their first queryHashPrefix bytes, would share a
// label, which for a metric label is harmless.
type stmtTable struct {
	m    *Metrics
	pool string
	seed maphash.Seed

	queries [queryCacheSlots]atomic.Pointer[queryEntry]

	names atomic.Pointer[map[string]*stmtSeries] // copy-on-write; written under mu
	mu    sync.Mutex
	count int         // distinct names other than "other", under mu
	other *stmtSeries // under mu until published in names
	// full is the "other" series once count reached the cap: new names then skip mu.
	full atomic.Pointer[stmtSeries]
}

func newStmtTable(m *Metrics, poolName string) *stmtTable {
	t := &stmtTable{m: m, pool: poolName, seed: maphash.MakeSeed()}
	empty := map[string]*stmtSeries{}
	t.names.Store(&empty)
	return t
}

// series returns the series of a statement run with ctx.
func (t *stmtTable) series(ctx context.Context, query string) *stmtSeries {
	if ctx != nil {
		if name, ok := stmtname.From(ctx); ok && validName(name) {
			if s := (*t.names.Load())[name]; s != nil {
				return s
			}
			if s := t.full.Load(); s != nil {
				return s
			}
			return t.add(name)
		}
	}
	key := query
	if len(key) > queryHashPrefix {
		key = key[:queryHashPrefix] // a multi-megabyte bulk INSERT is not hashed whole
	}
	h := maphash.String(t.seed, key)
	free := -1
	for i := uint64(0); i < queryProbes; i++ {
		slot := int((h + i) & (queryCacheSlots - 1))
		e := t.queries[slot].Load()
		if e == nil {
			free = slot
			break
		}
		if e.hash == h && e.n == len(query) {
			return e.s
		}
	}
	var buf [MaxStatementNameLen]byte
	name := parseStatementName(buf[:0], query)
	s := (*t.names.Load())[string(name)] // no allocation: the compiler does not copy for a lookup
	if s == nil {
		if s = t.full.Load(); s == nil {
			s = t.add(string(name))
		}
	}
	if free >= 0 {
		t.queries[free].CompareAndSwap(nil, &queryEntry{hash: h, n: len(query), s: s})
	}
	return s
}

func validName(name string) bool {
	return name != "" && len(name) <= MaxStatementNameLen && utf8.ValidString(name)
}

// add is the slow path: a name not in names yet.
func (t *stmtTable) add(name string) *stmtSeries {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := (*t.names.Load())[name]; s != nil {
		return s
	}
	if name == OtherStatement || t.count >= t.m.maxNames {
		if t.other == nil {
			t.other = t.newSeries(OtherStatement)
			t.publish(OtherStatement, t.other)
		}
		if t.count >= t.m.maxNames {
			t.full.Store(t.other) // from now on new names skip mu
		}
		return t.other
	}
	s := t.newSeries(name)
	t.count++
	t.publish(name, s)
	return s
}

// publish adds name to names, copy-on-write. The caller holds mu.
func (t *stmtTable) publish(name string, s *stmtSeries) {
	old := *t.names.Load()
	next := make(map[string]*stmtSeries, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[name] = s
	t.names.Store(&next)
}

func (t *stmtTable) newSeries(name string) *stmtSeries {
	s := &stmtSeries{name: name, hist: newHistogram(t.m.stmtBuckets)}
	s.max.lastRotate = t.m.clock.Now()
	return s
}

// all returns the pool's series, for reads.
func (t *stmtTable) all() []*stmtSeries {
	names := *t.names.Load()
	out := make([]*stmtSeries, 0, len(names))
	for _, s := range names {
		out = append(out, s)
	}
	return out
}

// errorCounter returns the error counter of class c, creating it on the first error.
func (t *stmtTable) errorCounter(s *stmtSeries, c errClass) prometheus.Counter {
	if p := s.errs[c].Load(); p != nil {
		return *p
	}
	ctr := t.m.stmtErrors.WithLabelValues(t.pool, s.name, classNames[c])
	s.errs[c].CompareAndSwap(nil, &ctr)
	return ctr
}

// StatementDone is pool.Trace.StatementDone: it observes d in sqlpool_statement_seconds and
// counts an error in sqlpool_statement_errors_total, under the statement's bounded name (see
// stmtname.With and docs/metrics.md). The SQL text is parsed, never used as a label.
func (m *Metrics) StatementDone(ctx context.Context, name, query string, d time.Duration, err error) {
	m.trace.StatementDone(ctx, name, query, d, err)
}

// statementDone returns the function of StatementDone, for Trace.
func (m *Metrics) statementDone() func(ctx context.Context, name, query string, d time.Duration, err error) {
	return func(ctx context.Context, name, query string, d time.Duration, err error) {
		pm := m.poolFor(name)
		if pm.stmts == nil {
			return
		}
		s := pm.stmts.series(ctx, query)
		s.hist.observe(d)
		s.max.record(d)
		if err != nil {
			pm.stmts.errorCounter(s, classify(err)).Inc()
		}
	}
}

// knownVerbs are the statement verbs kept as labels; any other first word gives "other".
var knownVerbs = map[string]bool{
	"select": true, "insert": true, "update": true, "delete": true, "replace": true, "with": true,
	"call": true, "set": true, "show": true, "begin": true, "start": true, "commit": true,
	"rollback": true, "savepoint": true, "release": true, "create": true, "alter": true,
	"drop": true, "truncate": true, "rename": true, "lock": true, "unlock": true, "use": true,
	"load": true, "handler": true, "do": true, "explain": true, "describe": true, "desc": true,
	"analyze": true, "optimize": true, "repair": true, "check": true, "checksum": true,
	"flush": true, "kill": true, "grant": true, "revoke": true, "prepare": true, "execute": true,
	"deallocate": true, "xa": true, "values": true, "table": true, "reset": true, "purge": true,
	"change": true, "install": true, "uninstall": true, "binlog": true, "signal": true,
	"resignal": true, "get": true, "help": true, "shutdown": true, "backup": true,
}

// parseStatementName appends the statement name of query to buf: the lower-case verb, and for
// SELECT, WITH, INSERT, REPLACE, UPDATE, DELETE and CALL a space and the first table (or
// procedure) as written, schema included ("select users", "insert zipkin.spans"). It reads
// past comments, string literals and quoted identifiers, allocates nothing, and gives "other"
// when the text starts with no known verb. The result is at most cap(buf) bytes and valid
// UTF-8.
func parseStatementName(buf []byte, q string) []byte {
	i := skipSpace(q, 0)
	for i < len(q) && q[i] == '(' { // "(SELECT ...) UNION (SELECT ...)"
		i = skipSpace(q, i+1)
	}
	start := i
	for i < len(q) && isLetter(q[i]) {
		i++
	}
	verb := q[start:i]
	if len(verb) == 0 || len(verb) > 16 {
		return append(buf, OtherStatement...)
	}
	for j := 0; j < len(verb); j++ {
		buf = append(buf, lower(verb[j]))
	}
	if !knownVerbs[string(buf)] {
		return append(buf[:0], OtherStatement...)
	}
	var tbl string
	switch {
	case equalFold(verb, "select"), equalFold(verb, "with"), equalFold(verb, "delete"):
		tbl = tableAfterFrom(q, i)
	case equalFold(verb, "insert"), equalFold(verb, "replace"):
		tbl = tableAfterKeywords(q, i, "low_priority", "delayed", "high_priority", "ignore", "into")
	case equalFold(verb, "update"):
		tbl = tableAfterKeywords(q, i, "low_priority", "ignore")
	case equalFold(verb, "call"):
		tbl = tableAfterKeywords(q, i)
	}
	if tbl == "" {
		return buf
	}
	room := cap(buf) - len(buf) - 1
	if room <= 0 {
		return buf
	}
	if len(tbl) > room {
		tbl = tbl[:room]
	}
	for len(tbl) > 0 && !utf8.ValidString(tbl) { // cut at a character boundary; drop bad bytes
		tbl = tbl[:len(tbl)-1]
	}
	if tbl == "" {
		return buf
	}
	buf = append(buf, ' ')
	return append(buf, tbl...)
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func isIdentByte(c byte) bool {
	return isLetter(c) || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}

// skipSpace skips white space and comments from i.
func skipSpace(q string, i int) int {
	for i < len(q) {
		switch c := q[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '#' || c == '-' && i+2 < len(q) && q[i+1] == '-' && (q[i+2] == ' ' || q[i+2] == '\t' || q[i+2] == '\n'):
			for i < len(q) && q[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			i += 2
			for i+1 < len(q) && (q[i] != '*' || q[i+1] != '/') {
				i++
			}
			i += 2
		default:
			return i
		}
	}
	return len(q)
}

// skipQuoted skips the quoted string or identifier that starts at i (q[i] is the quote).
func skipQuoted(q string, i int) int {
	quote := q[i]
	for i++; i < len(q); i++ {
		switch q[i] {
		case '\\':
			if quote != '`' {
				i++
			}
		case quote:
			if i+1 < len(q) && q[i+1] == quote { // doubled quote
				i++
				continue
			}
			return i + 1
		}
	}
	return len(q)
}

// word returns the bare word at i and the index after it.
func word(q string, i int) (string, int) {
	s := i
	for i < len(q) && isIdentByte(q[i]) {
		i++
	}
	return q[s:i], i
}

func equalFold(w, lowerWord string) bool {
	if len(w) != len(lowerWord) {
		return false
	}
	for j := 0; j < len(w); j++ {
		if lower(w[j]) != lowerWord[j] {
			return false
		}
	}
	return true
}

// tableName reads a possibly qualified, possibly quoted table name at i.
func tableName(q string, i int) string {
	start := i
	for part := 0; part < 2; part++ {
		if i >= len(q) {
			break
		}
		switch c := q[i]; {
		case c == '`' || c == '"':
			end := skipQuoted(q, i)
			i = end
		case isIdentByte(c):
			_, i = word(q, i)
		default:
			return trimQuotes(q[start:i])
		}
		if i < len(q) && q[i] == '.' && part == 0 {
			i++
			continue
		}
		break
	}
	return trimQuotes(q[start:i])
}

// trimQuotes removes identifier quotes: `db`.`t` → db.t. It returns a substring when it can,
// and otherwise the name with quotes (a label must not allocate on the hot path; quoted names
// of two parts are rare and still bounded).
func trimQuotes(s string) string {
	if len(s) >= 2 && (s[0] == '`' || s[0] == '"') && s[len(s)-1] == s[0] {
		inner := s[1 : len(s)-1]
		for j := 0; j < len(inner); j++ {
			if inner[j] == s[0] || inner[j] == '.' {
				return s
			}
		}
		return inner
	}
	return s
}

// tableAfterKeywords skips optional keywords (in lower case) after i and reads the table.
func tableAfterKeywords(q string, i int, optional ...string) string {
	i = skipSpace(q, i)
	for {
		w, next := word(q, i)
		skipped := false
		for _, k := range optional {
			if equalFold(w, k) {
				i = skipSpace(q, next)
				skipped = true
				break
			}
		}
		if !skipped {
			break
		}
	}
	return tableName(q, i)
}

// tableAfterFrom returns the table after the first FROM at parenthesis depth 0, or, when that
// FROM is followed by a derived table or there is none, after the first FROM at any depth.
func tableAfterFrom(q string, i int) string {
	depth := 0
	fallback := ""
	for i < len(q) {
		c := q[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			i = skipQuoted(q, i)
		case c == '(':
			depth++
			i++
		case c == ')':
			if depth > 0 {
				depth--
			}
			i++
		case c == '#' || c == '-' || c == '/':
			if j := skipSpace(q, i); j > i {
				i = j
			} else {
				i++
			}
		case isIdentByte(c):
			var w string
			w, i = word(q, i)
			if !equalFold(w, "from") {
				continue
			}
			j := skipSpace(q, i)
			if j >= len(q) || q[j] == '(' {
				continue
			}
			t := tableName(q, j)
			if t == "" {
				continue
			}
			if depth == 0 {
				return t
			}
			if fallback == "" {
				fallback = t
			}
		default:
			i++
		}
	}
	return fallback
}
