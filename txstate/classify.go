package txstate

import "strings"

// Class is what a statement does to the session, as far as a pool releasing
// the connection cares. The zero value is ClassUnknown, the safe answer.
// docs/sessions.md maps every class to its effect and release action.
type Class uint8

const (
	// ClassUnknown is text the classifier does not recognise, or recognises
	// as able to change session state it cannot track (FLUSH, KILL, compound
	// statements, a statement inside '(' that is not a query, ...). The
	// session state is unknown: the connection is discarded at release.
	ClassUnknown Class = iota
	// ClassEmpty is text with nothing but whitespace and plain comments. The
	// server rejects it; it changes nothing.
	ClassEmpty
	// ClassQuery is a statement that changes no session state: SELECT,
	// INSERT, UPDATE, DELETE, REPLACE, SHOW, DESCRIBE, EXPLAIN, DO, VALUES,
	// TABLE, WITH, HELP, LOAD, ANALYZE, CHECK, CHECKSUM, OPTIMIZE, REPAIR and
	// XA RECOVER. With autocommit off it opens a transaction.
	ClassQuery
	// ClassUserLock is a ClassQuery or ClassSetUserVar statement whose text
	// mentions GET_LOCK: it may hold user-level locks, released at release
	// with SELECT RELEASE_ALL_LOCKS(). Other classes record the lock too.
	ClassUserLock
	// ClassBegin is BEGIN [WORK] or START TRANSACTION [characteristics]: a
	// transaction is open until COMMIT or ROLLBACK, statements or not.
	ClassBegin
	// ClassCommit is COMMIT [WORK] [AND NO CHAIN] [NO RELEASE]: it ends the
	// transaction.
	ClassCommit
	// ClassRollback is ROLLBACK [WORK] [AND NO CHAIN] [NO RELEASE]: it ends
	// the transaction.
	ClassRollback
	// ClassChain is COMMIT or ROLLBACK ... AND CHAIN: it ends the transaction
	// and opens a new one at once.
	ClassChain
	// ClassSavepoint is SAVEPOINT, ROLLBACK [WORK] TO [SAVEPOINT] or RELEASE
	// SAVEPOINT: the transaction stays as it was.
	ClassSavepoint
	// ClassXAStart is XA START or XA BEGIN: an XA transaction is open.
	ClassXAStart
	// ClassXAPrepare is XA END or XA PREPARE: the XA transaction stays open
	// (a plain ROLLBACK can no longer end it).
	ClassXAPrepare
	// ClassXAFinish is XA COMMIT or XA ROLLBACK: it ends the XA transaction
	// it names.
	ClassXAFinish
	// ClassSetUserVar is a SET of user variables only (SET @a = ...). The
	// Tracker resets every user variable a statement of any class assigns
	// (SET @a = NULL, in the release plan's one SET).
	ClassSetUserVar
	// ClassSetAutocommit is a SET whose assignments include autocommit (and
	// maybe user variables or the transaction variables of
	// ClassSetTransaction): autocommit is reset at release.
	ClassSetAutocommit
	// ClassSetTransaction is SET [SESSION] TRANSACTION ... or a SET of
	// transaction_isolation, tx_isolation, transaction_read_only or
	// tx_read_only in session or next-transaction scope: isolation and access
	// mode are reset at release.
	ClassSetTransaction
	// ClassSetOther is any other SET: a session variable the baseline does
	// not record (foreign_key_checks, ...), a GLOBAL or PERSIST scope, ROLE,
	// PASSWORD, .... The connection is discarded at release.
	ClassSetOther
	// ClassUse is USE db: the baseline database is selected again at
	// release, or the connection is discarded if none was selected at
	// connect.
	ClassUse
	// ClassLockTables is LOCK TABLE[S]: it commits any open transaction and
	// holds table locks, released with UNLOCK TABLES.
	ClassLockTables
	// ClassUnlockTables is UNLOCK TABLE[S]: it releases table locks and, if
	// any were held, commits the open transaction.
	ClassUnlockTables
	// ClassCreateTemp is CREATE [OR REPLACE] TEMPORARY TABLE: the table is
	// dropped at release with DROP TEMPORARY TABLE IF EXISTS.
	ClassCreateTemp
	// ClassDropTemp is DROP TEMPORARY ...: no implicit commit, no new state.
	ClassDropTemp
	// ClassDDL is a statement that commits implicitly: CREATE, ALTER, DROP,
	// RENAME, TRUNCATE (not of TEMPORARY tables), GRANT, REVOKE.
	ClassDDL
	// ClassCall is CALL: a stored procedure can change any session state.
	ClassCall
	// ClassPrepared is SQL-level PREPARE, EXECUTE [IMMEDIATE], DEALLOCATE
	// PREPARE or DROP PREPARE: it runs unseen text or leaves a named
	// statement in the session.
	ClassPrepared
	// ClassHandler is HANDLER: it leaves open table handlers in the session.
	ClassHandler
	// ClassMulti is text with more than one statement.
	ClassMulti
	// ClassSetVariable is a SET whose assignments include a session
	// variable of RestoredVariables — time_zone, sql_mode, the character
	// sets and collation (also SET NAMES and SET CHARACTER SET), the
	// statement timeout, wait_timeout, interactive_timeout — and maybe user
	// variables, but not autocommit or the transaction variables (those make
	// it ClassSetAutocommit or ClassSetTransaction, which restore these
	// variables all the same). The variables are restored to the baseline at
	// release, with one SET; nothing is needed when each was set to its
	// baseline value, written as a plain literal.
	ClassSetVariable

	numClasses
)

var classNames = [numClasses]string{
	ClassUnknown:        "unknown",
	ClassEmpty:          "empty",
	ClassQuery:          "query",
	ClassUserLock:       "user-lock",
	ClassBegin:          "begin",
	ClassCommit:         "commit",
	ClassRollback:       "rollback",
	ClassChain:          "chain",
	ClassSavepoint:      "savepoint",
	ClassXAStart:        "xa-start",
	ClassXAPrepare:      "xa-prepare",
	ClassXAFinish:       "xa-finish",
	ClassSetUserVar:     "set-user-var",
	ClassSetAutocommit:  "set-autocommit",
	ClassSetTransaction: "set-transaction",
	ClassSetOther:       "set-other",
	ClassUse:            "use",
	ClassLockTables:     "lock-tables",
	ClassUnlockTables:   "unlock-tables",
	ClassCreateTemp:     "create-temporary",
	ClassDropTemp:       "drop-temporary",
	ClassDDL:            "ddl",
	ClassCall:           "call",
	ClassPrepared:       "prepared",
	ClassHandler:        "handler",
	ClassMulti:          "multi",
	ClassSetVariable:    "set-variable",
}

// String returns the class's name in lower case, such as "set-autocommit".
func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return "Class(" + itoa(int(c)) + ")"
}

// discards reports whether the class alone makes the session state unknown.
func (c Class) discards() bool {
	switch c {
	case ClassUnknown, ClassSetOther, ClassCall, ClassPrepared, ClassHandler, ClassMulti:
		return true
	}
	return false
}

// Classify returns the class of one statement's text. It assumes nothing
// about the session's sql_mode (see Quoting), so it errs toward ClassMulti
// when a backslash makes that ambiguous. It does not allocate.
func Classify(query string) Class {
	var in info
	analyze(&in, query, QuotingUnknown)
	return in.class
}

// tri is a boolean that may be absent or unknown.
type tri uint8

const (
	triNone    tri = iota // not assigned
	triOn                 // 1, ON, TRUE
	triOff                // 0, OFF, FALSE
	triUnknown            // DEFAULT, an expression, a variable, ...
)

// Access modes of a START TRANSACTION.
const (
	txModeSession   int8 = iota // the session's (next-transaction) default
	txModeReadOnly              // READ ONLY
	txModeReadWrite             // READ WRITE
)

// info is what analyze learns about one statement.
type info struct {
	class   Class
	ac      tri             // autocommit assigned
	ro      tri             // transaction_read_only assigned (also by SET TRANSACTION)
	iso     bool            // isolation or access mode assigned
	userVar bool            // a user variable assigned (its expression may read tables)
	lock    bool            // GET_LOCK mentioned
	insert  bool            // INSERT, REPLACE, LOAD or CREATE: may generate an AUTO_INCREMENT id (LAST_INSERT_ID)
	load    bool            // LOAD: its column lists assign user variables
	set     bool            // a SET statement (also SET STATEMENT ... FOR, and when GET_LOCK made it ClassUserLock)
	dropDB  bool            // DROP DATABASE or SCHEMA: the current database may vanish
	rename  bool            // ALTER or RENAME: a temporary table may change its name
	txMode  int8            // START TRANSACTION access mode
	name    string          // USE: the name as written; CREATE TEMPORARY TABLE: the table; XA: the xid
	plain   string          // USE: the database name unescaped, or ""
	qual    bool            // CREATE TEMPORARY TABLE: the name has a database part
	names   bool            // SET NAMES or CHARACTER SET: the client's collation set too (namesColl, or the character set's default)
	nColl   string          // SET NAMES ... COLLATE: the collation as written
	vars    varMask         // restorable session variables assigned
	vals    [numVars]string // their values as written (see literal), "" when unknown
}

// closes reports whether the statement may end a transaction or table locks
// (so a mistaken reading of it could leave them open).
func (in *info) closes() bool {
	switch in.class {
	case ClassCommit, ClassRollback, ClassXAFinish, ClassUnlockTables, ClassDDL, ClassLockTables, ClassUse:
		return true
	}
	return in.ac == triOn // switching autocommit on commits
}

// analyze classifies query under quoting q into in (which must be zero)
// and collects the details the tracker needs.
func analyze(in *info, query string, q Quoting) {
	l := lexer{s: query, bsSingle: q != QuotingNoBackslash, bsDouble: q == QuotingBackslash || q == QuotingUnknown}
	l.skip()
	parens := 0
	for l.i < len(query) && query[l.i] == '(' {
		parens++
		l.i++
		l.skip()
	}
	l.statement(in, 0)
	switch {
	case in.class == ClassEmpty:
		if parens > 0 {
			in.class = ClassUnknown
		}
		return
	case in.class.discards():
		return
	case parens > 0 && in.class != ClassQuery:
		in.class = ClassUnknown
		return
	}
	semi, k := quickScan(query)
	switch {
	case semi && hasSecondStatement(query, q):
		in.class = ClassMulti
		return
	case q == QuotingUnknown && (in.class == ClassSetUserVar || in.class == ClassSetAutocommit || in.class == ClassSetTransaction) &&
		strings.IndexByte(query, '\\') >= 0:
		// Where a quoted value ends depends on NO_BACKSLASH_ESCAPES, and
		// with it which assignments the SET holds.
		in.class = ClassSetOther
		return
	case in.closes() && hasConditional(query):
		// Some servers skip part of the text: a statement that ends state
		// must not be trusted to have ended it.
		in.class = ClassUnknown
		return
	}
	if k && hasGetLock(query) {
		in.lock = true
		if in.class == ClassQuery || in.class == ClassSetUserVar {
			in.class = ClassUserLock
		}
	}
}

// statement classifies the statement at l's position into in. depth counts
// SET STATEMENT ... FOR nesting.
func (l *lexer) statement(in *info, depth int) {
	w, k := l.wordKey()
	switch k {
	case kSelect, kInsert, kUpdate, kDelete, kReplace, kShow, kDescribe, kDesc, kExplain, kDo, kValues,
		kTable, kWith, kHelp, kLoad, kAnalyze, kCheck, kChecksum, kOptimize, kRepair:
		in.class = ClassQuery
		in.insert = k == kInsert || k == kReplace || k == kLoad
		in.load = k == kLoad
	case kSet:
		in.set = true
		l.set(in, depth)
	case kBegin:
		l.begin(in)
	case kStart:
		if l.is("transaction") {
			l.startTransaction(in)
		}
	case kCommit:
		l.commit(in, false)
	case kRollback:
		l.commit(in, true)
	case kRelease:
		if l.is("savepoint") {
			in.class = ClassSavepoint
		}
	case kXa:
		l.xa(in)
	case kUse:
		l.use(in)
	case kLock:
		if l.is("tables") || l.is("table") {
			in.class = ClassLockTables
		}
	case kUnlock:
		if (l.is("tables") || l.is("table")) && l.atEnd() {
			in.class = ClassUnlockTables
		}
	case kCreate:
		in.insert = containsFold(l.s, "select") // CREATE TABLE ... SELECT may generate ids
		l.create(in)
	case kDrop:
		l.drop(in)
	case kAlter, kRename:
		in.class, in.rename = ClassDDL, true
	case kTruncate, kGrant, kRevoke:
		in.class = ClassDDL
	case kCall:
		in.class = ClassCall
	case kPrepare, kExecute:
		in.class = ClassPrepared
	case kHandler:
		in.class = ClassHandler
	case 0:
		switch {
		case w == "":
			if l.i >= len(l.s) || restIsEmpty(l.s, l.i) {
				in.class = ClassEmpty
			}
			// Else ClassUnknown: a quote, an operator, a control byte, ...
		case eqFold(w, "savepoint"):
			in.class = ClassSavepoint
		case eqFold(w, "deallocate"):
			in.class = ClassPrepared
		}
	}
}

// begin parses the rest of BEGIN [WORK]. MariaDB's BEGIN NOT ATOMIC, a
// compound statement, is ClassUnknown.
func (l *lexer) begin(in *info) {
	l.is("work")
	if l.atEnd() {
		in.class = ClassBegin
	}
}

// startTransaction parses the characteristics after START TRANSACTION. Any
// text counts as opening a transaction (if the server rejected it, nothing
// was opened, and a needless ROLLBACK is safe).
func (l *lexer) startTransaction(in *info) {
	in.class = ClassBegin
	for !l.atEnd() {
		w := l.token()
		if eqFold(w, "read") {
			switch {
			case l.is("only"):
				in.txMode = txModeReadOnly
			case l.is("write"):
				in.txMode = txModeReadWrite
			}
		}
	}
}

// commit parses the rest of COMMIT or ROLLBACK: [WORK] [TO [SAVEPOINT] x]
// [AND [NO] CHAIN] [[NO] RELEASE]. Anything else is ClassUnknown, since
// a statement the server rejects ends nothing.
func (l *lexer) commit(in *info, rollback bool) {
	if l.atEnd() { // the common case: plain COMMIT or ROLLBACK
		in.class = ClassCommit
		if rollback {
			in.class = ClassRollback
		}
		return
	}
	l.is("work")
	if rollback && l.is("to") {
		in.class = ClassSavepoint
		return
	}
	chain := false
	if l.is("and") {
		no := l.is("no")
		if !l.is("chain") {
			return
		}
		chain = !no
	}
	no := l.is("no")
	if l.is("release") {
		if !no {
			return // RELEASE closes the connection: ClassUnknown
		}
	} else if no {
		return
	}
	if !l.atEnd() {
		return
	}
	switch {
	case chain:
		in.class = ClassChain
	case rollback:
		in.class = ClassRollback
	default:
		in.class = ClassCommit
	}
}

// xa parses XA START|BEGIN|END|PREPARE|COMMIT|ROLLBACK|RECOVER and records
// the xid text, without the trailing keywords, to match START with the
// COMMIT or ROLLBACK that ends it.
func (l *lexer) xa(in *info) {
	w := l.word()
	switch {
	case eqFold(w, "start"), eqFold(w, "begin"):
		in.class = ClassXAStart
		r := l.rest()
		if s, ok := trimWord(r, "join"); ok {
			r = s
		} else if s, ok := trimWord(r, "resume"); ok {
			r = s
		}
		in.name = r
	case eqFold(w, "end"), eqFold(w, "prepare"):
		in.class = ClassXAPrepare
	case eqFold(w, "commit"):
		in.class = ClassXAFinish
		r := l.rest()
		if s, ok := trimWord(r, "phase"); ok {
			if s, ok := trimWord(s, "one"); ok {
				r = s
			}
		}
		in.name = r
	case eqFold(w, "rollback"):
		in.class = ClassXAFinish
		in.name = l.rest()
	case eqFold(w, "recover"):
		in.class = ClassQuery
	}
}

// rest returns the text after the current token, trimmed of surrounding
// whitespace and trailing ';'.
func (l *lexer) rest() string {
	l.skip()
	r := l.s[l.i:]
	for len(r) > 0 && (isSpace(r[len(r)-1]) || r[len(r)-1] == ';') {
		r = r[:len(r)-1]
	}
	return r
}

// trimWord removes the keyword kw, and the whitespace before it, from the
// end of r if r ends with it as a separate word.
func trimWord(r, kw string) (string, bool) {
	n := len(r) - len(kw)
	if n < 1 || !eqFold(r[n:], kw) || !isSpace(r[n-1]) {
		return r, false
	}
	r = r[:n]
	for len(r) > 0 && isSpace(r[len(r)-1]) {
		r = r[:len(r)-1]
	}
	return r, true
}

// use parses the database name of USE.
func (l *lexer) use(in *info) {
	in.class = ClassUse
	raw, plain, ok := l.ident()
	if !ok || !l.atEnd() {
		in.name, in.plain = "", ""
		return
	}
	in.name, in.plain = raw, plain
}

// create parses CREATE [OR REPLACE] TEMPORARY TABLE [IF NOT EXISTS] name;
// other CREATE statements are ClassDDL, and other TEMPORARY objects (a
// MariaDB temporary sequence) are ClassUnknown.
func (l *lexer) create(in *info) {
	if l.is("or") && !l.is("replace") {
		return
	}
	if !l.is("temporary") {
		in.class = ClassDDL
		return
	}
	if !l.is("table") {
		return
	}
	in.class = ClassCreateTemp
	l.skip() // so that restoring l.i never undoes an executable-comment closer
	save := l.i
	if !(l.is("if") && l.is("not") && l.is("exists")) {
		l.i = save
	}
	l.skip()
	start := l.i
	raw, _, ok := l.ident()
	if !ok {
		return // in.name == "": the release plan discards
	}
	if l.i < len(l.s) && l.s[l.i] == '.' {
		l.i++
		if l.i >= len(l.s) || isSpace(l.s[l.i]) {
			return
		}
		if _, _, ok := l.ident(); !ok {
			return
		}
		in.qual = true
		raw = l.s[start:l.i]
	}
	if c := l.peek(); c == '.' {
		return // "db . t" with spaces: not parsed
	}
	in.name = raw
}

// drop parses DROP: DROP TEMPORARY ... is ClassDropTemp, DROP PREPARE is
// ClassPrepared, the rest ClassDDL.
func (l *lexer) drop(in *info) {
	switch {
	case l.is("temporary"):
		in.class = ClassDropTemp
	case l.is("prepare"):
		in.class = ClassPrepared
	case l.is("database"), l.is("schema"):
		in.class, in.dropDB = ClassDDL, true
	default:
		in.class = ClassDDL
	}
}
