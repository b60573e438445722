package txstate

import (
	"database/sql/driver"
	"strconv"
	"strings"
)

// The deferred LAST_INSERT_ID() reset (SetDeferInsertID). A borrow whose only session effect is
// an AUTO_INCREMENT id it generated leaves LAST_INSERT_ID() (also @@identity and
// @@last_insert_id) at that id. Eagerly, the release plan resets it with SET last_insert_id=0:
// one more round trip on every such cycle. Deferred, release sends nothing for it; the value
// is marked stale, and BeforeStatement answers the reset just before the first statement of a
// later borrow that could observe it.
//
// What the Tracker cannot tell apart is a stale value from one the current borrow produced: an
// Exec's last insert id is the id the INSERT generated (LAST_INSERT_ID() is then that id) or,
// for an INSERT that gave the AUTO_INCREMENT column a value, that value (LAST_INSERT_ID() is
// then unchanged). So while the value is stale, the ids the borrow's INSERTs reported are kept
// as candidates, and the reset keeps the value when it is one of them:
//
//	SET last_insert_id=IF(LAST_INSERT_ID() IN (41,42),LAST_INSERT_ID(),0)
//
// (a stale value equal to an id the borrower itself just wrote tells it nothing).

// maxIDCands bounds the candidates; an INSERT that would add one more gets the reset before it.
const maxIDCands = 8

// lastID is a Tracker's deferred-reset state.
type lastID struct {
	want  bool // SetDeferInsertID(true)
	lazy  bool // want, and the baseline's sql_auto_is_null is known to be off
	stale bool // LAST_INSERT_ID() may hold a value an earlier borrow left
	// borrow: this borrow may have changed LAST_INSERT_ID() (lazy's dLastID).
	borrow bool
	// insert: the last Statement may have inserted (for InsertID's candidates).
	insert bool
	n      int
	cands  [maxIDCands]int64
	// cur is LAST_INSERT_ID() as far as the tracker knows it (curOK); sv is the stale value
	// (svOK), cur at the end of the borrow that left it. An INSERT whose explicit value could be
	// sv gets the reset before it (explicitIDs).
	cur, sv     int64
	curOK, svOK bool
	// prevCur is cur before an INSERT (prevOK), for InsertID to tell what the INSERT did.
	prevCur int64
	prevOK  bool
	// q and args are the statement BeforeStatement saw last, for InsertID.
	q    string
	args []driver.NamedValue
	// learned are INSERT texts (up to VALUES) with the positions of their values that go into
	// a column other than the AUTO_INCREMENT one, learned from ids the server generated: a value
	// there that equals the stale id needs no reset. DDL and temporary tables forget them.
	learned [4]learnedInsert
	nl      int
}

// learnedInsert is one INSERT text's value positions known not to be AUTO_INCREMENT, under
// the Tracker's generation gen (a USE changes it).
type learnedInsert struct {
	prefix string
	gen    uint32
	notAI  uint64
}

// exempt returns the positions learned for the INSERT text prefix.
func (l *lastID) exempt(prefix string, gen uint32) uint64 {
	for i := range l.learned {
		if e := &l.learned[i]; e.gen == gen && e.prefix == prefix && prefix != "" {
			return e.notAI
		}
	}
	return 0
}

// learn records positions of the INSERT text prefix as not AUTO_INCREMENT.
func (l *lastID) learn(prefix string, gen uint32, notAI uint64) {
	for i := range l.learned {
		if e := &l.learned[i]; e.gen == gen && e.prefix == prefix {
			e.notAI |= notAI
			return
		}
	}
	l.learned[l.nl] = learnedInsert{prefix: prefix, gen: gen, notAI: notAI}
	l.nl = (l.nl + 1) % len(l.learned)
}

// SetDeferInsertID turns the deferred LAST_INSERT_ID() reset on or off (off: the zero value,
// the release plan resets it). On, a borrow whose only effect is a generated AUTO_INCREMENT id
// releases clean (Clean, no statement), and the caller must ask BeforeStatement before every
// statement of later borrows, call BeforeDone after running what it returned, and call
// EndBorrow at every release. It takes effect only with a baseline whose sql_auto_is_null is
// known to be off: with it on, SELECT … WHERE id IS NULL reads the last generated id without
// naming it, so the reset stays at release.
func (t *Tracker) SetDeferInsertID(on bool) {
	t.id.want = on
	t.id.fresh(t)
}

// fresh sets the mode from the baseline and marks LAST_INSERT_ID() as at connect.
func (l *lastID) fresh(t *Tracker) {
	want := l.want
	*l = lastID{want: want, curOK: true, svOK: true}
	if !want || !t.hasBase || t.base.Variables.known&(1<<vSQLAutoIsNull) == 0 {
		return
	}
	switch v := t.base.Variables.vals[vSQLAutoIsNull]; {
	case v == "0", strings.EqualFold(v, "OFF"):
		l.lazy = true
	}
}

// setLastID records a statement that may change LAST_INSERT_ID().
func (t *Tracker) setLastID() {
	if t.id.lazy {
		t.id.borrow = true
		return
	}
	t.st.dirty |= dLastID
}

// lastIDChanged reports whether this borrow may have changed LAST_INSERT_ID().
func (t *Tracker) lastIDChanged() bool {
	if t.id.lazy {
		return t.id.borrow
	}
	return t.st.dirty&dLastID != 0
}

// reported records a non-zero last insert id an Exec reported.
func (l *lastID) reported(id int64) {
	if !l.lazy || !l.stale || !l.insert || l.n == maxIDCands {
		return
	}
	for _, c := range l.cands[:l.n] {
		if c == id {
			return
		}
	}
	l.cands[l.n] = id
	l.n++
}

// EndBorrow marks the end of a borrow, at release before Clean: with the deferred reset on, a
// LAST_INSERT_ID() the borrow may have changed becomes stale for the next one. It does nothing
// otherwise, and nothing twice.
func (t *Tracker) EndBorrow() {
	l := &t.id
	if l.borrow {
		l.stale, l.borrow = true, false
		l.sv, l.svOK = l.cur, l.curOK
	}
	l.n = 0
	l.insert = false
	l.q, l.args = "", nil
}

// lastIDInSet returns dLastID when the release plan's one SET will be sent anyway (session or
// user variables) and may as well reset a deferred LAST_INSERT_ID(): no round trip more.
func (t *Tracker) lastIDInSet() uint32 {
	if t.id.lazy && (t.id.stale || t.id.borrow) && t.st.dirty&(dVars|dUserVars) != 0 {
		return dLastID
	}
	return 0
}

// doneLastID is Done's part: the plan just run reset LAST_INSERT_ID() if its SET did.
func (t *Tracker) doneLastID() {
	if !t.id.lazy {
		return
	}
	set := t.lastIDInSet() != 0
	t.EndBorrow()
	if set {
		t.id.stale = false
		t.id.cur, t.id.curOK = 0, true
	}
}

// BeforeStatement returns a statement to run on its own just before query (and "" nearly
// always): with the deferred reset on and LAST_INSERT_ID() stale, the reset, when query could
// observe it — its text names LAST_INSERT_ID, @@identity, @@last_insert_id, a table or SHOW of
// variables (information_schema.SESSION_VARIABLES, SHOW … VARIABLES) or sql_auto_is_null; it is
// a CALL, SQL-level PREPARE/EXECUTE, multi-statement text or text the classifier cannot read;
// or query is "" (a use of the connection the caller cannot see, such as sql.Conn.Raw) — and
// before an INSERT whose last insert id will not be reported (result false: a Query, not an
// Exec). Stored functions, triggers and views that read LAST_INSERT_ID() without the
// statement naming it are not seen (docs/sessions.md). It does not allocate when it returns ""
// or the plain reset.
func (t *Tracker) BeforeStatement(query string, args []driver.NamedValue, result bool) string {
	if !t.id.lazy {
		return ""
	}
	t.id.q, t.id.args = query, args
	if !t.id.stale {
		return ""
	}
	return t.beforeStale(query, args, result)
}

// BeforeDone records that the statement BeforeStatement returned ran successfully.
func (t *Tracker) BeforeDone() {
	l := &t.id
	if l.curOK && l.n > 0 && !l.isCand(l.cur) || l.n == 0 {
		l.cur, l.curOK = 0, true
	} else if !l.curOK {
		l.cur = 0 // one of the candidates or 0
	}
	l.stale = false
	l.n = 0
}

// isCand reports whether id is one of the candidates.
func (l *lastID) isCand(id int64) bool {
	for _, c := range l.cands[:l.n] {
		if c == id {
			return true
		}
	}
	return false
}

// statementID is Statement's part: what the statement in may do to LAST_INSERT_ID() as far as
// the tracker knows it. An INSERT leaves it to InsertID; LAST_INSERT_ID(expr) makes it unknown.
func (l *lastID) statementID(in *info, query string) {
	if !l.lazy {
		return
	}
	l.prevCur, l.prevOK = l.cur, l.curOK
	if in.insert || hasLastInsertIDArg(query) {
		l.curOK = false // until InsertID says
	}
	switch in.class {
	case ClassCreateTemp, ClassDropTemp, ClassDDL:
		// A temporary table may now shadow a table under the same name (or stop shadowing
		// it), or a table's columns changed: what was learned of INSERT texts no longer holds.
		l.learned, l.nl = [len(l.learned)]learnedInsert{}, 0
	}
}

// insertID is InsertID's part: id, non-zero, is what the last INSERT reported. It was generated
// (LAST_INSERT_ID() is now id) when no explicit value of the INSERT could be id; otherwise
// LAST_INSERT_ID() is id or what it was before.
func (l *lastID) insertID(id int64, quoting Quoting, gen uint32) {
	if !l.lazy || !l.insert {
		return
	}
	if start, ok := valuesStart(l.q, quoting); ok {
		prefix := l.q[:start]
		ex := l.exempt(prefix, gen)
		if may, rows, ok := scanValues(l.q, start, l.args, quoting, id, false); ok && may&^ex == 0 {
			l.cur, l.curOK = id, true // generated
			if rows == 1 {
				// One row, and the server generated its id: no value of it went into the
				// AUTO_INCREMENT column (an explicit one would have been the id).
				if pos, _, _ := scanValues(l.q, start, l.args, quoting, 0, true); pos&^(1<<63)&^ex != 0 {
					l.learn(prefix, gen, pos&^(1<<63))
				}
			}
			return
		}
	}
	if l.prevOK && l.prevCur == id {
		l.cur, l.curOK = id, true
	}
}

// insertMayBeStale reports whether an explicit value of the INSERT query could be the stale id
// (or any id, when that is unknown), or the INSERT is not a plain INSERT … VALUES.
func (t *Tracker) insertMayBeStale(query string, args []driver.NamedValue) bool {
	start, ok := valuesStart(query, t.st.quoting)
	if !ok {
		return true
	}
	may, _, ok := scanValues(query, start, args, t.st.quoting, t.id.sv, !t.id.svOK)
	return !ok || may&^t.id.exempt(query[:start], t.gen) != 0
}

// lastIDReset is the reset when the borrow reported no candidate.
const lastIDReset = "SET last_insert_id=0"

func (t *Tracker) beforeStale(query string, args []driver.NamedValue, result bool) string {
	if query == "" || observesLastID(query) {
		return t.lastIDResetSQL()
	}
	var in info
	analyze(&in, query, t.st.quoting)
	switch in.class {
	case ClassUnknown, ClassCall, ClassPrepared, ClassMulti:
		return t.lastIDResetSQL()
	}
	// An INSERT whose explicit value could be the stale id would report it as its own, and the
	// reset would keep it (the server holds that value either way): reset before it.
	if in.insert && (!result || t.id.n == maxIDCands || t.insertMayBeStale(query, args)) {
		return t.lastIDResetSQL()
	}
	return ""
}

// lastIDResetSQL is the reset that keeps a value the borrow's own INSERTs reported.
func (t *Tracker) lastIDResetSQL() string {
	if t.id.n == 0 {
		return lastIDReset
	}
	var b strings.Builder
	b.WriteString("SET last_insert_id=IF(LAST_INSERT_ID() IN (")
	for i, c := range t.id.cands[:t.id.n] {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(uint64(c), 10))
	}
	b.WriteString("),LAST_INSERT_ID(),0)")
	return b.String()
}

// LastInsertIDStale reports whether LAST_INSERT_ID() may hold a value an earlier borrow left,
// to be reset before a statement that could observe it (SetDeferInsertID).
func (t *Tracker) LastInsertIDStale() bool {
	return t.id.stale
}

// observesLastID reports whether s names, in any case, last_insert_id, identity, variables or
// auto_is_null: a statement that may read LAST_INSERT_ID() (also through @@identity,
// @@last_insert_id, SHOW VARIABLES, information_schema.SESSION_VARIABLES or
// performance_schema's variables tables) or turn on sql_auto_is_null, which makes
// WHERE id IS NULL read it. A literal or comment that mentions one errs toward a reset.
func observesLastID(s string) bool {
	// Each word is found from a byte of it that SQL text rarely holds, with strings.IndexByte:
	// the '_' of last_insert_id and auto_is_null (the fifth byte of both), the 'y' of identity
	// (its last), the 'b' of variables (its sixth).
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '_')
		if j < 0 {
			break
		}
		p := i + j - 4 // where the word would start
		i += j + 1
		if p >= 0 && (p+14 <= len(s) && eqFold(s[p:p+14], "last_insert_id") || p+12 <= len(s) && eqFold(s[p:p+12], "auto_is_null")) {
			return true
		}
	}
	return hasWordAt(s, 'y', 7, "identity") || hasWordAt(s, 'Y', 7, "identity") ||
		hasWordAt(s, 'b', 5, "variables") || hasWordAt(s, 'B', 5, "variables")
}

// hasWordAt reports whether s holds the lower-case word w, in any case, with its byte at
// offset off being c (as found by strings.IndexByte).
func hasWordAt(s string, c byte, off int, w string) bool {
	for i := 0; ; {
		j := strings.IndexByte(s[i:], c)
		if j < 0 {
			return false
		}
		p := i + j - off
		i += j + 1
		if p >= 0 && p+len(w) <= len(s) && eqFold(s[p:p+len(w)], w) {
			return true
		}
	}
}
