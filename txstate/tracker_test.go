package txstate

import (
	"database/sql/driver"
	"reflect"
	"strings"
	"testing"
)

var testBase = Baseline{Database: "app", Autocommit: true, Isolation: "REPEATABLE-READ", Quoting: QuotingBackslash}

const (
	setTxRR   = "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ WRITE"
	setBothRR = "SET autocommit=1 /*M!, SESSION tx_isolation='REPEATABLE-READ', SESSION tx_read_only=0 */" +
		" /*!50720 , SESSION transaction_isolation='REPEATABLE-READ', SESSION transaction_read_only=0 */"
)

// run feeds ops to t. An op is a statement's text, or one of:
// "<begin>", "<begin ro>", "<begin serializable>", "<commit>",
// "<rollback>", "<failed>", "<unknown>", "<done>". A statement not followed by
// "<failed>" is reported with InsertID(0), as the pool reports an Exec whose
// result carries no generated id.
func run(t *Tracker, ops []string) {
	for i, op := range ops {
		switch op {
		case "<begin>":
			t.Begin(driver.TxOptions{})
		case "<begin ro>":
			t.Begin(driver.TxOptions{ReadOnly: true})
		case "<begin serializable>":
			t.Begin(driver.TxOptions{Isolation: driver.IsolationLevel(6)})
		case "<commit>":
			t.Commit()
		case "<rollback>":
			t.Rollback()
		case "<failed>":
			t.Failed()
		case "<unknown>":
			t.Unknown()
		case "<done>":
			t.Done()
		default:
			t.Statement(op)
			if i+1 == len(ops) || ops[i+1] != "<failed>" {
				t.InsertID(0)
			}
		}
	}
}

func TestTrackerPlans(t *testing.T) {
	noDB := testBase
	noDB.Database = ""
	acOff := testBase
	acOff.Autocommit = false
	ro := testBase
	ro.ReadOnly = true
	badIso := testBase
	badIso.Isolation = ""

	cases := []struct {
		name  string
		base  *Baseline // nil: the zero Tracker
		ops   []string
		act   Action
		stmts []string
	}{
		{"nothing", &testBase, nil, ActionNone, nil},
		{"autocommit select", &testBase, []string{"SELECT 1", "INSERT INTO t VALUES (1)"}, ActionNone, nil},
		{"user var", &testBase, []string{"SET @a = 1", "SELECT @a"}, ActionReset, []string{"SET @`a`=NULL"}},
		{"user vars of every form", &testBase, []string{"SET @A = 1, @`b c` := 2", "SELECT @d := 1, 'x@y := 1', @'e' := 2, @@session.time_zone", "SELECT v INTO @f, @F2 FROM t",
			"SELECT 'u'@'h', @g /* c */ := 1 /* @h := 1 */ -- @i := 1\n", "SELECT @r, @r = 1", "LOAD DATA INFILE 'x' INTO TABLE t (a, @l) SET b = @l"},
			ActionReset, []string{"SET @`a`=NULL, @`b c`=NULL, @`d`=NULL, @`e`=NULL, @`f`=NULL, @`f2`=NULL, @`g`=NULL, @`l`=NULL"}},
		{"user var read only", &testBase, []string{"SELECT @tenant", "SELECT * FROM t WHERE owner = @tenant", "UPDATE t SET a = @x WHERE b = @y"}, ActionNone, nil},
		{"user var with backtick", &testBase, []string{"SET @`a``b` = 1"}, ActionReset, []string{"SET @`a``b`=NULL"}},
		{"user var unreadable", &testBase, []string{"SET @'a\\'b' = 1"}, ActionDiscard, nil},
		{"user var in executable comment", &testBase, []string{"SELECT 1 /*!50700 , @x := 2 */"}, ActionReset, []string{"SET @`x`=NULL"}},
		{"user var multi-statement", &testBase, []string{"SELECT 1; SET @m = 2"}, ActionDiscard, nil},
		{"user var by procedure", &testBase, []string{"CALL p()"}, ActionDiscard, nil},
		{"insert id generated", &testBase, []string{"INSERT INTO t (v) VALUES (1)"}, ActionNone, nil},
		{"last_insert_id(expr)", &testBase, []string{"SELECT LAST_INSERT_ID(77)"}, ActionReset, []string{"SET last_insert_id=0"}},
		{"last_insert_id()", &testBase, []string{"SELECT LAST_INSERT_ID( )"}, ActionNone, nil},
		{"update last_insert_id", &testBase, []string{"UPDATE t SET id = LAST_INSERT_ID (id + 1)"}, ActionReset, []string{"SET last_insert_id=0"}},
		{"failed insert", &testBase, []string{"INSERT INTO t VALUES (1)", "<failed>"}, ActionReset, []string{"SET last_insert_id=0"}},
		{"create select", &testBase, []string{"CREATE TABLE t2 (id INT AUTO_INCREMENT PRIMARY KEY) SELECT 1 AS x", "<failed>"}, ActionReset, []string{"SET last_insert_id=0"}},
		{"user var and insert id with autocommit", &testBase, []string{"SET autocommit=0, @x = 1", "SELECT LAST_INSERT_ID(1)"}, ActionReset, []string{"ROLLBACK", "SET @`x`=NULL, last_insert_id=0, autocommit=1"}},
		{"empty", &testBase, []string{"", "/* */"}, ActionNone, nil},

		// Transactions.
		{"begin only", &testBase, []string{"BEGIN"}, ActionReset, []string{"ROLLBACK"}},
		{"start transaction only", &testBase, []string{"START TRANSACTION READ ONLY"}, ActionReset, []string{"ROLLBACK"}},
		{"begin insert", &testBase, []string{"BEGIN", "INSERT INTO t VALUES (1)"}, ActionReset, []string{"ROLLBACK"}},
		{"begin commit", &testBase, []string{"BEGIN", "INSERT INTO t VALUES (1)", "COMMIT"}, ActionNone, nil},
		{"begin rollback", &testBase, []string{"START TRANSACTION", "SELECT 1", "ROLLBACK WORK"}, ActionNone, nil},
		{"driver begin", &testBase, []string{"<begin>"}, ActionReset, []string{"ROLLBACK"}},
		{"driver commit", &testBase, []string{"<begin>", "INSERT INTO t VALUES (1)", "<commit>"}, ActionNone, nil},
		{"driver rollback", &testBase, []string{"<begin ro>", "SELECT 1", "<rollback>"}, ActionNone, nil},
		{"driver isolation commit", &testBase, []string{"<begin serializable>", "<commit>"}, ActionNone, nil},
		{"driver begin failed", &testBase, []string{"<begin serializable>", "<failed>"}, ActionReset, []string{"ROLLBACK", setTxRR}},
		{"savepoint rollback keeps tx", &testBase, []string{"BEGIN", "SAVEPOINT s", "ROLLBACK TO SAVEPOINT s"}, ActionReset, []string{"ROLLBACK"}},
		{"commit and chain", &testBase, []string{"BEGIN", "COMMIT AND CHAIN"}, ActionReset, []string{"ROLLBACK"}},
		{"failed commit", &testBase, []string{"BEGIN", "INSERT INTO t VALUES (1)", "COMMIT", "<failed>"}, ActionReset, []string{"ROLLBACK"}},
		{"lock wait timeout in tx", &testBase, []string{"BEGIN", "UPDATE t SET a = 1", "<failed>"}, ActionReset, []string{"ROLLBACK"}},
		{"failed driver commit", &testBase, []string{"<begin>", "<commit>", "<failed>"}, ActionReset, []string{"ROLLBACK"}},
		{"ddl commits", &testBase, []string{"BEGIN", "INSERT INTO t VALUES (1)", "CREATE TABLE x (a INT)"}, ActionNone, nil},
		{"failed ddl", &testBase, []string{"BEGIN", "CREATE TABLE (", "<failed>"}, ActionReset, []string{"ROLLBACK"}},

		// Autocommit.
		{"autocommit=0 alone", &testBase, []string{"SET autocommit=0"}, ActionReset, []string{"SET autocommit=1"}},
		{"autocommit=0 insert", &testBase, []string{"SET autocommit=0", "INSERT INTO t VALUES (1)"}, ActionReset, []string{"ROLLBACK", "SET autocommit=1"}},
		{"autocommit=0 commit", &testBase, []string{"SET autocommit=0", "INSERT INTO t VALUES (1)", "COMMIT"}, ActionReset, []string{"SET autocommit=1"}},
		{"autocommit back on commits", &testBase, []string{"SET autocommit=0", "INSERT INTO t VALUES (1)", "SET autocommit=1"}, ActionNone, nil},
		{"autocommit=1 inside begin", &testBase, []string{"BEGIN", "INSERT INTO t VALUES (1)", "SET autocommit=1"}, ActionReset, []string{"ROLLBACK"}},
		// MariaDB 10.11 commits, but refuses writes (1792) until COMMIT or ROLLBACK (found by the
		// differential fuzzer).
		{"autocommit back on in a read-only transaction", &testBase, []string{"START TRANSACTION READ ONLY", "SET autocommit=0", "SET autocommit=1"}, ActionReset, []string{"ROLLBACK"}},
		{"autocommit off begin on", &testBase, []string{"SET autocommit=0", "BEGIN", "INSERT INTO t VALUES (1)", "SET autocommit=1"}, ActionNone, nil},
		{"autocommit failed switch", &testBase, []string{"SET autocommit=0", "INSERT INTO t VALUES (1)", "SET autocommit=1", "<failed>"}, ActionReset, []string{"ROLLBACK", "SET autocommit=1"}},
		{"autocommit unknown", &testBase, []string{"SET autocommit=@v"}, ActionReset, []string{"SET autocommit=1"}},
		{"autocommit unknown insert", &testBase, []string{"SET autocommit=@v", "INSERT INTO t VALUES (1)", "SET autocommit=1"}, ActionReset, []string{"ROLLBACK"}},
		{"autocommit=0 user var", &testBase, []string{"SET autocommit=0", "SET @x = (SELECT a FROM t)"}, ActionReset, []string{"ROLLBACK", "SET @`x`=NULL, autocommit=1"}},
		{"autocommit=0 in one SET with var", &testBase, []string{"SET autocommit=0, @x = 1"}, ActionReset, []string{"ROLLBACK", "SET @`x`=NULL, autocommit=1"}},
		{"autocommit=0 executable comment", &testBase, []string{"/*!40101 SET autocommit=0 */", "SELECT 1"}, ActionReset, []string{"ROLLBACK", "SET autocommit=1"}},
		{"autocommit already on", &testBase, []string{"SET autocommit=1"}, ActionNone, nil},
		{"baseline autocommit off: statement", &acOff, []string{"SELECT 1"}, ActionReset, []string{"ROLLBACK"}},
		{"baseline autocommit off: commit", &acOff, []string{"SELECT 1", "COMMIT"}, ActionNone, nil},
		{"baseline autocommit off: set on", &acOff, []string{"SET autocommit=1"}, ActionReset, []string{"SET autocommit=0"}},

		// Locks.
		{"lock tables", &testBase, []string{"LOCK TABLES t WRITE"}, ActionReset, []string{"UNLOCK TABLES"}},
		{"lock tables commits", &testBase, []string{"BEGIN", "INSERT INTO t VALUES (1)", "LOCK TABLES t WRITE"}, ActionReset, []string{"UNLOCK TABLES"}},
		{"unlock tables", &testBase, []string{"LOCK TABLES t WRITE", "UNLOCK TABLES"}, ActionNone, nil},
		{"unlock commits", &testBase, []string{"SET autocommit=0", "LOCK TABLES t WRITE", "INSERT INTO t VALUES (1)", "UNLOCK TABLES"}, ActionReset, []string{"SET autocommit=1"}},
		{"begin releases table locks", &testBase, []string{"LOCK TABLES t WRITE", "BEGIN", "UNLOCK TABLES"}, ActionReset, []string{"ROLLBACK"}},
		{"unlock without lock", &testBase, []string{"BEGIN", "UNLOCK TABLES"}, ActionReset, []string{"ROLLBACK"}},
		{"get_lock", &testBase, []string{"SELECT GET_LOCK('a', 1)"}, ActionReset, []string{"SELECT RELEASE_ALL_LOCKS()"}},
		{"get_lock in set", &testBase, []string{"SET @l = GET_LOCK('a', 1)"}, ActionReset, []string{"SELECT RELEASE_ALL_LOCKS()", "SET @`l`=NULL"}},

		// Database.
		{"use other", &testBase, []string{"USE other"}, ActionReset, []string{"USE `app`"}},
		{"use back", &testBase, []string{"USE other", "USE `app`"}, ActionNone, nil},
		{"use same", &testBase, []string{"USE app"}, ActionNone, nil},
		{"use quoted other", &testBase, []string{"USE `a``pp`"}, ActionReset, []string{"USE `app`"}},
		{"use without baseline db", &noDB, []string{"USE other"}, ActionDiscard, nil},
		{"drop database", &testBase, []string{"DROP DATABASE app"}, ActionReset, []string{"USE `app`"}},

		// Isolation and access mode.
		{"session isolation", &testBase, []string{"SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE"}, ActionReset, []string{setTxRR}},
		{"next-tx isolation", &testBase, []string{"SET TRANSACTION ISOLATION LEVEL READ COMMITTED"}, ActionReset, []string{setTxRR}},
		{"transaction_isolation var", &testBase, []string{"SET @@session.transaction_isolation = 'SERIALIZABLE'"}, ActionReset, []string{setTxRR}},
		{"read only", &testBase, []string{"SET SESSION TRANSACTION READ ONLY"}, ActionReset, []string{setTxRR}},
		{"tx_read_only", &testBase, []string{"SET tx_read_only = 1"}, ActionReset, []string{setTxRR}},
		{"autocommit and isolation", &testBase, []string{"SET autocommit=0", "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE"}, ActionReset, []string{setBothRR}},
		{"baseline read only", &ro, []string{"SET SESSION TRANSACTION READ WRITE"}, ActionReset, []string{"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"}},
		{"baseline isolation unknown", &badIso, []string{"SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE"}, ActionDiscard, nil},

		// Temporary tables.
		{"temp table", &testBase, []string{"CREATE TEMPORARY TABLE tt (a INT)"}, ActionReset, []string{"DROP TEMPORARY TABLE IF EXISTS tt"}},
		{"temp tables", &testBase, []string{"CREATE TEMPORARY TABLE tt (a INT)", "CREATE TEMPORARY TABLE IF NOT EXISTS `db`.`t2` LIKE x", "CREATE TEMPORARY TABLE tt (a INT)"}, ActionReset, []string{"DROP TEMPORARY TABLE IF EXISTS tt, `db`.`t2`"}},
		{"temp table in tx", &testBase, []string{"BEGIN", "CREATE TEMPORARY TABLE tt (a INT)"}, ActionReset, []string{"ROLLBACK", "DROP TEMPORARY TABLE IF EXISTS tt"}},
		{"temp table then ddl keeps tx", &testBase, []string{"CREATE TEMPORARY TABLE tt (a INT)", "BEGIN", "TRUNCATE TABLE tt"}, ActionReset, []string{"ROLLBACK", "DROP TEMPORARY TABLE IF EXISTS tt"}},
		{"temp table dropped", &testBase, []string{"CREATE TEMPORARY TABLE tt (a INT)", "DROP TEMPORARY TABLE tt"}, ActionReset, []string{"DROP TEMPORARY TABLE IF EXISTS tt"}},
		{"temp table renamed", &testBase, []string{"CREATE TEMPORARY TABLE tt (a INT)", "ALTER TABLE tt RENAME TO uu"}, ActionDiscard, nil},
		{"temp table after use", &testBase, []string{"USE other", "CREATE TEMPORARY TABLE tt (a INT)"}, ActionDiscard, nil},
		{"qualified temp table after use", &testBase, []string{"USE other", "CREATE TEMPORARY TABLE other.tt (a INT)"}, ActionReset, []string{"USE `app`", "DROP TEMPORARY TABLE IF EXISTS other.tt"}},
		{"temp table name unparsed", &testBase, []string{"CREATE TEMPORARY TABLE \"tt\" (a INT)"}, ActionDiscard, nil},

		// XA.
		{"xa committed", &testBase, []string{"XA START 'x'", "INSERT INTO t VALUES (1)", "XA END 'x'", "XA PREPARE 'x'", "XA COMMIT 'x'"}, ActionNone, nil},
		{"xa one phase", &testBase, []string{"XA START 'x'", "XA END 'x'", "XA COMMIT 'x' ONE PHASE"}, ActionNone, nil},
		{"xa rolled back", &testBase, []string{"XA BEGIN 'x'", "XA END 'x'", "XA ROLLBACK 'x'"}, ActionNone, nil},
		{"xa open", &testBase, []string{"XA START 'x'"}, ActionDiscard, nil},
		{"xa idle", &testBase, []string{"XA START 'x'", "XA END 'x'"}, ActionDiscard, nil},
		{"xa other xid", &testBase, []string{"XA START 'x'", "XA END 'x'", "XA ROLLBACK 'y'"}, ActionDiscard, nil},
		{"xa rollback does not end", &testBase, []string{"XA START 'x'", "ROLLBACK"}, ActionDiscard, nil},

		// Unknown state.
		{"set other", &testBase, []string{"SET foreign_key_checks = 0"}, ActionDiscard, nil},
		{"set variable without a recorded value", &testBase, []string{"SET sql_mode = ''"}, ActionDiscard, nil},
		{"call", &testBase, []string{"CALL p()"}, ActionDiscard, nil},
		{"prepare", &testBase, []string{"PREPARE s FROM 'SELECT 1'"}, ActionDiscard, nil},
		{"multi", &testBase, []string{"SELECT 1; SELECT 2"}, ActionDiscard, nil},
		{"raw", &testBase, []string{"<unknown>"}, ActionDiscard, nil},
		{"unknown then done", &testBase, []string{"<unknown>", "<done>"}, ActionNone, nil},

		// Everything at once, in plan order.
		{"all", &testBase, []string{
			"SET autocommit=0", "INSERT INTO t VALUES (1)", "LOCK TABLES t WRITE", "SELECT GET_LOCK('a', 1)",
			"USE other", "CREATE TEMPORARY TABLE app.tt (a INT)", "SET SESSION TRANSACTION READ ONLY",
		}, ActionReset, []string{
			"ROLLBACK", "UNLOCK TABLES", "SELECT RELEASE_ALL_LOCKS()", "USE `app`",
			"DROP TEMPORARY TABLE IF EXISTS app.tt", setBothRR,
		}},

		// The zero Tracker: no baseline.
		{"zero: nothing", nil, nil, ActionNone, nil},
		{"zero: statement", nil, []string{"SELECT 1"}, ActionReset, []string{"ROLLBACK"}},
		{"zero: begin commit", nil, []string{"BEGIN", "COMMIT"}, ActionNone, nil},
		{"zero: lock", nil, []string{"LOCK TABLES t READ"}, ActionReset, []string{"UNLOCK TABLES"}},
		{"zero: autocommit", nil, []string{"SET autocommit=1"}, ActionDiscard, nil},
		{"zero: use", nil, []string{"USE app"}, ActionDiscard, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr Tracker
			if c.base != nil {
				tr.Reset(*c.base)
			}
			run(&tr, c.ops)
			p := tr.Plan()
			if p.Action != c.act || !reflect.DeepEqual(p.Statements, c.stmts) {
				t.Fatalf("Plan() = %v %q (%s), want %v %q", p.Action, p.Statements, p.Reason, c.act, c.stmts)
			}
			if tr.Clean() != (c.act == ActionNone) {
				t.Errorf("Clean() = %v with plan %v", tr.Clean(), p.Action)
			}
			if (p.Reason == "") != (c.act == ActionNone) {
				t.Errorf("Reason = %q with plan %v", p.Reason, p.Action)
			}
			if c.act == ActionReset {
				tr.Done()
				if !tr.Clean() || tr.Plan().Action != ActionNone {
					t.Errorf("after Done: Clean() = %v, Plan() = %v", tr.Clean(), tr.Plan())
				}
			}
		})
	}
}

func TestTrackerInTx(t *testing.T) {
	cases := []struct {
		ops  []string
		want bool
	}{
		{nil, false},
		{[]string{"BEGIN"}, true},
		{[]string{"BEGIN", "COMMIT"}, false},
		{[]string{"<begin>"}, true},
		{[]string{"SET autocommit=0"}, false},
		{[]string{"SET autocommit=0", "SELECT 1"}, true},
		{[]string{"XA START 'x'"}, true},
		{[]string{"LOCK TABLES t READ"}, false},
	}
	for _, c := range cases {
		tr := NewTracker(testBase)
		run(tr, c.ops)
		if got := tr.InTx(); got != c.want {
			t.Errorf("%q: InTx() = %v, want %v", c.ops, got, c.want)
		}
	}
}

func TestTrackerReadOnlyTx(t *testing.T) {
	ro := testBase
	ro.ReadOnly = true
	cases := []struct {
		base Baseline
		ops  []string
		want bool
	}{
		{testBase, nil, false},
		{testBase, []string{"<begin>"}, false},
		{testBase, []string{"<begin ro>"}, true},
		{testBase, []string{"<begin ro>", "<commit>"}, false},
		{testBase, []string{"START TRANSACTION READ ONLY"}, true},
		{testBase, []string{"START TRANSACTION READ ONLY", "COMMIT"}, false},
		{testBase, []string{"SET SESSION TRANSACTION READ ONLY"}, true},
		{testBase, []string{"SET TRANSACTION READ ONLY", "INSERT INTO t VALUES (1)"}, true},
		{testBase, []string{"SET SESSION TRANSACTION READ ONLY", "START TRANSACTION READ WRITE"}, false},
		{testBase, []string{"SET SESSION transaction_read_only = @v"}, true},
		{testBase, []string{"SET SESSION TRANSACTION READ ONLY", "<done>"}, false},
		{ro, nil, true},
		{ro, []string{"SET SESSION tx_read_only = 0"}, false},
		{ro, []string{"<begin>"}, true},
	}
	for _, c := range cases {
		tr := NewTracker(c.base)
		run(tr, c.ops)
		if got := tr.ReadOnlyTx(); got != c.want {
			t.Errorf("base ro=%v %q: ReadOnlyTx() = %v, want %v", c.base.ReadOnly, c.ops, got, c.want)
		}
	}
	var zero Tracker
	if zero.ReadOnlyTx() {
		t.Error("zero Tracker: ReadOnlyTx() = true")
	}
}

func TestTrackerTxIsolation(t *testing.T) {
	tr := NewTracker(testBase)
	tr.Begin(driver.TxOptions{Isolation: driver.IsolationLevel(4)})
	if got := tr.TxIsolation(); got != 4 {
		t.Errorf("TxIsolation() = %v, want 4", got)
	}
	tr.Commit()
	tr.Done()
	if got := tr.TxIsolation(); got != 0 {
		t.Errorf("after Done: TxIsolation() = %v, want 0", got)
	}
}

// TestTrackerBaselineQuoting checks that the baseline's sql_mode decides
// how a backslash in a literal lexes.
func TestTrackerBaselineQuoting(t *testing.T) {
	q := "INSERT INTO t VALUES ('it\\'s; fine')"
	b := testBase
	tr := NewTracker(b)
	tr.Statement(q)
	tr.InsertID(0) // the Exec reported no generated id
	if !tr.Clean() {
		t.Errorf("backslash mode: %q not clean: %v", q, tr.Plan())
	}
	b.Quoting = QuotingNoBackslash
	tr.Reset(b)
	tr.Statement(q)
	if tr.Plan().Action != ActionDiscard {
		t.Errorf("no-backslash mode: %q: Plan() = %v, want discard", q, tr.Plan())
	}
	if got, ok := tr.Baseline(); !ok || got != b {
		t.Errorf("Baseline() = %v, %v", got, ok)
	}
	var zero Tracker
	if _, ok := zero.Baseline(); ok {
		t.Error("zero Tracker has a baseline")
	}
}

func TestTrackerTempLimit(t *testing.T) {
	tr := NewTracker(testBase)
	for i := 0; i < maxTemps; i++ {
		tr.Statement("CREATE TEMPORARY TABLE t" + itoa(i) + " (a INT)")
	}
	if p := tr.Plan(); p.Action != ActionReset || len(p.Statements) != 1 || strings.Count(p.Statements[0], ",") != maxTemps-1 {
		t.Fatalf("Plan() = %v", p)
	}
	tr.Statement("CREATE TEMPORARY TABLE one_more (a INT)")
	if p := tr.Plan(); p.Action != ActionDiscard {
		t.Fatalf("beyond maxTemps: Plan() = %v", p)
	}
	tr.Done()
	if len(tr.temps) != 0 || !tr.Clean() {
		t.Fatalf("after Done: temps %q, clean %v", tr.temps, tr.Clean())
	}
}

func TestPlanReason(t *testing.T) {
	tr := NewTracker(testBase)
	run(tr, []string{"BEGIN", "LOCK TABLES t READ", "BEGIN"})
	if got, want := tr.Plan().Reason, "open transaction, table locks"; got != want {
		t.Errorf("Reason = %q, want %q", got, want)
	}
	tr.Statement("CALL p()")
	tr.Statement("SET foreign_key_checks = 0")
	if got, want := tr.Plan().Reason, "stored procedure called (CALL)"; got != want {
		t.Errorf("Reason = %q, want %q (the first cause)", got, want)
	}
}

func TestActionString(t *testing.T) {
	for a, want := range map[Action]string{ActionNone: "none", ActionReset: "reset", ActionDiscard: "discard", 7: "Action(7)"} {
		if got := a.String(); got != want {
			t.Errorf("Action(%d).String() = %q, want %q", a, got, want)
		}
	}
}

func TestBaselineFromRow(t *testing.T) {
	row := []driver.Value{[]byte("app"), []byte("1"), []byte("STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES"), []byte("READ-COMMITTED"), []byte("0")}
	b, err := BaselineFromRow(row)
	want := Baseline{Database: "app", Autocommit: true, Isolation: "READ-COMMITTED", Quoting: QuotingNoBackslash}
	if err != nil || b != want {
		t.Fatalf("BaselineFromRow = %+v, %v; want %+v", b, err, want)
	}
	row = []driver.Value{nil, int64(0), "", "SERIALIZABLE", int64(1)}
	b, err = BaselineFromRow(row)
	want = Baseline{Isolation: "SERIALIZABLE", ReadOnly: true, Quoting: QuotingBackslash}
	if err != nil || b != want {
		t.Fatalf("BaselineFromRow = %+v, %v; want %+v", b, err, want)
	}
	row = []driver.Value{nil, true, nil, nil, uint64(0)}
	b, err = BaselineFromRow(row)
	want = Baseline{Autocommit: true}
	if err != nil || b != want {
		t.Fatalf("BaselineFromRow = %+v, %v; want %+v", b, err, want)
	}
	for _, bad := range [][]driver.Value{
		{nil},
		{int64(1), int64(1), nil, nil, int64(0)},
		{nil, nil, nil, nil, int64(0)},
		{nil, []byte("maybe"), nil, nil, int64(0)},
		{nil, int64(1), 3.5, nil, int64(0)},
		{nil, int64(1), nil, 3.5, int64(0)},
		{nil, int64(1), nil, nil, 3.5},
	} {
		if _, err := BaselineFromRow(bad); err == nil {
			t.Errorf("BaselineFromRow(%v): no error", bad)
		}
	}
}

func TestNormalIsolation(t *testing.T) {
	for _, s := range []string{"REPEATABLE-READ", "repeatable read", " Repeatable-Read "} {
		if name, sql, ok := normalIsolation(s); !ok || name != "REPEATABLE-READ" || sql != "REPEATABLE READ" {
			t.Errorf("normalIsolation(%q) = %q, %q, %v", s, name, sql, ok)
		}
	}
	for _, s := range []string{"", "SNAPSHOT", "READ-COMMITTED'; DROP TABLE t; --"} {
		if _, _, ok := normalIsolation(s); ok {
			t.Errorf("normalIsolation(%q) ok", s)
		}
	}
}

func TestUseEscapes(t *testing.T) {
	tr := NewTracker(Baseline{Database: "we`ird", Autocommit: true, Isolation: "SERIALIZABLE"})
	tr.Statement("USE other")
	if p := tr.Plan(); len(p.Statements) != 1 || p.Statements[0] != "USE `we``ird`" {
		t.Fatalf("Plan() = %v", p)
	}
}
