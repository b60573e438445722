package pgdialect

import (
	"database/sql/driver"
	"strings"
	"syscall"

	"github.com/sqlpool/sqlpool/pool"
)

// Session state bits.
const (
	sTx          uint32 = 1 << iota // a transaction may be open (from statements and database/sql)
	sSettings                       // named settings to RESET (tracker.settings)
	sResetAll                       // settings changed that cannot be named: RESET ALL
	sRole                           // SET ROLE
	sAuth                           // SET SESSION AUTHORIZATION
	sListen                         // LISTEN
	sAdvisory                       // session advisory locks
	sTemp                           // temporary objects may exist: check for the temporary schema
	sCursors                        // WITH HOLD cursors
	sPrepared                       // SQL PREPARE (tracker.prepared)
	sSequences                      // currval/lastval state (nextval, setval)
	sDiscard                        // a change no statement undoes (LOAD): close the connection
	sTxChar                         // transaction_isolation/_read_only/_deferrable set for the session
	sCustom                         // a custom setting (tracker.custom) exists that a new connection lacks
	sCheckCustom                    // a custom setting may have been created unseen: check the known names
	sNames                          // names may resolve differently (search_path, role, temporary objects)
	sTempMade                       // a temporary object was created: the backend has a temporary schema
)

// everything is the full targeted reset for a session state the tracker could not follow
// (sql.Conn.Raw, DO, CALL, a function it does not know): all of DISCARD ALL but DEALLOCATE ALL,
// so that the driver's protocol-level prepared statements (pgx's statement cache, the pool's)
// survive, with the transaction characteristics RESET ALL leaves, the invalidation of pgx's
// cached statements, and the check for custom settings.
const everything = sResetAll | sRole | sAuth | sListen | sAdvisory | sTemp | sCursors | sSequences | sTxChar | sNames | sCheckCustom

// namesBits are the states under which a statement may resolve names otherwise than on a new
// connection.
const namesBits = sNames | sTemp | sRole | sAuth | sResetAll

// maxUsed bounds tracker.used.
const maxUsed = 64

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
	// custom names the custom setting behind sCustom.
	custom string
	// pgx reaches pgx's statement caches (ok false for lib/pq).
	pgx   pgxCaches
	pgxOK bool
	// used holds the texts the borrower ran while names resolved as at the start of the borrow
	// (up to maxUsed; usedOver past that), for pgx: statements cached before the borrow and not
	// used in it are invalidated when names change (see namesChanged).
	used     []string
	usedOver bool
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

func (t *tracker) Unknown() {
	before := t.st
	t.st |= everything | sTx
	t.namesChanged(before)
}

func (t *tracker) Result(driver.Result) {}

func (t *tracker) ReadOnlyTx() bool { return t.readOnly || t.roSess }

func (t *tracker) inTx() bool {
	if t.txStatus != nil {
		return t.txStatus() != 'I'
	}
	return t.st&sTx != 0
}

// Clean reports a session as at connect; it is asked at every return, so it also ends the
// borrow's record of the statements it ran.
func (t *tracker) Clean() bool {
	if t.st&^sTx == 0 && !t.inTx() {
		t.used, t.usedOver = t.used[:0], false
		return true
	}
	return false
}

// Scope is known while nothing changed how names resolve: search_path, whose default "$user"
// follows the role, temporary objects, and any setting. In a failed transaction ('E') it is
// unknown, so that a prepare goes to the server and fails there (25P02) as it would on a new
// connection.
func (t *tracker) Scope() (string, bool) {
	if t.txStatus != nil && t.txStatus() == 'E' {
		return "", false
	}
	return "", t.st&(sSettings|sResetAll|sRole|sAuth|sDiscard|sNames|sTemp|sCustom) == 0
}

// BeforeClose frees the session's advisory locks before a connection closed at release (a
// custom setting, LOAD, DISCARD ALL): the server frees a closed session's locks only when its
// backend exits, after the close, and the next borrower must not find them held.
func (t *tracker) BeforeClose() []string {
	if t.st&sAdvisory != 0 {
		return []string{"ROLLBACK", "SELECT pg_advisory_unlock_all()"}
	}
	return nil
}

func (t *tracker) Done() {
	t.st, t.prev = 0, 0
	t.readOnly, t.roSess = false, false
	t.settings = t.settings[:0]
	t.prepared = t.prepared[:0]
	t.reason, t.custom = "", ""
	t.used, t.usedOver = t.used[:0], false
}

// Plan returns ROLLBACK (when a transaction is open, or in the failed state) as a statement of
// its own, then the resets joined into one simple-protocol string (one round trip).
func (t *tracker) Plan() pool.ReleasePlan {
	if t.st&sDiscard != 0 {
		return pool.ReleasePlan{Discard: true, Reason: t.reason}
	}
	if t.st&sCustom != 0 {
		return pool.ReleasePlan{Discard: true, Reason: "custom setting " + t.custom + " exists: PostgreSQL removes a custom setting only with its session"}
	}
	if t.st&sTempMade != 0 {
		return pool.ReleasePlan{Discard: true, Reason: "temporary objects: PostgreSQL keeps the session's temporary schema, which a new connection lacks, until the session ends"}
	}
	if t.st&namesBits != 0 && t.pgxOK {
		// pgx's statements prepared under this borrower's names must not reach the next
		// borrower: pgx deallocates them before its next statement (the plan's).
		t.pgx.invalidateAll()
		if !t.pgx.unprepare(nil) {
			return pool.ReleasePlan{Discard: true, Reason: "statements prepared by pgx's stdlib under other names cannot be unprepared"}
		}
		if err := t.pgx.flush(); err != nil {
			return pool.ReleasePlan{Discard: true, Reason: "deallocating pgx's statements prepared under other names failed: " + err.Error()}
		}
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
	if st&sSequences != 0 {
		add("DISCARD SEQUENCES", "sequences")
	}
	if st&sTxChar != 0 {
		// RESET ALL leaves these; outside a transaction PostgreSQL warns and resets them.
		add("RESET transaction_isolation; RESET transaction_read_only; RESET transaction_deferrable", "transaction characteristics")
	}
	if st&sPrepared != 0 {
		for _, n := range t.prepared {
			add("DEALLOCATE "+quoteIdent(n), "prepared statement")
		}
	}
	if q := sessionCheck(st&sTemp != 0, st&sCheckCustom != 0); q != "" {
		// Last, so that the resets ran: its error closes the connection.
		add(q, "temporary schema and custom settings check")
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
	if t.pgxOK && t.st&namesBits == 0 {
		if len(t.used) < maxUsed {
			t.used = append(t.used, query)
		} else {
			t.usedOver = true
		}
	}
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
	t.namesChanged(t.prev)
}

// namesChanged follows a change of how names resolve (search_path, role, temporary objects, or
// a state the tracker cannot follow) from before, the state at the start of the call: on a new
// connection, a statement the borrower had not run yet would be prepared under the new names,
// so pgx's statements cached by earlier borrowers and not run in this borrow are invalidated
// (pgx prepares them again on their next use). Those the borrower ran stay, as they would on
// a new connection, where PostgreSQL re-plans them.
func (t *tracker) namesChanged(before uint32) {
	if !t.pgxOK || before&namesBits != 0 || t.st&namesBits == 0 {
		return
	}
	keep := t.used
	if t.usedOver {
		keep = nil
	}
	t.pgx.invalidateExcept(keep)
	if !t.pgx.unprepare(keep) {
		t.st |= sDiscard
		t.reason = "statements prepared by pgx's stdlib under other names cannot be unprepared"
		return
	}
	if err := t.pgx.flush(); err != nil {
		t.st |= sDiscard
		t.reason = "deallocating pgx's statements prepared under other names failed: " + err.Error()
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
	return !mayCallUnknown(q)
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
	if i >= 0 && i < len(ts) && ts[i].kind == tWord {
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
	case "reset":
		// RESET of a custom setting the session lacks creates it (as '').
		if n := dottedName(ts[1:]); n != "" {
			t.customSet(n)
		}
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
		// CREATE [OR REPLACE] [GLOBAL | LOCAL] {TEMP | TEMPORARY} …, or an object in pg_temp.
		for i := 1; i < len(ts) && i < 5; i++ {
			if w := word(ts, i); w == "temp" || w == "temporary" || w == "pg_temp" {
				t.st |= sTemp | sTempMade
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
	case "do":
		t.st |= everything
		// The body's set_config and SET of custom settings are seen; EXECUTE and the
		// functions it calls are covered by the check of known custom names.
		for _, tk := range ts[1:] {
			if tk.kind == tString {
				body, _ := statements(tk.text)
				for _, bs := range body {
					for k := range bs {
						// SET at the start of a PL/pgSQL statement (after BEGIN, THEN …).
						if word(bs, k) != "set" || k > 0 && !plStart(word(bs, k-1)) {
							continue
						}
						if word(bs, k+1) == "local" {
							k++
						}
						if n := dottedName(bs[k+1:]); n != "" {
							t.customSet(n)
						}
					}
					t.scanCalls(bs, false)
				}
			}
		}
		return
	case "call":
		t.st |= everything
	}
	t.scanCalls(ts, isFastWord(word(ts, 0)))
}

// isFastWord reports whether w is in fastWords: a statement that calls functions rather than
// defining them.
func isFastWord(w string) bool {
	for _, f := range fastWords {
		if w == f {
			return true
		}
	}
	return false
}

// plStart reports a PL/pgSQL word after which a statement starts.
func plStart(w string) bool {
	switch w {
	case "begin", "then", "else", "loop", "declare":
		return true
	}
	return false
}

// dottedName returns the lower-cased name of a custom setting (one with a dot) at the start
// of ts, up to TO or =, or "" when ts does not start with one.
func dottedName(ts []token) string {
	var b strings.Builder
	dot := false
	for _, tk := range ts {
		switch {
		case tk.kind == tWord && tk.text == "to", tk.kind == tPunct && tk.text == "=":
			goto done
		case tk.kind == tWord || tk.kind == tQIdent:
			b.WriteString(lower(tk.text))
		case tk.kind == tPunct && tk.text == ".":
			b.WriteString(".")
			dot = true
		default:
			return ""
		}
	}
done:
	if !dot {
		return ""
	}
	return b.String()
}

// customSet records that the session now has custom setting n, which only a new connection
// is without.
func (t *tracker) customSet(n string) {
	t.st |= sCustom
	if t.custom == "" {
		t.custom = n
	}
	rememberCustom(n)
}

// scanCalls looks at every function call and at SELECT … INTO TEMP; with unknown, a call of a
// function it does not know (knownCall) is a state it cannot follow.
func (t *tracker) scanCalls(ts []token, unknown bool) {
	for i := 0; i < len(ts); i++ {
		w := word(ts, i)
		if w == "" {
			continue
		}
		if (w == "temp" || w == "temporary") && i > 0 && word(ts, i-1) == "into" {
			t.st |= sTemp | sTempMade // SELECT … INTO TEMP
		}
		if w == "pg_temp" {
			t.st |= sTemp
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
		case "current_setting":
			if i+2 < len(ts) && ts[i+2].kind == tString {
				if n := lower(ts[i+2].text); strings.IndexByte(n, '.') > 0 && validSettingName(n) {
					rememberCustom(n)
				}
			}
		default:
			if unknown && !knownCall(ts, i) {
				// A function the tracker does not know may change any session state.
				t.st |= everything
			}
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
	t.st |= everything
	return
done:
	if len(parts) != 3 {
		t.st |= everything
		return
	}
	name := parts[0]
	if len(name) != 1 || name[0].kind != tString {
		t.st |= everything
		return
	}
	n := lower(name[0].text)
	local := parts[2]
	if len(local) == 1 && (local[0].kind == tWord && local[0].text == "true" || local[0].kind == tString && isTrue(local[0].text)) {
		// Transaction-local: gone with the transaction, but a custom setting stays
		// defined (as ''), and search_path changes names until then.
		t.localSetting(n)
		return
	}
	t.setting(n)
}

// localSetting records SET LOCAL n or set_config(n, …, true).
func (t *tracker) localSetting(n string) {
	switch {
	case strings.IndexByte(n, '.') >= 0:
		t.customSet(n)
	case n == "search_path" || n == "role" || n == "session_authorization":
		t.st |= sNames
	}
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
		// For this transaction, but PostgreSQL keeps them as set by the session (source
		// session in pg_settings), which RESET ALL leaves.
		t.st |= sTxChar
		return
	case "default_transaction_read_only":
		t.roSess = true
	case "search_path":
		t.st |= sNames
	}
	if !validSettingName(n) {
		t.st |= sResetAll | sNames | sCheckCustom
		return
	}
	if strings.IndexByte(n, '.') >= 0 {
		t.customSet(n)
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
		switch {
		case word(ts, 2) == "role", word(ts, 2) == "session" && word(ts, 3) == "authorization":
			t.st |= sNames
		case word(ts, 2) == "schema":
			t.localSetting("search_path")
		default:
			if n := dottedName(ts[2:]); n != "" {
				t.localSetting(n)
			} else {
				t.localSetting(word(ts, 2))
			}
		}
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
		if !t.inTx() {
			// Outside a transaction PostgreSQL warns, and keeps the values as set by the
			// session.
			t.st |= sTxChar
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
			t.st |= everything
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
