package txstate

import (
	"database/sql/driver"
	"math/bits"
	"strings"
)

// Dirty bits: what may differ from the baseline.
const (
	dTx         uint32 = 1 << iota // a transaction may be open: ROLLBACK
	dXA                            // an XA transaction is open: discard
	dAutocommit                    // autocommit may differ: SET autocommit
	dIsolation                     // isolation or access mode may differ: SET
	dDatabase                      // another database may be selected: USE
	dTables                        // LOCK TABLES: UNLOCK TABLES
	dUserLocks                     // GET_LOCK: SELECT RELEASE_ALL_LOCKS()
	dTemp                          // temporary tables: DROP TEMPORARY TABLE
	dVars                          // restorable session variables may differ (sess.vars): SET
	dUserVars                      // user variables may be set (Tracker.uvars): SET @a=NULL
	dLastID                        // LAST_INSERT_ID() may differ from 0: SET last_insert_id=0
	dDiscard                       // unknown state: discard
)

// maxTemps bounds the temporary tables a Tracker remembers; beyond it the
// connection is discarded.
const maxTemps = 32

// Reasons a plan gives.
const (
	reasonUnknown   = "session state unknown"
	reasonXA        = "XA transaction not committed or rolled back"
	reasonNoDB      = "database selected where none was at connect"
	reasonNoBase    = "no baseline recorded"
	reasonIsolation = "baseline isolation level unknown"
	reasonTemp      = "temporary table not tracked"
	reasonUserVars  = "user variable not tracked"
)

// sess is the part of a Tracker's state that Failed can merge back.
type sess struct {
	dirty  uint32
	ac     tri  // autocommit now: triOn, triOff, or triNone/triUnknown (unknown)
	ro     tri  // session read-only: triNone (as baseline), triOn, triOff, triUnknown
	txMode int8 // access mode of the open transaction, if it set one
	// locked says LOCK TABLES surely holds locks, so UNLOCK TABLES commits.
	// BEGIN releases table locks, after which UNLOCK TABLES commits nothing.
	locked bool
	// vars are the restorable session variables that may differ from the
	// baseline; dVars is set whenever vars is not empty.
	vars varMask
	// quoting is how the session's sql_mode lexes literals now: the
	// baseline's, or what a SET sql_mode made it.
	quoting Quoting
	// db is the current database as the last USE named it, or the baseline's
	// ("" for none, or the unknown database at connect of a Tracker without
	// baseline); dbUnknown says a statement may have changed it in a way the
	// Tracker cannot follow (a failed USE, DROP DATABASE).
	db        string
	dbUnknown bool
}

// Tracker follows one connection's session state from the statements and
// driver transaction calls a borrower makes, and answers at release how to
// bring the session back to its baseline (Plan).
//
// A pool embeds one Tracker per physical connection, calls Reset with the
// baseline recorded at connect, feeds it every driver Begin, Commit and
// Rollback and every statement's text while the connection is lent, calls
// Failed when one of them returns an error, and at release calls Clean
// (true in the common case, a field read) or else Plan, runs the plan and
// calls Done.
//
// A Tracker is not safe for concurrent use: one goroutine at a time, as a
// driver.Conn is used. Its zero value is ready to use with no baseline: it
// tracks transactions, locks and temporary tables as usual, but with
// autocommit unknown every statement counts as opening a transaction, and
// any change of database, autocommit, isolation or access mode plans a
// discard, since there is no recorded value to restore.
type Tracker struct {
	st        sess
	prev      sess   // st before the last call, for Failed
	failExtra uint32 // dirty bits Failed adds for the last call
	reason    string // why dDiscard was set

	base    Baseline
	hasBase bool
	isoOK   bool
	useSQL  string // USE `db`
	acSQL   string // SET autocommit=...
	txSQL   string // SET SESSION TRANSACTION ISOLATION LEVEL ..., READ ...
	bothSQL string // one SET for autocommit, isolation and access mode
	isoTail string // the isolation and access-mode assignments, in executable comments

	// The restorable session variables: their baseline values, which ones the
	// baseline recorded (baseOK) and could write back (restorable), and the
	// assignment that restores each.
	baseVal    [numVars]string
	baseOK     varMask
	restorable varMask
	assign     [numVars]string
	// varSQL is the last reset SET built for variables, for the dirty set
	// varKey (the variables, plus autocommit and isolation bits above them).
	varSQL string
	varKey uint64

	// gen changes whenever how the server would prepare a statement may have
	// changed: another database, a session change the Tracker cannot follow
	// (sql_mode, character set, ...), a reset. See Resolution.
	gen uint32

	// uvars are the user variables (lower-case) the borrower may have set, reset to NULL at
	// release; idTentative says the last Statement set dLastID only because it may insert, so
	// that InsertID(0) can take it back.
	uvars       []string
	idTentative bool

	// id is the deferred LAST_INSERT_ID() reset (lastid.go); its zero value is off (eager).
	id lastID

	txIso driver.IsolationLevel
	xid   string
	temps []string
	plan  [6]string
}

// NewTracker returns a Tracker reset to baseline b. A pool that embeds a
// Tracker by value calls Reset instead.
func NewTracker(b Baseline) *Tracker {
	t := new(Tracker)
	t.Reset(b)
	return t
}

// Reset makes b the baseline and marks the session clean, as it is right
// after connect. It allocates the reset statements for b once, so that
// later calls need not.
func (t *Tracker) Reset(b Baseline) {
	t.base = b
	t.hasBase = true
	t.useSQL = ""
	if b.Database != "" {
		t.useSQL = "USE `" + strings.ReplaceAll(b.Database, "`", "``") + "`"
	}
	ac := "0"
	if b.Autocommit {
		ac = "1"
	}
	t.acSQL = "SET autocommit=" + ac
	name, sql, ok := normalIsolation(b.Isolation)
	t.isoOK = ok
	t.txSQL, t.bothSQL = "", ""
	if ok {
		mode, ro := "READ WRITE", "0"
		if b.ReadOnly {
			mode, ro = "READ ONLY", "1"
		}
		t.txSQL = "SET SESSION TRANSACTION ISOLATION LEVEL " + sql + ", " + mode
		// One SET for all three needs each server's variable names; the
		// executable comments pick them as in BaselineQuery.
		t.isoTail = " /*M!, SESSION tx_isolation='" + name + "', SESSION tx_read_only=" + ro + " */" +
			" /*!50720 , SESSION transaction_isolation='" + name + "', SESSION transaction_read_only=" + ro + " */"
		t.bothSQL = "SET autocommit=" + ac + t.isoTail
	}
	t.baseOK, t.restorable = 0, 0
	t.varSQL, t.varKey = "", 0
	for i := range sysVars {
		v := sysVar(i)
		val, ok := b.Variables.vals[v], b.Variables.known&(1<<v) != 0
		t.baseVal[v], t.assign[v] = val, ""
		if !ok {
			continue
		}
		t.baseOK |= 1 << v
		if a := assignment(v, val, !(v == vCharsetResults && val == "")); a != "" {
			t.assign[v] = a
			t.restorable |= 1 << v
		}
	}
	// character_set_client is restored with NAMES cs COLLATE <baseline collation_connection>
	// when the connection's character set is the client's: assigning the character set alone
	// would give the client its default collation, not the one the connection had (a bound
	// parameter's collation). NAMES sets the results and connection character sets and the
	// collation too; the assignments after it set them to the baseline's again.
	cl, cn, co := t.baseVal[vCharsetClient], t.baseVal[vCharsetConnection], t.baseVal[vCollationConnection]
	if t.restorable&(1<<vCharsetClient) != 0 && t.restorable&(1<<vCollationConnection) != 0 &&
		t.baseOK&(1<<vCharsetConnection) != 0 && strings.EqualFold(cl, cn) {
		t.assign[vCharsetClient] = "NAMES '" + cl + "' COLLATE '" + co + "'"
	}
	t.Done()
	t.id.fresh(t)
}

// Baseline returns the baseline given to Reset, and false for a Tracker
// that has none (the zero Tracker).
func (t *Tracker) Baseline() (Baseline, bool) {
	return t.base, t.hasBase
}

// Done records that the plan ran successfully: the session is back at its
// baseline and clean. Call it after every successful reset (and never after
// a failed one: close the connection instead).
func (t *Tracker) Done() {
	t.doneLastID()
	t.st = sess{quoting: t.base.Quoting, db: t.base.Database}
	if t.hasBase {
		t.st.ac = triOff
		if t.base.Autocommit {
			t.st.ac = triOn
		}
	}
	t.gen++
	t.prev = t.st
	t.failExtra = 0
	t.reason = ""
	t.txIso = driver.IsolationLevel(0)
	t.xid = ""
	clear(t.temps)
	t.temps = t.temps[:0]
	clear(t.uvars)
	t.uvars = t.uvars[:0]
	t.idTentative = false
}

// Clean reports whether nothing needs doing at release: no transaction,
// lock, temporary table or changed setting. It is a field read.
func (t *Tracker) Clean() bool {
	return t.st.dirty == 0
}

// MayHoldUserLocks reports whether the borrower may hold user-level (named) locks: it ran
// GET_LOCK, or the session state is unknown (a statement the Tracker cannot follow may have
// taken one). A pool that closes such a connection instead of resetting it releases them first
// (SELECT RELEASE_ALL_LOCKS()): the server frees a closed connection's locks only after the
// socket closes, so the next borrower could still see them held.
func (t *Tracker) MayHoldUserLocks() bool {
	return t.st.dirty&(dUserLocks|dDiscard) != 0
}

// InTx reports whether a transaction may be open: begun by the driver or by
// text (BEGIN, START TRANSACTION, XA START, or a statement with autocommit
// off) and not yet ended.
func (t *Tracker) InTx() bool {
	return t.st.dirty&(dTx|dXA) != 0
}

// ReadOnlyTx reports whether the session itself asked for read-only
// transactions, so that error 1792 (ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION)
// is the borrower's doing rather than a sign of failover: the open
// transaction was begun read-only (driver TxOptions.ReadOnly, START
// TRANSACTION READ ONLY), or the session's access mode is read-only by SET
// [SESSION] TRANSACTION READ ONLY, transaction_read_only or the baseline.
// An access mode set to a value the tracker cannot read counts as read-only.
func (t *Tracker) ReadOnlyTx() bool {
	if t.st.dirty&dTx != 0 && t.st.txMode != txModeSession {
		return t.st.txMode == txModeReadOnly
	}
	switch t.st.ro {
	case triOn, triUnknown:
		return true
	case triOff:
		return false
	}
	return t.hasBase && t.base.ReadOnly
}

// TxIsolation returns the isolation level the last Begin asked for
// (driver.IsolationLevel(0), the default, when none or after Done).
func (t *Tracker) TxIsolation() driver.IsolationLevel {
	return t.txIso
}

// Begin records a driver BeginTx (or Begin, with zero opts) on the
// connection. Call it before or after the driver's call; if the call fails,
// call Failed: go-sql-driver/mysql may have set the next transaction's
// isolation level before failing to start it, and the plan then resets it.
//
// A non-default opts.Isolation needs no reset once the transaction ends:
// go-sql-driver/mysql sets it with SET TRANSACTION (no SESSION), which lasts
// for the next transaction only.
func (t *Tracker) Begin(opts driver.TxOptions) {
	t.prev, t.failExtra = t.st, 0
	if opts.Isolation != driver.IsolationLevel(0) {
		t.failExtra = dIsolation
	}
	t.st.dirty |= dTx
	t.st.locked = false
	t.st.txMode = txModeSession
	if opts.ReadOnly {
		t.st.txMode = txModeReadOnly
	}
	t.txIso = opts.Isolation
}

// Commit records a driver Tx.Commit: the transaction has ended. If the call
// fails, call Failed.
func (t *Tracker) Commit() {
	t.prev, t.failExtra = t.st, 0
	t.endTx()
}

// Rollback records a driver Tx.Rollback: the transaction has ended. If the
// call fails, call Failed.
func (t *Tracker) Rollback() {
	t.prev, t.failExtra = t.st, 0
	t.endTx()
}

// Unknown records that the session was used in a way the pool cannot see,
// such as through sql.Conn.Raw: its state is unknown and the plan discards
// the connection.
func (t *Tracker) Unknown() {
	t.prev, t.failExtra = t.st, 0
	t.discard(reasonUnknown)
}

// Failed records that the last Statement, Begin, Commit or Rollback
// returned an error. A failed statement may have ended nothing, so whatever
// was in place before it is assumed to still be (the union of the states
// before and after); what it may have started is kept too.
func (t *Tracker) Failed() {
	t.idTentative = false
	t.id.insert = false
	t.id.args = nil
	p := t.prev
	t.st.dirty |= p.dirty | t.failExtra
	if p.ac != t.st.ac {
		t.st.ac = triUnknown
		t.st.dirty |= dAutocommit
	}
	if p.ro != t.st.ro {
		t.st.ro = triUnknown
	}
	t.st.vars |= p.vars
	if t.st.vars != 0 {
		t.st.dirty |= dVars
	}
	if p.quoting != t.st.quoting {
		t.st.quoting = QuotingUnknown
	}
	if p.txMode != t.st.txMode && p.dirty&dTx != 0 {
		t.st.txMode = p.txMode
	}
	t.st.locked = t.st.locked && p.locked
	if p.db != t.st.db || p.dbUnknown != t.st.dbUnknown {
		// A failed USE may or may not have switched.
		t.st.dbUnknown = true
		t.gen++
	}
	if t.st.dirty&dDiscard != 0 && t.reason == "" {
		t.reason = reasonUnknown
	}
}

// Statement records the text of a statement run on the connection: every
// Exec and Query, and every execution of a prepared statement. Call it
// before or after the driver's call; if the call fails, call Failed.
//
// Statement does not allocate (except the first time it remembers a
// temporary table) and takes tens of nanoseconds for a typical statement;
// it never uses regular expressions.
func (t *Tracker) Statement(query string) {
	t.prev, t.failExtra = t.st, 0
	t.idTentative = false
	t.id.insert = false
	var in info
	q := t.st.quoting
	analyze(&in, query, q)
	t.apply(&in)
	t.id.insert = in.insert // also when discarding: the borrow's own ids matter until release
	t.id.statementID(&in, query)
	if in.class == ClassEmpty || t.st.dirty&dDiscard != 0 {
		return
	}
	if strings.IndexByte(query, '@') >= 0 {
		t.scanUserVars(query, q, &in)
	}
	switch {
	case hasLastInsertIDArg(query):
		t.setLastID()
	case in.insert && !t.lastIDChanged():
		t.setLastID()
		t.idTentative = true
	}
}

// scanUserVars records the user variables query assigns, to reset at release.
func (t *Tracker) scanUserVars(query string, q Quoting, in *info) {
	mode := assignOps
	switch {
	case in.load:
		mode = assignAll
	case in.set:
		mode = assignSet
	}
	ok := true
	switch q {
	case QuotingBackslash, QuotingANSI:
		ok = userVarScan(query, true, mode, addUserVar, t)
	case QuotingNoBackslash:
		ok = userVarScan(query, false, mode, addUserVar, t)
	default:
		ok = userVarScan(query, true, mode, addUserVar, t)
		if ok && strings.IndexByte(query, '\\') >= 0 {
			ok = userVarScan(query, false, mode, addUserVar, t)
		}
	}
	if !ok {
		t.discard(reasonUserVars)
		return
	}
	if len(t.uvars) > 0 {
		t.st.dirty |= dUserVars
	}
}

// InsertID records the last insert id the server reported for the last Statement, an Exec
// (driver.Result.LastInsertId; the OK packet's field). Zero means the statement generated no
// AUTO_INCREMENT value, so an INSERT that Statement counted as possibly changing
// LAST_INSERT_ID() did not; it does not undo a LAST_INSERT_ID(expr) call or an earlier
// statement's change. Call it only after a successful Exec whose result carries the id.
func (t *Tracker) InsertID(id int64) {
	if id == 0 && t.idTentative {
		t.st.dirty &^= dLastID
		t.id.borrow = false
	}
	t.idTentative = false
	if id != 0 {
		t.id.reported(id)
		t.id.insertID(id, t.st.quoting, t.gen)
	} else if t.id.insert {
		t.id.cur, t.id.curOK = t.id.prevCur, t.id.prevOK // no AUTO_INCREMENT value: unchanged
	}
	t.id.insert = false
	t.id.args = nil
}

// apply changes the state by one classified statement.
func (t *Tracker) apply(in *info) {
	switch in.class {
	case ClassEmpty:
		return
	case ClassQuery, ClassUserLock, ClassSavepoint, ClassDropTemp:
		t.touch()
	case ClassBegin:
		t.st.dirty |= dTx
		t.st.locked = false // BEGIN releases table locks
		t.st.txMode = in.txMode
	case ClassCommit, ClassRollback:
		t.endTx()
	case ClassChain:
		t.st.dirty |= dTx
		t.st.locked = false
	case ClassXAStart:
		t.st.dirty |= dXA
		t.xid = in.name
	case ClassXAPrepare:
		t.st.dirty |= dXA
	case ClassXAFinish:
		if t.st.dirty&dXA != 0 && in.name != "" && in.name == t.xid {
			t.st.dirty &^= dXA
		}
	case ClassSetUserVar, ClassSetAutocommit, ClassSetTransaction, ClassSetVariable:
		t.set(in)
	case ClassUse:
		if in.plain != "" && t.hasBase && in.plain == t.base.Database {
			t.st.dirty &^= dDatabase
		} else {
			t.st.dirty |= dDatabase
		}
		switch {
		case in.plain == "":
			t.st.dbUnknown = true
			t.gen++
		case t.st.dbUnknown || in.plain != t.st.db:
			t.st.db, t.st.dbUnknown = in.plain, false
			t.gen++
		}
	case ClassLockTables:
		t.implicitCommit()
		t.st.dirty |= dTables
		t.st.locked = true
	case ClassUnlockTables:
		if t.st.locked {
			t.implicitCommit()
		}
		t.st.dirty &^= dTables
		t.st.locked = false
	case ClassCreateTemp:
		t.touch()
		t.createTemp(in)
	case ClassDDL:
		if len(t.temps) == 0 {
			t.implicitCommit()
		} else if in.rename {
			// ALTER ... RENAME or RENAME TABLE may rename a temporary
			// table out of reach of DROP TEMPORARY TABLE IF EXISTS; and
			// DDL on a temporary table need not commit.
			t.discard(reasonTemp)
		}
		if in.dropDB {
			t.st.dirty |= dDatabase
			t.st.dbUnknown = true // DROP DATABASE of the current one leaves none selected
			t.gen++
		}
	default:
		t.discard(reasonFor(in.class))
	}
	if in.lock {
		t.st.dirty |= dUserLocks
	}
}

// reasonFor names a discarding class for Plan.Reason.
func reasonFor(c Class) string {
	switch c {
	case ClassSetOther:
		return "session variable changed (SET)"
	case ClassCall:
		return "stored procedure called (CALL)"
	case ClassPrepared:
		return "SQL-level prepared statement (PREPARE/EXECUTE)"
	case ClassHandler:
		return "HANDLER used"
	case ClassMulti:
		return "multi-statement text"
	}
	return "statement not recognised"
}

// touch records a statement that opens a transaction unless autocommit is
// known to be on.
func (t *Tracker) touch() {
	if t.st.ac != triOn {
		t.st.dirty |= dTx
	}
}

// endTx records the end of the (non-XA) transaction.
func (t *Tracker) endTx() {
	t.st.dirty &^= dTx
	t.st.txMode = txModeSession
}

// implicitCommit records a statement that commits the open transaction
// before it runs. In an XA transaction such statements fail instead.
func (t *Tracker) implicitCommit() {
	t.endTx()
}

// discard marks the state unknown, keeping the first reason.
func (t *Tracker) discard(reason string) {
	if t.st.dirty&dDiscard == 0 {
		t.reason = reason
	}
	t.st.dirty |= dDiscard
	t.gen++ // sql_mode, the character set or the database may have changed
}

// Resolution describes what a statement prepared now would be prepared
// against, for a cache of prepared statements. db is the current database
// (as USE named it, or the baseline's; "" for none, or for a Tracker
// without baseline, the database selected at connect). known is false when
// the Tracker cannot tell how the server would resolve a statement: the
// database is unknown (a failed USE, DROP DATABASE, USE it cannot parse), the
// session state is unknown (a SET of a variable it does not restore,
// sql.Conn.Raw, a statement it does not recognise), or sql_mode or the
// connection's character sets or collation differ from the baseline (they
// are fixed into a statement when the server prepares it; time_zone and the
// other restored variables are read when it runs), or the access mode or
// isolation may differ from the baseline or a read-only transaction is open
// (MariaDB refuses to prepare a write in a read-only session or transaction,
// error 1792, so a statement cached under the baseline would hide that error),
// or LOCK TABLES holds locks (a statement on a table not locked fails to
// prepare, 1100) or an XA transaction is open, or a temporary table exists (a
// statement prepared against it would outlive the DROP at release and let the
// next borrower's Prepare succeed where a new connection's fails with 1146);
// a cache must then prepare anew and not share the statement. gen changes whenever db or known may have
// changed, and at every Done: a statement prepared at one
// gen must be prepared again before it runs at another (keyed by db, that
// is a cache lookup). Resolution does not allocate.
func (t *Tracker) Resolution() (db string, gen uint32, known bool) {
	known = !t.st.dbUnknown && t.st.dirty&(dDiscard|dIsolation|dTables|dXA|dTemp) == 0 && t.st.vars&resolutionVars == 0 &&
		!(t.st.dirty&dTx != 0 && t.st.txMode == txModeReadOnly)
	return t.st.db, t.gen, known
}

// resolutionVars are the restorable variables under which the server parses
// a statement differently when it prepares it: sql_mode (ANSI_QUOTES,
// PIPES_AS_CONCAT, …) and the connection's character set and collation
// (literals and comparisons). While one differs from the baseline,
// Resolution reports the state unknown, so a statement cache does not
// share statements prepared under it; setting one back makes statements
// prepared under the baseline usable again.
const resolutionVars varMask = 1<<vSQLMode | 1<<vCharsetClient | 1<<vCharsetConnection | 1<<vCollationConnection |
	// Read when a statement is parsed or its result types are fixed, which may be at prepare:
	// not shared while they differ (erring toward preparing anew).
	1<<vDivPrecisionIncrement | 1<<vGroupConcatMaxLen | 1<<vSQLSelectLimit | 1<<vSQLAutoIsNull |
	1<<vMaxSortLength | 1<<vLCTimeNames

// set applies a SET of user variables, autocommit and the transaction
// variables.
func (t *Tracker) set(in *info) {
	wasOn := t.st.ac == triOn
	if in.ac != triNone {
		if in.ac == triOn && t.st.ac == triOff && !(t.st.dirty&dTx != 0 && t.st.txMode == txModeReadOnly) {
			// Switching autocommit from 0 to 1 commits. Not a READ ONLY transaction as far as
			// release is concerned: MariaDB 10.11 commits it (@@in_transaction reads 0) but
			// keeps refusing writes (1792) until the next COMMIT or ROLLBACK, which release
			// then sends.
			t.implicitCommit()
		}
		t.st.ac = in.ac
		if t.hasBase && in.ac != triUnknown && (in.ac == triOn) == t.base.Autocommit {
			t.st.dirty &^= dAutocommit
		} else {
			t.st.dirty |= dAutocommit
		}
	}
	if in.iso {
		t.st.dirty |= dIsolation
		if in.ro != triNone {
			t.st.ro = in.ro
		}
	}
	if in.vars != 0 {
		t.setVars(in)
	}
	if in.userVar && (!wasOn || t.st.ac != triOn) {
		t.st.dirty |= dTx // the expression may have read a table
	}
}

// setVars applies the assignments of restorable session variables: each
// one differs from the baseline unless it was set to the baseline's value.
func (t *Tracker) setVars(in *info) {
	if in.vars&resolutionVars != 0 {
		t.gen++ // a statement prepared now may resolve differently (Resolution)
	}
	vals := &in.vals
	if in.vars&(1<<vCollationConnection) != 0 && vals[vCharsetConnection] == "" &&
		sameValue(vCollationConnection, vals[vCollationConnection], t.baseVal[vCollationConnection], t.baseOK&(1<<vCollationConnection) != 0) {
		// The statement left collation_connection at the baseline's (it was assigned
		// after any character set, which would have made it unknown): a collation
		// names its character set, so character_set_connection is the baseline's too.
		vals[vCharsetConnection] = t.baseVal[vCharsetConnection]
	}
	for m := in.vars; m != 0; m &= m - 1 {
		v := sysVar(bitsVar(m))
		if sameValue(v, vals[v], t.baseVal[v], t.baseOK&(1<<v) != 0) {
			t.st.vars &^= 1 << v
		} else {
			t.st.vars |= 1 << v
		}
		if v == vSQLMode {
			switch {
			case t.st.vars&(1<<vSQLMode) == 0:
				t.st.quoting = t.base.Quoting
			case in.vals[v] != "":
				t.st.quoting = QuotingFor(in.vals[v])
			default:
				t.st.quoting = QuotingUnknown
			}
		}
	}
	if in.names && (in.nColl == "" || !sameValue(vCollationConnection, in.nColl, t.baseVal[vCollationConnection], t.baseOK&(1<<vCollationConnection) != 0)) {
		// SET NAMES cs [COLLATE c] and SET CHARACTER SET cs give character_set_client the
		// collation c (or cs's default), which @@character_set_client does not show but a
		// bound parameter takes (COLLATION(?), checked on MariaDB 10.11): unless it is the
		// baseline's collation, the client's character set is restored too, with NAMES.
		t.st.vars |= 1 << vCharsetClient
	}
	if t.st.vars&(1<<vCharsetConnection) != 0 {
		// Assigning character_set_connection also sets collation_connection, to the
		// character set's default: the reset must restore the collation after it, or a
		// baseline collation that is not its character set's default (go-sql-driver's
		// collation parameter) would leak the default to the next borrower.
		t.st.vars |= 1 << vCollationConnection
	}
	if t.st.vars != 0 {
		t.st.dirty |= dVars
	} else {
		t.st.dirty &^= dVars
	}
}

// createTemp remembers a temporary table to drop at release.
func (t *Tracker) createTemp(in *info) {
	switch {
	case in.name == "":
		t.discard(reasonTemp)
		return
	case !in.qual && t.st.dirty&dDatabase != 0:
		// Created in a database other than the baseline's: an
		// unqualified DROP after USE <baseline> would miss it.
		t.discard(reasonTemp)
		return
	}
	for _, n := range t.temps {
		if n == in.name {
			t.st.dirty |= dTemp
			return
		}
	}
	if len(t.temps) >= maxTemps {
		t.discard(reasonTemp)
		return
	}
	t.temps = append(t.temps, in.name)
	t.st.dirty |= dTemp
}

// Plan returns the cheapest plan that brings the session back to the
// baseline: ActionNone when clean; ActionReset with statements in this
// order, each only if needed: ROLLBACK, UNLOCK TABLES,
// SELECT RELEASE_ALL_LOCKS(), USE `baseline`, DROP TEMPORARY TABLE IF EXISTS
// ..., and one SET for autocommit, isolation and access mode; or
// ActionDiscard when the state is unknown, an XA transaction is open, a
// database was selected where none was at connect, or a value to restore
// is not known. Plan does not change the Tracker; it allocates only to
// join several causes in Reason and to build a DROP TEMPORARY TABLE.
func (t *Tracker) Plan() Plan {
	d := t.st.dirty | t.lastIDInSet()
	switch {
	case d == 0:
		return Plan{}
	case d&dDiscard != 0:
		r := t.reason
		if r == "" {
			r = reasonUnknown
		}
		return Plan{Action: ActionDiscard, Reason: r}
	case d&dXA != 0:
		return Plan{Action: ActionDiscard, Reason: reasonXA}
	case d&dDatabase != 0 && t.useSQL == "":
		if !t.hasBase {
			return Plan{Action: ActionDiscard, Reason: reasonNoBase}
		}
		return Plan{Action: ActionDiscard, Reason: reasonNoDB}
	case d&(dAutocommit|dIsolation) != 0 && !t.hasBase:
		return Plan{Action: ActionDiscard, Reason: reasonNoBase}
	case d&dIsolation != 0 && !t.isoOK:
		return Plan{Action: ActionDiscard, Reason: reasonIsolation}
	case d&dVars != 0 && t.st.vars&^t.restorable != 0:
		v := bitsVar(t.st.vars &^ t.restorable)
		return Plan{Action: ActionDiscard, Reason: "session variable " + sysVars[v].name + " changed; its value at connect is not known"}
	}
	var why [len(Tracker{}.plan)]string
	n := 0
	if d&dTx != 0 {
		t.plan[n], why[n] = "ROLLBACK", "open transaction"
		n++
	}
	if d&dTables != 0 {
		t.plan[n], why[n] = "UNLOCK TABLES", "table locks"
		n++
	}
	if d&dUserLocks != 0 {
		t.plan[n], why[n] = "SELECT RELEASE_ALL_LOCKS()", "user locks"
		n++
	}
	if d&dDatabase != 0 {
		t.plan[n], why[n] = t.useSQL, "database changed"
		n++
	}
	if d&dTemp != 0 && len(t.temps) > 0 {
		t.plan[n], why[n] = "DROP TEMPORARY TABLE IF EXISTS "+strings.Join(t.temps, ", "), "temporary tables"
		n++
	}
	switch {
	case d&(dVars|dUserVars|dLastID) != 0:
		t.plan[n], why[n] = t.varsSQL(d)
		n++
	case d&(dAutocommit|dIsolation) == dAutocommit:
		t.plan[n], why[n] = t.acSQL, "autocommit changed"
		n++
	case d&(dAutocommit|dIsolation) == dIsolation:
		t.plan[n], why[n] = t.txSQL, "isolation or access mode changed"
		n++
	case d&(dAutocommit|dIsolation) == dAutocommit|dIsolation:
		t.plan[n], why[n] = t.bothSQL, "autocommit, isolation or access mode changed"
		n++
	}
	reason := why[0]
	if n > 1 {
		reason = strings.Join(why[:n], ", ")
	}
	return Plan{Action: ActionReset, Statements: t.plan[:n:n], Reason: reason}
}

// varsSQL returns the one SET that restores the changed session variables, resets the user
// variables the borrower may have set (to NULL) and LAST_INSERT_ID() (to 0), and restores
// autocommit, isolation and access mode when d says they changed too, with the reason to give.
// Without user variables the statement for the last set of changes is kept, so a borrower
// that changes the same variables every time costs one allocation per connection, not one
// per release; user variables build it anew.
func (t *Tracker) varsSQL(d uint32) (sql, reason string) {
	key := uint64(t.st.vars) | uint64(d&(dAutocommit|dIsolation|dLastID))<<32
	if d&dUserVars != 0 || key != t.varKey || t.varSQL == "" {
		var b strings.Builder
		b.WriteString("SET ")
		sep := ""
		vars := t.st.vars
		if vars&(1<<vCharsetClient) != 0 && strings.HasPrefix(t.assign[vCharsetClient], "NAMES ") {
			// NAMES sets the connection's character set and collation to the baseline's,
			// and the results' to the client's. The collation is assigned again after it:
			// the embedded go-mysql-server ignores NAMES' COLLATE.
			vars &^= 1 << vCharsetConnection
			vars |= 1 << vCollationConnection
			if t.baseOK&(1<<vCharsetResults) != 0 && strings.EqualFold(t.baseVal[vCharsetResults], t.baseVal[vCharsetClient]) {
				vars &^= 1 << vCharsetResults
			} else if t.restorable&(1<<vCharsetResults) != 0 {
				vars |= 1 << vCharsetResults
			}
		}
		for m := vars; m != 0; m &= m - 1 {
			b.WriteString(sep)
			b.WriteString(t.assign[bitsVar(m)])
			sep = ", "
		}
		if d&dUserVars != 0 {
			for _, n := range t.uvars {
				b.WriteString(sep)
				b.WriteString("@`")
				b.WriteString(strings.ReplaceAll(n, "`", "``"))
				b.WriteString("`=NULL")
				sep = ", "
			}
		}
		if d&dLastID != 0 {
			b.WriteString(sep)
			b.WriteString("last_insert_id=0")
			sep = ", "
		}
		if d&dAutocommit != 0 {
			b.WriteString(sep)
			b.WriteString(t.acSQL[len("SET "):])
		}
		if d&dIsolation != 0 {
			if sep == "" {
				return t.txSQL, "isolation or access mode changed"
			}
			b.WriteString(t.isoTail)
		}
		if d&dUserVars != 0 {
			sql = b.String()
		} else {
			t.varSQL, t.varKey = b.String(), key
			sql = t.varSQL
		}
	} else {
		sql = t.varSQL
	}
	if d&(dUserVars|dLastID) == 0 {
		switch d & (dAutocommit | dIsolation) {
		case dAutocommit:
			return sql, "session variables or autocommit changed"
		case dIsolation:
			return sql, "session variables, isolation or access mode changed"
		case dAutocommit | dIsolation:
			return sql, "session variables, autocommit, isolation or access mode changed"
		}
		return sql, "session variables changed"
	}
	var why []string
	if d&dVars != 0 {
		why = append(why, "session variables")
	}
	if d&dUserVars != 0 {
		why = append(why, "user variables")
	}
	if d&dLastID != 0 {
		why = append(why, "LAST_INSERT_ID")
	}
	if d&dAutocommit != 0 {
		why = append(why, "autocommit")
	}
	if d&dIsolation != 0 {
		why = append(why, "isolation or access mode")
	}
	return sql, strings.Join(why, ", ") + " changed"
}

// bitsVar returns the index of the lowest set bit of a non-empty mask.
func bitsVar(m varMask) int {
	return bits.TrailingZeros32(uint32(m))
}
