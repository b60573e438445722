package pgdialect

import (
	"database/sql/driver"
	"strings"
	"syscall"

	"github.com/sqlpool/sqlpool/pool"
)

// Session state bits.
const (
	sTx        uint32 = 1 << iota // a transaction may be open (from statements and database/sql)
	sSettings                     // named settings to RESET (tracker.settings)
	sResetAll                     // settings changed that cannot be named: RESET ALL
	sRole                         // SET ROLE
	sAuth                         // SET SESSION AUTHORIZATION
	sListen                       // LISTEN
	sAdvisory                     // session advisory locks
	sTemp                         // temporary objects
	sCursors                      // WITH HOLD cursors
	sPrepared                     // SQL PREPARE (tracker.prepared)
	sSequences                    // currval/lastval state (nextval, setval)
	sDiscard                      // a change no statement undoes (LOAD): close the connection
)

// everything is the full targeted reset for a session state the tracker could not follow
// (sql.Conn.Raw, DO, CALL): all of DISCARD ALL but DEALLOCATE ALL, so that the driver's
// protocol-level prepared statements (pgx's statement cache, the pool's) survive.
const everything = sResetAll | sRole | sAuth | sListen | sAdvisory | sTemp | sCursors | sSequences

// tracker is PostgreSQL's pool.SessionTracker.
type tracker struct {
	st       uint32
	prev     uint32 // st before the last reported call, for Failed
	readOnly bool   // the borrower opened a read-only transaction
	roSess   bool   // the borrower made transactions read-only by default
	settings []string
	prepared []string
	reason   string // why sDiscard
	// txStatus reads the driver's transaction status ('I', 'T', 'E'), or is nil when the
	// driver does not expose it.
	txStatus func() byte
	// sock is the connection's socket for Alive, or nil.
	sock syscall.RawConn
	// closed reports pgx's closed or busy connection, or is nil.
	closed func() bool
	// cacheFirst is set for lib/pq's connections, which parse every parameterized statement
	// anew (CacheFirst).
	cacheFirst bool
	// skipReset is set for lib/pq's connections and pgx's with stdlib's default reset
	// (SkipDriverReset).
	skipReset bool
	plan      []string
	buf       strings.Builder
}

var _ pool.SessionTracker = (*tracker)(nil)

// Caps reports the tracker's Alive, SkipDriverReset and IsValid, and CacheFirst for lib/pq's
// connections.
func (t *tracker) Caps() pool.SessionCaps {
	c := pool.SessionCaps{Alive: t.Alive, SkipDriverReset: t.skipReset, IsValid: t.IsValid}
	if t.cacheFirst {
		c.CacheFirst = t.CacheFirst
	}
	return c
}

// CacheFirst is the tracker's pool.SessionCaps.CacheFirst: lib/pq runs a parameterized statement as an
// unnamed one, parsed and described in a round trip of its own before it is bound and executed,
// so outside a transaction (protocol status 'I', no transaction begun) the pool's statement
// cache runs a repeated one in one round trip instead. pgx keeps its own statement cache.
func (t *tracker) CacheFirst() bool {
	return t.cacheFirst && t.st&sTx == 0 && t.txStatus != nil && t.txStatus() == 'I'
}

func (t *tracker) Begin(opts driver.TxOptions) {
	t.prev = t.st
	t.st |= sTx
	t.readOnly = opts.ReadOnly
}

func (t *tracker) Commit()   { t.prev = t.st; t.endTx() }
func (t *tracker) Rollback() { t.prev = t.st; t.endTx() }

func (t *tracker) endTx() {
	t.st &^= sTx
	t.readOnly = false
}

// Failed keeps what the failed call would have ended or undone: a failed COMMIT may have left
// the transaction open, a failed DISCARD TEMP the temporary tables. Changes it made are kept
// too (they may have happened).
func (t *tracker) Failed() { t.st |= t.prev }

func (t *tracker) Unknown() { t.st |= everything | sTx }

func (t *tracker) Result(driver.Result) {}

func (t *tracker) ReadOnlyTx() bool { return t.readOnly || t.roSess }

func (t *tracker) inTx() bool {
	if t.txStatus != nil {
		return t.txStatus() != 'I'
	}
	return t.st&sTx != 0
}

func (t *tracker) Clean() bool { return t.st&^sTx == 0 && !t.inTx() }

// Scope is known while nothing changed how names resolve: search_path, whose default "$user"
// follows the role, and any setting. In a failed transaction ('E') it is unknown, so that a
// prepare goes to the server and fails there (25P02) as it would without the pool's cache.
func (t *tracker) Scope() (string, bool) {
	if t.txStatus != nil && t.txStatus() == 'E' {
		return "", false
	}
	return "", t.st&(sSettings|sResetAll|sRole|sAuth|sDiscard) == 0
}

func (t *tracker) BeforeClose() []string { return nil }

func (t *tracker) Done() {
	t.st, t.prev = 0, 0
	t.readOnly, t.roSess = false, false
	t.settings = t.settings[:0]
	t.prepared = t.prepared[:0]
	t.reason = ""
}

// Plan returns ROLLBACK (when a transaction is open, or in the failed state) as a statement of
// its own, then the resets joined into one simple-protocol string (one round trip).
func (t *tracker) Plan() pool.ReleasePlan {
	if t.st&sDiscard != 0 {
		return pool.ReleasePlan{Discard: true, Reason: t.reason}
	}
	t.plan = t.plan[:0]
	var why []string
	if t.inTx() {
		t.plan = append(t.plan, "ROLLBACK")
		why = append(why, "open transaction")
	}
	b := &t.buf
	b.Reset()
	add := func(s, reason string) {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(s)
		why = append(why, reason)
	}
	st := t.st
	if st&sCursors != 0 {
		add("CLOSE ALL", "cursors")
	}
	if st&sAuth != 0 {
		add("RESET SESSION AUTHORIZATION", "session authorization")
	}
	if st&(sRole|sAuth) != 0 {
		add("RESET ROLE", "role")
	}
	if st&sResetAll != 0 {
		add("RESET ALL", "settings")
	} else if st&sSettings != 0 {
		for _, n := range t.settings {
			add("RESET "+n, "setting "+n)
		}
	}
	if st&sListen != 0 {
		add("UNLISTEN *", "listen")
	}
	if st&sAdvisory != 0 {
		add("SELECT pg_advisory_unlock_all()", "advisory locks")
	}
	if st&sTemp != 0 {
		add("DISCARD TEMP", "temporary tables")
	}
	if st&sSequences != 0 {
		add("DISCARD SEQUENCES", "sequences")
	}
	if st&sPrepared != 0 {
		for _, n := range t.prepared {
			add("DEALLOCATE "+quoteIdent(n), "prepared statement")
		}
	}
	if b.Len() > 0 {
		t.plan = append(t.plan, b.String())
	}
	if len(t.plan) == 0 {
		return pool.ReleasePlan{}
	}
	return pool.ReleasePlan{Statements: t.plan, Reason: strings.Join(why, ", ")}
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// fastWords are first words of statements that change no session state unless they call one
// of the functions in hotWords or create temporary objects (SELECT … INTO TEMP).
var fastWords = [...]string{"select", "insert", "update", "delete", "with", "values", "table", "merge", "copy", "explain", "show", "fetch", "move", "execute", "notify", "lock", "truncate", "vacuum", "analyze"}

// hotWords, when found anywhere in a statement, make the tracker read it fully.
var hotWords = [...]string{"advisory", "set_config", "temp", "nextval", "setval", ";"}

// Statement follows one statement (or several, ';'-separated, as the simple protocol allows).
func (t *tracker) Statement(query string) {
	t.prev = t.st
	if fastPath(query) {
		return
	}
	stmts, bad := statements(query)
	if bad {
		t.st |= everything
	}
	for _, s := range stmts {
		t.statement(s)
	}
}

// fastPath reports a single statement whose first word is in fastWords and that names none of
// hotWords: nothing to record. It does not allocate.
func fastPath(q string) bool {
	i := 0
	for i < len(q) && (q[i] == ' ' || q[i] == '\t' || q[i] == '\n' || q[i] == '\r' || q[i] == '(') {
		i++
	}
	j := i
	for j < len(q) && isIdentChar(q[j]) {
		j++
	}
	w := q[i:j]
	ok := false
	for _, f := range fastWords {
		if strings.EqualFold(w, f) {
			ok = true
			break
		}
	}
	if !ok {
		return false
	}
	for _, h := range hotWords {
		if containsFold(q, h) {
			return false
		}
	}
	return true
}

// containsFold is a case-insensitive strings.Contains for an ASCII lower-case needle.
func containsFold(s, needle string) bool {
	n := len(needle)
outer:
	for i := 0; i+n <= len(s); i++ {
		for k := 0; k < n; k++ {
			c := s[i+k]
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != needle[k] {
				continue outer
			}
		}
		return true
	}
	return false
}

func word(ts []token, i int) string {
	if i < len(ts) && ts[i].kind == tWord {
		return ts[i].text
	}
	return ""
}

func hasWords(ts []token, words ...string) bool {
	for i := 0; i+len(words) <= len(ts); i++ {
		match := true
		for k, w := range words {
			if word(ts, i+k) != w {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

func (t *tracker) statement(ts []token) {
	switch word(ts, 0) {
	case "begin", "start":
		t.st |= sTx
		t.readOnly = hasWords(ts, "read", "only")
	case "commit", "end", "rollback", "abort":
		switch {
		case word(ts, 1) == "prepared":
		case word(ts, 0) == "rollback" && (word(ts, 1) == "to" || hasWords(ts, "to", "savepoint")):
		case hasWords(ts, "and", "chain") && !hasWords(ts, "and", "no", "chain"):
		default:
			t.endTx()
		}
	case "prepare":
		if word(ts, 1) == "transaction" {
			t.endTx()
			return
		}
		t.prepare(ts)
	case "deallocate":
		t.deallocate(ts)
	case "set":
		t.set(ts)
	case "listen":
		t.st |= sListen
	case "unlisten":
		if len(ts) > 1 && ts[1].kind == tPunct && ts[1].text == "*" {
			t.clear(sListen)
		}
	case "declare":
		if hasWords(ts, "with", "hold") {
			t.st |= sCursors
		}
	case "close":
		if word(ts, 1) == "all" {
			t.clear(sCursors)
		}
	case "create":
		// CREATE [OR REPLACE] [GLOBAL | LOCAL] {TEMP | TEMPORARY} …
		for i := 1; i < len(ts) && i < 5; i++ {
			if w := word(ts, i); w == "temp" || w == "temporary" {
				t.st |= sTemp
			}
		}
	case "discard":
		switch word(ts, 1) {
		case "all":
			// The driver's own prepared statements (pgx's statement cache, the pool's cache)
			// are gone with the rest, and the driver still names them: the next borrower's
			// statement would fail with 26000, so the connection is closed at release.
			t.dropsDriverStatements("DISCARD ALL")
			return
		case "temp", "temporary":
			t.clear(sTemp)
		case "sequences":
			t.clear(sSequences)
		}
	case "load":
		t.st |= sDiscard
		t.reason = "LOAD of a shared library"
	case "do", "call":
		t.st |= everything
	}
	t.scanCalls(ts)
}

// scanCalls looks at every function call and at SELECT … INTO TEMP.
func (t *tracker) scanCalls(ts []token) {
	for i := 0; i < len(ts); i++ {
		w := word(ts, i)
		if w == "" {
			continue
		}
		if (w == "temp" || w == "temporary" || w == "pg_temp") && i > 0 {
			if p := word(ts, i-1); p == "into" || w == "pg_temp" {
				t.st |= sTemp
			}
		}
		if i+1 >= len(ts) || ts[i+1].kind != tPunct || ts[i+1].text != "(" {
			continue
		}
		switch w {
		case "pg_advisory_lock", "pg_advisory_lock_shared", "pg_try_advisory_lock", "pg_try_advisory_lock_shared":
			t.st |= sAdvisory
		case "nextval", "setval":
			t.st |= sSequences
		case "set_config":
			t.setConfig(ts[i+2:])
		}
	}
}

// clear marks state bits undone by a statement that ran outside a transaction. Inside one the
// bits stay: the transaction may yet roll back what the statement undid (DROP of temporary
// tables, UNLISTEN), or the statement may fail and abort it; release then undoes it again, which
// costs nothing extra.
func (t *tracker) clear(bits uint32) {
	if !t.inTx() {
		t.st &^= bits
	}
}

// setConfig follows set_config(name, value, is_local) from its argument tokens.
func (t *tracker) setConfig(args []token) {
	// Split the top-level arguments.
	var parts [][]token
	depth, start := 0, 0
	for i, a := range args {
		if a.kind != tPunct {
			continue
		}
		switch a.text {
		case "(":
			depth++
		case ")":
			if depth == 0 {
				parts = append(parts, args[start:i])
				goto done
			}
			depth--
		case ",":
			if depth == 0 {
				parts = append(parts, args[start:i])
				start = i + 1
			}
		}
	}
	t.st |= sResetAll | sRole
	return
done:
	if len(parts) != 3 {
		t.st |= sResetAll | sRole
		return
	}
	local := parts[2]
	if len(local) == 1 && (local[0].kind == tWord && local[0].text == "true" || local[0].kind == tString && isTrue(local[0].text)) {
		return // transaction-local: gone with the transaction
	}
	name := parts[0]
	if len(name) == 1 && name[0].kind == tString {
		t.setting(lower(name[0].text))
		return
	}
	t.st |= sResetAll | sRole
}

func isTrue(s string) bool {
	switch strings.ToLower(s) {
	case "t", "true", "on", "yes", "y", "1":
		return true
	}
	return false
}

// setting records that setting n (lower-case) changed for the session.
func (t *tracker) setting(n string) {
	switch n {
	case "role":
		t.st |= sRole
		return
	case "session_authorization":
		t.st |= sAuth
		return
	case "transaction_isolation", "transaction_read_only", "transaction_deferrable":
		return // this transaction only
	case "default_transaction_read_only":
		t.roSess = true
	}
	if !validSettingName(n) {
		t.st |= sResetAll
		return
	}
	for _, s := range t.settings {
		if s == n {
			return
		}
	}
	t.settings = append(t.settings, n)
	t.st |= sSettings
}

func validSettingName(n string) bool {
	if n == "" || n == "all" {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return false
		}
	}
	return n[0] != '.' && n[len(n)-1] != '.'
}

// set follows SET.
func (t *tracker) set(ts []token) {
	i := 1
	switch word(ts, i) {
	case "local":
		return
	case "session":
		if word(ts, i+1) != "authorization" && word(ts, i+1) != "characteristics" {
			i++
		}
	}
	switch word(ts, i) {
	case "role":
		t.st |= sRole
		return
	case "session":
		if word(ts, i+1) == "authorization" {
			t.st |= sAuth
			return
		}
		if word(ts, i+1) == "characteristics" {
			t.setting("default_transaction_isolation")
			t.setting("default_transaction_deferrable")
			t.setting("default_transaction_read_only")
			if !hasWords(ts, "read", "only") {
				t.roSess = false
			}
			return
		}
	case "characteristics":
		t.setting("default_transaction_isolation")
		t.setting("default_transaction_deferrable")
		t.setting("default_transaction_read_only")
		return
	case "transaction":
		if hasWords(ts, "read", "only") {
			t.readOnly = true
		}
		return
	case "constraints":
		return
	case "time":
		if word(ts, i+1) == "zone" {
			t.setting("timezone")
			return
		}
	case "names":
		t.setting("client_encoding")
		return
	case "schema":
		t.setting("search_path")
		return
	case "xml":
		t.setting("xmloption")
		return
	}
	// SET name {TO | =} …, where name may be dotted (a custom setting).
	var name strings.Builder
	for j := i; j < len(ts); j++ {
		tk := ts[j]
		if tk.kind == tWord && tk.text == "to" || tk.kind == tPunct && tk.text == "=" {
			break
		}
		switch {
		case tk.kind == tWord || tk.kind == tQIdent:
			name.WriteString(lower(tk.text))
		case tk.kind == tPunct && tk.text == ".":
			name.WriteString(".")
		default:
			t.st |= sResetAll | sRole
			return
		}
	}
	n := name.String()
	if n == "default_transaction_read_only" && !hasWords(ts, "on") && !hasWords(ts, "true") && !containsTrueString(ts) {
		t.setting(n)
		t.roSess = false
		return
	}
	t.setting(n)
}

func containsTrueString(ts []token) bool {
	for _, tk := range ts {
		if tk.kind == tString && isTrue(tk.text) {
			return true
		}
	}
	return false
}

// prepare follows PREPARE name [(types)] AS ….
func (t *tracker) prepare(ts []token) {
	if len(ts) < 2 || ts[1].kind != tWord && ts[1].kind != tQIdent {
		t.st |= sDiscard
		t.reason = "a PREPARE the pool could not read"
		return
	}
	n := ts[1].text
	for _, p := range t.prepared {
		if p == n {
			return
		}
	}
	t.prepared = append(t.prepared, n)
	t.st |= sPrepared
}

// dropsDriverStatements follows a statement that deallocates every prepared statement of the
// session, the driver's protocol-level ones included (pgx's stdlib caches them by name, the
// pool's statement cache holds them): nothing but a new connection makes the driver's view
// right again, so the connection is closed at release.
func (t *tracker) dropsDriverStatements(what string) {
	t.st |= sDiscard
	t.reason = what + " dropped the driver's prepared statements"
}

// deallocate follows DEALLOCATE [PREPARE] {name | ALL}.
func (t *tracker) deallocate(ts []token) {
	i := 1
	if word(ts, i) == "prepare" {
		i++
	}
	if i >= len(ts) {
		return
	}
	if ts[i].kind == tWord && ts[i].text == "all" {
		t.dropsDriverStatements("DEALLOCATE ALL")
		return
	}
	if t.inTx() {
		return // a DEALLOCATE that fails aborts the transaction; keep the name until it ends
	}
	n := ts[i].text
	for k, p := range t.prepared {
		if p == n {
			t.prepared = append(t.prepared[:k], t.prepared[k+1:]...)
			break
		}
	}
	if len(t.prepared) == 0 {
		t.st &^= sPrepared
	}
}
