package txstate_test

import (
	"database/sql/driver"
	"fmt"

	"github.com/sqlpool/sqlpool/txstate"
)

func ExampleClassify() {
	for _, q := range []string{
		"SELECT a FROM t WHERE id = ?",
		"/* app */ begin work",
		"SET autocommit = 0",
		"SET @last = 42",
		"SELECT GET_LOCK('job', 10)",
		"/*!40101 SET NAMES utf8mb4 */",
		"SELECT 1; SELECT 2",
	} {
		fmt.Printf("%-15s %s\n", txstate.Classify(q), q)
	}
	// Output:
	// query           SELECT a FROM t WHERE id = ?
	// begin           /* app */ begin work
	// set-autocommit  SET autocommit = 0
	// set-user-var    SET @last = 42
	// user-lock       SELECT GET_LOCK('job', 10)
	// set-variable    /*!40101 SET NAMES utf8mb4 */
	// multi           SELECT 1; SELECT 2
}

// A pool's release path: most borrowers leave nothing behind, and the check
// costs a field read; a borrower that left a transaction open gets one
// ROLLBACK.
func ExampleTracker() {
	var t txstate.Tracker // embedded in the pool's connection
	t.Reset(txstate.Baseline{Database: "app", Autocommit: true, Isolation: "REPEATABLE-READ"})

	// A borrower that committed its transaction.
	t.Begin(driver.TxOptions{})
	t.Statement("UPDATE account SET balance = balance - 10 WHERE id = ?")
	t.Commit()
	fmt.Println("clean:", t.Clean())

	// A borrower that returned the connection mid-transaction.
	t.Statement("START TRANSACTION")
	t.Statement("INSERT INTO audit (msg) VALUES (?)")
	t.InsertID(0) // the Exec's result: no AUTO_INCREMENT id generated
	if !t.Clean() {
		p := t.Plan()
		fmt.Println(p.Action, p.Statements, "-", p.Reason)
		// The pool runs p.Statements within its ValidationTimeout, then:
		t.Done()
	}
	fmt.Println("clean:", t.Clean())
	// Output:
	// clean: true
	// reset [ROLLBACK] - open transaction
	// clean: true
}

func ExampleTracker_Plan() {
	b := txstate.Baseline{Database: "app", Autocommit: true, Isolation: "REPEATABLE-READ"}
	b.Variables.Set("time_zone", "SYSTEM") // as BaselineFromRow records it
	b.Variables.Set("sql_mode", "STRICT_TRANS_TABLES")
	t := txstate.NewTracker(b)
	t.Statement("SET autocommit = 0")
	t.Statement("LOCK TABLES inventory WRITE")
	t.Statement("USE reporting")
	t.Statement("CREATE TEMPORARY TABLE app.scratch (id INT)")
	p := t.Plan()
	fmt.Println(p.Action)
	for _, s := range p.Statements {
		fmt.Println(s)
	}

	// Session variables the baseline recorded are restored with one SET.
	t.Done()
	t.Statement("SET time_zone = '+09:00', sql_mode = ''")
	p = t.Plan()
	fmt.Println(p.Action, p.Statements)

	// Set back to the baseline's value: nothing to do.
	t.Done()
	t.Statement("SET time_zone = 'SYSTEM'")
	fmt.Println(t.Plan().Action)

	// Some states cannot be undone: the connection is closed instead.
	t.Done()
	t.Statement("SET max_heap_table_size = 65536")
	p = t.Plan()
	fmt.Println(p.Action, "-", p.Reason)
	// Output:
	// reset
	// ROLLBACK
	// UNLOCK TABLES
	// USE `app`
	// DROP TEMPORARY TABLE IF EXISTS app.scratch
	// SET autocommit=1
	// reset [SET time_zone='SYSTEM', sql_mode='STRICT_TRANS_TABLES']
	// none
	// discard - session variable changed (SET)
}

// Failed keeps whatever a failed statement may not have ended.
func ExampleTracker_Failed() {
	t := txstate.NewTracker(txstate.Baseline{Autocommit: true, Isolation: "REPEATABLE-READ"})
	t.Statement("BEGIN")
	t.Statement("UPDATE t SET a = 1 WHERE id = 7") // error 1205: lock wait timeout
	t.Failed()
	t.Statement("COMMIT") // the connection broke during COMMIT
	t.Failed()
	fmt.Println(t.InTx(), t.Plan().Statements)
	// Output:
	// true [ROLLBACK]
}

// ReadOnlyTx tells error 1792 caused by the borrower apart from one caused
// by a failover to a read-only server.
func ExampleTracker_ReadOnlyTx() {
	t := txstate.NewTracker(txstate.Baseline{Autocommit: true, Isolation: "REPEATABLE-READ"})
	t.Begin(driver.TxOptions{ReadOnly: true})
	fmt.Println(t.ReadOnlyTx())
	t.Rollback()
	t.Begin(driver.TxOptions{})
	fmt.Println(t.ReadOnlyTx())
	// Output:
	// true
	// false
}

// Unknown is for use the pool cannot see, such as sql.Conn.Raw.
func ExampleTracker_Unknown() {
	t := txstate.NewTracker(txstate.Baseline{Autocommit: true, Isolation: "REPEATABLE-READ"})
	t.Unknown()
	fmt.Println(t.Plan().Action)
	// Output:
	// discard
}

// The pool runs BaselineQuery once per new connection and keeps the result.
func ExampleBaselineFromRow() {
	// The row as go-sql-driver/mysql returns it from BaselineQuery.
	row := []driver.Value{
		[]byte("app"), []byte("1"),
		[]byte("STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION"),
		[]byte("REPEATABLE-READ"), []byte("0"),
		[]byte("SYSTEM"), []byte("utf8mb4"), []byte("utf8mb4"), []byte("utf8mb4"),
		[]byte("utf8mb4_general_ci"), []byte("28800"), []byte("28800"),
		[]byte("max_statement_time"), []byte("0.000000"),
	}
	b, err := txstate.BaselineFromRow(row)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(b.Database, b.Autocommit, b.Isolation, b.ReadOnly, b.Quoting)
	fmt.Println(b.Variables)
	// Output:
	// app true REPEATABLE-READ false backslash
	// character_set_client=utf8mb4 character_set_results=utf8mb4 character_set_connection=utf8mb4 collation_connection=utf8mb4_general_ci time_zone=SYSTEM sql_mode=STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION max_statement_time=0.000000 wait_timeout=28800 interactive_timeout=28800
}

func ExampleQuotingFor() {
	fmt.Println(txstate.QuotingFor("STRICT_TRANS_TABLES"))
	fmt.Println(txstate.QuotingFor("ANSI_QUOTES,STRICT_TRANS_TABLES"))
	fmt.Println(txstate.QuotingFor("NO_BACKSLASH_ESCAPES"))
	// Output:
	// backslash
	// ansi
	// no-backslash
}

func ExampleAction_String() {
	fmt.Println(txstate.ActionNone, txstate.ActionReset, txstate.ActionDiscard)
	// Output:
	// none reset discard
}

// The deferred LAST_INSERT_ID() reset: an insert cycle releases clean, and the stale id is
// reset just before the first later statement that could read it.
func ExampleTracker_SetDeferInsertID() {
	var b txstate.Baseline // as BaselineFromRow returns it
	b.Autocommit, b.Isolation = true, "REPEATABLE-READ"
	b.Variables.Set("sql_auto_is_null", "0")
	var t txstate.Tracker
	t.Reset(b)
	t.SetDeferInsertID(true)

	// A borrow: one autocommit INSERT that generated id 41, then its release.
	fmt.Printf("before: %q\n", t.BeforeStatement("INSERT INTO orders (item) VALUES (?)", []driver.NamedValue{{Ordinal: 1, Value: "pen"}}, true))
	t.Statement("INSERT INTO orders (item) VALUES (?)")
	t.InsertID(41)
	t.EndBorrow()
	fmt.Println("clean:", t.Clean())

	// Later borrows: a query that cannot read the id, then one that can.
	for _, q := range []string{"SELECT item FROM orders WHERE id = ?", "SELECT LAST_INSERT_ID()"} {
		if s := t.BeforeStatement(q, nil, false); s != "" {
			fmt.Printf("before %s: %s\n", q, s)
			t.BeforeDone() // after s ran successfully
		}
		t.Statement(q)
	}
	fmt.Println("stale:", t.LastInsertIDStale())
	// Output:
	// before: ""
	// clean: true
	// before SELECT LAST_INSERT_ID(): SET last_insert_id=0
	// stale: false
}
