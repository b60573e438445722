package txstate

import (
	"database/sql/driver"
	"reflect"
	"testing"
)

// varBase is testBase with every restorable variable recorded, as on MariaDB 10.11 through
// go-sql-driver/mysql.
var varBase = func() Baseline {
	b := testBase
	for _, kv := range [][2]string{
		{"time_zone", "SYSTEM"}, {"sql_mode", "STRICT_TRANS_TABLES"},
		{"character_set_client", "utf8mb4"}, {"character_set_results", "utf8mb4"},
		{"character_set_connection", "utf8mb4"}, {"collation_connection", "utf8mb4_general_ci"},
		{"max_statement_time", "0.000000"}, {"wait_timeout", "28800"}, {"interactive_timeout", "28800"},
	} {
		if !b.Variables.Set(kv[0], kv[1]) {
			panic(kv[0])
		}
	}
	return b
}()

// setCharsets restores the client's, results' and connection's character sets and the
// collation: NAMES, so that the client's collation (which a bound parameter takes) is the
// baseline's too, and the collation again (the embedded server ignores NAMES' COLLATE).
const setCharsets = "SET NAMES 'utf8mb4' COLLATE 'utf8mb4_general_ci', collation_connection='utf8mb4_general_ci'"

func TestTrackerVariables(t *testing.T) {
	isoTail := " /*M!, SESSION tx_isolation='REPEATABLE-READ', SESSION tx_read_only=0 */" +
		" /*!50720 , SESSION transaction_isolation='REPEATABLE-READ', SESSION transaction_read_only=0 */"
	cases := []struct {
		name   string
		ops    []string
		action Action
		stmts  []string
	}{
		{"time_zone", []string{"SET time_zone = '+00:00'"}, ActionReset, []string{"SET time_zone='SYSTEM'"}},
		{"time_zone then DEFAULT", []string{"SET time_zone = '+00:00'", "SET time_zone = DEFAULT"}, ActionReset, []string{"SET time_zone='SYSTEM'"}},
		{"time_zone set to the baseline", []string{"SET @@session.time_zone = 'SYSTEM'"}, ActionNone, nil},
		{"time_zone set and set back", []string{"SET time_zone = '+00:00'", "SET time_zone = \"SYSTEM\""}, ActionNone, nil},
		{"time_zone other case", []string{"SET time_zone = 'system'"}, ActionReset, []string{"SET time_zone='SYSTEM'"}},
		{"sql_mode", []string{"SET sql_mode = 'ANSI'"}, ActionReset, []string{"SET sql_mode='STRICT_TRANS_TABLES'"}},
		{"sql_mode expression", []string{"SET sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')"}, ActionReset, []string{"SET sql_mode='STRICT_TRANS_TABLES'"}},
		{"sql_mode to the baseline", []string{"SET SESSION sql_mode = 'strict_trans_tables'"}, ActionNone, nil},
		{"NAMES of the baseline charset", []string{"SET NAMES utf8mb4"}, ActionReset, []string{setCharsets}},
		{"NAMES of the baseline charset and collation", []string{"SET NAMES utf8mb4 COLLATE utf8mb4_general_ci"}, ActionNone, nil},
		{"NAMES of the baseline charset, another collation", []string{"SET NAMES utf8mb4 COLLATE utf8mb4_bin"}, ActionReset, []string{setCharsets}},
		{"NAMES with the baseline collation", []string{"SET NAMES 'utf8mb4' COLLATE 'utf8mb4_general_ci'"}, ActionNone, nil},
		{"NAMES latin1", []string{"SET NAMES latin1"}, ActionReset, []string{setCharsets}},
		{"NAMES DEFAULT", []string{"SET NAMES DEFAULT"}, ActionReset, []string{setCharsets}},
		{"CHARACTER SET", []string{"SET CHARACTER SET utf8mb4"}, ActionReset, []string{setCharsets}},
		{"NAMES latin1 then back", []string{"SET NAMES latin1", "SET NAMES utf8mb4 COLLATE utf8mb4_general_ci"}, ActionNone, nil},
		{"character_set_results NULL", []string{"SET character_set_results = NULL"}, ActionReset, []string{"SET character_set_results='utf8mb4'"}},
		{"character_set_connection", []string{"SET character_set_connection = utf8mb4"}, ActionReset, []string{"SET collation_connection='utf8mb4_general_ci'"}},
		{"collation_connection", []string{"SET collation_connection = utf8mb4_bin"}, ActionReset, []string{"SET character_set_connection='utf8mb4', collation_connection='utf8mb4_general_ci'"}},
		{"max_statement_time", []string{"SET max_statement_time = 5"}, ActionReset, []string{"SET max_statement_time=0.000000"}},
		{"max_statement_time to the baseline", []string{"SET max_statement_time = 0"}, ActionNone, nil},
		{"max_execution_time not recorded", []string{"SET max_execution_time = 1000"}, ActionDiscard, nil},
		{"wait_timeout", []string{"SET SESSION wait_timeout = 60"}, ActionReset, []string{"SET wait_timeout=28800"}},
		{"wait_timeout to the baseline", []string{"SET wait_timeout = 28800"}, ActionNone, nil},
		{"interactive_timeout", []string{"SET @@local.interactive_timeout = 60"}, ActionReset, []string{"SET interactive_timeout=28800"}},
		{"several in one", []string{"SET NAMES latin1, time_zone = '+00:00', @a = 1"}, ActionReset, []string{setCharsets + ", time_zone='SYSTEM', @`a`=NULL"}},
		{"several in turn", []string{"SET wait_timeout = 5", "SET time_zone = '+00:00'"}, ActionReset, []string{"SET time_zone='SYSTEM', wait_timeout=28800"}},
		{"with autocommit", []string{"SET autocommit = 0", "SET time_zone = '+00:00'"}, ActionReset, []string{"SET time_zone='SYSTEM', autocommit=1"}},
		{"with autocommit in one", []string{"SET time_zone = '+00:00', autocommit = 0"}, ActionReset, []string{"SET time_zone='SYSTEM', autocommit=1"}},
		{"with isolation", []string{"SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", "SET time_zone = '+00:00'"}, ActionReset, []string{"SET time_zone='SYSTEM'" + isoTail}},
		{"with autocommit and isolation", []string{"SET autocommit = 0, time_zone = '+00:00', tx_read_only = 1"}, ActionReset, []string{"SET time_zone='SYSTEM', autocommit=1" + isoTail}},
		{"in a transaction", []string{"BEGIN", "SET time_zone = '+00:00'"}, ActionReset, []string{"ROLLBACK", "SET time_zone='SYSTEM'"}},
		{"expression with autocommit off", []string{"SET autocommit = 0", "SET time_zone = (SELECT tz FROM prefs LIMIT 1)"}, ActionReset, []string{"ROLLBACK", "SET time_zone='SYSTEM', autocommit=1"}},
		{"failed set back", []string{"SET time_zone = '+00:00'", "SET time_zone = 'SYSTEM'", "<failed>"}, ActionReset, []string{"SET time_zone='SYSTEM'"}},
		{"failed set", []string{"SET time_zone = 'Mars/Olympus'", "<failed>"}, ActionReset, []string{"SET time_zone='SYSTEM'"}},
		{"done", []string{"SET time_zone = '+00:00'", "<done>"}, ActionNone, nil},
		{"global", []string{"SET GLOBAL time_zone = '+00:00'"}, ActionDiscard, nil},
		{"with an unrecorded variable", []string{"SET time_zone = '+00:00', foreign_key_checks = 0"}, ActionDiscard, nil},
		{"unknown wins", []string{"SET time_zone = '+00:00'", "CALL p()"}, ActionDiscard, nil},
	}
	for _, c := range cases {
		tr := NewTracker(varBase)
		run(tr, c.ops)
		p := tr.Plan()
		if p.Action != c.action || !reflect.DeepEqual(p.Statements, c.stmts) && len(c.stmts)+len(p.Statements) > 0 {
			t.Errorf("%s: Plan() = %v %q (%s); want %v %q", c.name, p.Action, p.Statements, p.Reason, c.action, c.stmts)
			continue
		}
		if tr.Clean() != (c.action == ActionNone) {
			t.Errorf("%s: Clean() = %v with plan %v", c.name, tr.Clean(), p.Action)
		}
		tr.Done()
		if !tr.Clean() || tr.st.quoting != varBase.Quoting {
			t.Errorf("%s: after Done: clean %v, quoting %v", c.name, tr.Clean(), tr.st.quoting)
		}
	}
}

// A SET sql_mode changes how later statements lex until the release restores it.
func TestTrackerSQLModeQuoting(t *testing.T) {
	q := "INSERT INTO t VALUES ('it\\'s; fine')"
	tr := NewTracker(varBase)
	tr.Statement(q)
	tr.InsertID(0) // the Exec reported no generated id
	if !tr.Clean() {
		t.Fatalf("baseline mode: %q not clean", q)
	}
	for _, c := range []struct {
		set     string
		discard bool
	}{
		{"SET sql_mode = 'NO_BACKSLASH_ESCAPES'", true},
		{"SET sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')", true}, // unknown: every mode
		{"SET sql_mode = 'ANSI'", false},
		{"SET sql_mode = 'STRICT_TRANS_TABLES'", false},
	} {
		tr.Done()
		tr.Statement(c.set)
		tr.Statement(q)
		if got := tr.Plan().Action == ActionDiscard; got != c.discard {
			t.Errorf("after %s: %q discards: %v, want %v", c.set, q, got, c.discard)
		}
	}
	// A failed SET sql_mode leaves the mode unknown.
	tr.Done()
	tr.Statement("SET sql_mode = 'ANSI'")
	tr.Failed()
	if tr.st.quoting != QuotingUnknown {
		t.Errorf("after a failed SET sql_mode: quoting %v, want unknown", tr.st.quoting)
	}
}

// Values that cannot be written back safely, and a baseline without variables, discard.
func TestTrackerVariablesNotRestorable(t *testing.T) {
	b := varBase
	b.Variables.Set("time_zone", "it's")
	b.Variables.Set("wait_timeout", "1e3")
	tr := NewTracker(b)
	for _, q := range []string{"SET time_zone = '+00:00'", "SET wait_timeout = 5"} {
		tr.Done()
		tr.Statement(q)
		if p := tr.Plan(); p.Action != ActionDiscard {
			t.Errorf("%s with an unwritable baseline value: Plan() = %v", q, p)
		}
	}
	tr.Done()
	tr.Statement("SET sql_mode = ''")
	if p := tr.Plan(); p.Action != ActionReset {
		t.Errorf("sql_mode: Plan() = %v", p)
	}
	var zero Tracker
	zero.Statement("SET time_zone = 'SYSTEM'")
	if p := zero.Plan(); p.Action != ActionDiscard {
		t.Errorf("zero Tracker: Plan() = %v, want discard", p)
	}
}

func TestTrackerVariablesAllocs(t *testing.T) {
	tr := NewTracker(varBase)
	tr.Statement("SET NAMES latin1, time_zone = '+00:00'")
	_ = tr.Plan()
	tr.Done()
	n := testing.AllocsPerRun(100, func() {
		tr.Statement("SET NAMES latin1, time_zone = '+00:00'")
		if tr.Plan().Action != ActionReset {
			t.Fatal("no reset")
		}
		tr.Done()
	})
	if n != 0 {
		t.Errorf("SET and Plan of the same variables: %v allocs per release, want 0", n)
	}
}

func TestBaselineFromRowVariables(t *testing.T) {
	row := []driver.Value{
		[]byte("app"), int64(1), []byte("ANSI_QUOTES"), []byte("READ-COMMITTED"), int64(0),
		[]byte("+00:00"), []byte("latin1"), nil, []byte("latin1"), []byte("latin1_swedish_ci"),
		int64(600), uint64(700), []byte("max_execution_time"), int64(1500),
	}
	b, err := BaselineFromRow(row)
	if err != nil {
		t.Fatal(err)
	}
	want := "character_set_client=latin1 character_set_results=NULL character_set_connection=latin1 " +
		"collation_connection=latin1_swedish_ci time_zone=+00:00 sql_mode=ANSI_QUOTES max_execution_time=1500 " +
		"wait_timeout=600 interactive_timeout=700"
	if got := b.Variables.String(); got != want || b.Quoting != QuotingANSI {
		t.Fatalf("Variables = %s (quoting %v)\nwant        %s", got, b.Quoting, want)
	}
	tr := NewTracker(b)
	tr.Statement("SET NAMES utf8mb4, max_execution_time = 5")
	p := tr.Plan()
	if want := "SET NAMES 'latin1' COLLATE 'latin1_swedish_ci', character_set_results=NULL, collation_connection='latin1_swedish_ci', max_execution_time=1500"; len(p.Statements) != 1 || p.Statements[0] != want {
		t.Fatalf("Plan() = %q\nwant %q", p.Statements, want)
	}
	tr.Done()
	tr.Statement("SET max_statement_time = 5") // not this server's name
	if p := tr.Plan(); p.Action != ActionDiscard {
		t.Fatalf("Plan() = %v, want discard", p)
	}
	if v, ok := b.Variables.Get("TIME_ZONE"); !ok || v != "+00:00" {
		t.Fatalf("Get(TIME_ZONE) = %q, %v", v, ok)
	}
	if _, ok := b.Variables.Get("max_statement_time"); ok {
		t.Fatal("Get(max_statement_time) found a value")
	}
	var v Variables
	if v.Set("max_heap_table_size", "0") {
		t.Fatal("Set accepted a variable that is not restored")
	}
	for _, bad := range [][]driver.Value{
		append(append([]driver.Value{}, row[:13]...), 3.5i),
		append(append([]driver.Value{}, row[:5]...), make([]driver.Value, 8)...),
	} {
		if _, err := BaselineFromRow(bad); err == nil {
			t.Errorf("BaselineFromRow(%v): no error", bad)
		}
	}
}

// On a connection whose collation is not its character set's default (go-sql-driver/mysql's
// collation parameter, or a server's collation_server), assigning character_set_connection
// also sets the collation, to the character set's default: a reset that restores the
// character set must restore the collation after it, and a collation set back to the
// baseline's brings the character set back with it (a collation names its character set).
func TestTrackerConnectionCollation(t *testing.T) {
	b := varBase
	b.Variables.Set("collation_connection", "utf8mb4_unicode_ci")
	both := []string{"SET character_set_connection='utf8mb4', collation_connection='utf8mb4_unicode_ci'"}
	cases := []struct {
		name   string
		ops    []string
		action Action
		stmts  []string
	}{
		{"collation already there", []string{"SET collation_connection = utf8mb4_unicode_ci"}, ActionNone, nil},
		{"character set, then the collation back", []string{"SET character_set_connection = latin1", "SET collation_connection = 'utf8mb4_unicode_ci'"}, ActionNone, nil},
		{"both in one SET", []string{"SET character_set_connection = latin1, @@session.collation_connection = utf8mb4_unicode_ci"}, ActionNone, nil},
		{"collation back, then the character set", []string{"SET collation_connection = utf8mb4_unicode_ci, character_set_connection = latin1"}, ActionReset, both},
		{"NAMES, then the connection collation back", []string{"SET NAMES latin1", "SET collation_connection = utf8mb4_unicode_ci"}, ActionReset,
			[]string{"SET NAMES 'utf8mb4' COLLATE 'utf8mb4_unicode_ci', collation_connection='utf8mb4_unicode_ci'"}},
		{"character set of the baseline", []string{"SET character_set_connection = utf8mb4"}, ActionReset, []string{"SET collation_connection='utf8mb4_unicode_ci'"}},
		{"another character set", []string{"SET character_set_connection = latin1"}, ActionReset, both},
		{"another collation", []string{"SET collation_connection = utf8mb4_bin"}, ActionReset, both},
		{"collation expression", []string{"SET collation_connection = @c"}, ActionReset, both},
	}
	for _, c := range cases {
		tr := NewTracker(b)
		run(tr, c.ops)
		p := tr.Plan()
		if p.Action != c.action || !reflect.DeepEqual(p.Statements, c.stmts) && len(c.stmts)+len(p.Statements) > 0 {
			t.Errorf("%s: Plan() = %v %q (%s); want %v %q", c.name, p.Action, p.Statements, p.Reason, c.action, c.stmts)
		}
	}
	// A character set restored alone, with a collation that cannot be written back: discard.
	nb := b
	nb.Variables.Set("collation_connection", "it's")
	tr := NewTracker(nb)
	tr.Statement("SET character_set_connection = latin1, collation_connection = utf8mb4_bin")
	tr.Statement("SET collation_connection = utf8mb4_bin, character_set_connection = utf8mb4")
	if p := tr.Plan(); p.Action != ActionDiscard {
		t.Errorf("collation not restorable: Plan() = %v %q; want a discard", p.Action, p.Statements)
	}
}

// The per-request variables (GORM's SET FOREIGN_KEY_CHECKS = 0 … = 1, a lock wait timeout, a
// GROUP_CONCAT length) are restored with the one SET, or need nothing when set back.
func TestTrackerPerRequestVariables(t *testing.T) {
	row := []driver.Value{
		[]byte("app"), int64(1), []byte("STRICT_TRANS_TABLES"), []byte("REPEATABLE-READ"), int64(0),
		[]byte("SYSTEM"), []byte("utf8mb4"), []byte("utf8mb4"), []byte("utf8mb4"), []byte("utf8mb4_general_ci"), int64(28800), int64(28800),
		[]byte("max_statement_time"), []byte("0.000000"),
		int64(1), int64(1), int64(50), int64(86400), int64(1048576), uint64(18446744073709551615), int64(4), int64(0),
		int64(1), int64(0), int64(0), int64(1024), int64(30), int64(60), []byte("en_US"),
	}
	if len(row) != BaselineColumns {
		t.Fatalf("row has %d columns, BaselineColumns is %d", len(row), BaselineColumns)
	}
	b, err := BaselineFromRow(row)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		ops   []string
		act   Action
		stmts []string
	}{
		{"GORM DropTable", []string{"SET FOREIGN_KEY_CHECKS = 0", "DROP TABLE IF EXISTS users", "SET FOREIGN_KEY_CHECKS = 1"}, ActionNone, nil},
		{"foreign_key_checks left off", []string{"SET foreign_key_checks = 0"}, ActionReset, []string{"SET foreign_key_checks=1"}},
		{"ON", []string{"SET foreign_key_checks = ON"}, ActionReset, []string{"SET foreign_key_checks=1"}},
		{"several", []string{"SET unique_checks = 0, innodb_lock_wait_timeout = 5, @@session.group_concat_max_len = 4"}, ActionReset,
			[]string{"SET unique_checks=1, innodb_lock_wait_timeout=50, group_concat_max_len=1048576"}},
		{"sql_select_limit", []string{"SET sql_select_limit = 18446744073709551614"}, ActionReset, []string{"SET sql_select_limit=18446744073709551615"}},
		{"sql_select_limit back", []string{"SET sql_select_limit = 1", "SET sql_select_limit = 18446744073709551615"}, ActionNone, nil},
		{"lc_time_names", []string{"SET lc_time_names = 'de_DE'"}, ActionReset, []string{"SET lc_time_names='en_US'"}},
		{"the rest", []string{"SET lock_wait_timeout = 5, div_precision_increment = 2, sql_safe_updates = 1, sql_notes = 0, sql_warnings = 1, " +
			"sql_auto_is_null = 1, max_sort_length = 8, net_read_timeout = 5, net_write_timeout = 5"}, ActionReset,
			[]string{"SET lock_wait_timeout=86400, div_precision_increment=4, sql_safe_updates=0, sql_notes=1, sql_warnings=0, " +
				"sql_auto_is_null=0, max_sort_length=1024, net_read_timeout=30, net_write_timeout=60"}},
		{"not restored", []string{"SET max_heap_table_size = 65536"}, ActionDiscard, nil},
	}
	for _, c := range cases {
		tr := NewTracker(b)
		run(tr, c.ops)
		p := tr.Plan()
		if p.Action != c.act || !reflect.DeepEqual(p.Statements, c.stmts) {
			t.Errorf("%s: Plan() = %v %q (%s), want %v %q", c.name, p.Action, p.Statements, p.Reason, c.act, c.stmts)
		}
	}
	// A row of the earlier 14 columns records none of them: a SET of one discards.
	b14, err := BaselineFromRow(row[:14])
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTracker(b14)
	tr.Statement("SET foreign_key_checks = 0")
	if p := tr.Plan(); p.Action != ActionDiscard {
		t.Errorf("14-column baseline: Plan() = %v, want discard", p)
	}
}
