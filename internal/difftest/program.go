// Package difftest is a differential fuzzer for the pool: it runs one random program of
// session changes, transactions, parameterized queries and prepared statements through plain
// database/sql (go-sql-driver/mysql, every borrow a fresh physical connection) and through
// p.OpenDB() with MaxConns 1, each side on its own pair of identical databases, and reports the
// first step where the two differ: a result inside a borrow (rows, MySQL error number, rows
// affected, last insert id), or, at a new borrow, the session the pool hands out against a
// brand-new connection's (every row of information_schema.SESSION_VARIABLES, the user
// variables, held named locks, temporary tables, an open transaction).
//
// Programs are generated from a seed (Generate), so a run is reproducible; a divergence is
// shrunk by delta debugging (Shrink) to a short sequence that still diverges.
package difftest

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Op is what a Step does.
type Op uint8

// The operations of a program.
const (
	OpBorrow    Op = iota // give back the connection and borrow the next one (db.Conn); Snapshot: compare its session
	OpExec                // conn (or tx) ExecContext(SQL, Args...)
	OpQuery               // conn (or tx) QueryContext(SQL, Args...), every result set read
	OpBeginTx             // conn.BeginTx(Iso, ReadOnly); later statements run on the sql.Tx
	OpCommitTx            // tx.Commit
	OpRollback            // tx.Rollback
	OpPrepare             // Slot = conn.PrepareContext(SQL)
	OpStmtExec            // Slot.ExecContext(Args...)
	OpStmtQuery           // Slot.QueryContext(Args...)
	OpStmtClose           // Slot.Close
)

// Slots is how many sql.Stmt a program holds at once.
const Slots = 3

// Step is one operation. SQL may hold the placeholders {A} and {B} (the side's two databases)
// and {L} (the side's prefix for named locks and XA ids), replaced per side.
type Step struct {
	Op       Op
	SQL      string
	Args     []any
	Slot     int
	Iso      sql.IsolationLevel
	ReadOnly bool
	// Snapshot (OpBorrow) compares the new borrow's session with a fresh connection's. Only
	// some borrows do: reading the session view reads every session variable, and so observes
	// (and makes the pool reset) state a pool may reset lazily; a borrow without it lets that
	// state reach the next borrows unobserved. The end of a program is always compared.
	Snapshot bool
}

// String prints the step as Go-like code.
func (s Step) String() string {
	args := ""
	for _, a := range s.Args {
		args += ", " + fmt.Sprintf("%#v", a)
	}
	switch s.Op {
	case OpBorrow:
		if s.Snapshot {
			return "conn.Close(); conn = db.Conn(); compare(conn, fresh)"
		}
		return "conn.Close(); conn = db.Conn()"
	case OpExec:
		return "exec(" + strconv.Quote(s.SQL) + args + ")"
	case OpQuery:
		return "query(" + strconv.Quote(s.SQL) + args + ")"
	case OpBeginTx:
		return fmt.Sprintf("tx = conn.BeginTx(&sql.TxOptions{Isolation: %v, ReadOnly: %v})", s.Iso, s.ReadOnly)
	case OpCommitTx:
		return "tx.Commit()"
	case OpRollback:
		return "tx.Rollback()"
	case OpPrepare:
		return fmt.Sprintf("s%d = conn.Prepare(%s)", s.Slot, strconv.Quote(s.SQL))
	case OpStmtExec:
		return fmt.Sprintf("s%d.Exec(%s)", s.Slot, strings.TrimPrefix(args, ", "))
	case OpStmtQuery:
		return fmt.Sprintf("s%d.Query(%s)", s.Slot, strings.TrimPrefix(args, ", "))
	case OpStmtClose:
		return fmt.Sprintf("s%d.Close()", s.Slot)
	}
	return "?"
}

// Program is a sequence of steps; the first borrow is implicit.
type Program []Step

// String prints one step per line, numbered.
func (p Program) String() string {
	var b strings.Builder
	for i, s := range p {
		fmt.Fprintf(&b, "%4d  %s\n", i, s)
	}
	return b.String()
}

// Vocabulary selects the statements a program may use.
type Vocabulary struct {
	// Embedded leaves out what the embedded go-mysql-server cannot serve: XA, HANDLER,
	// LOCK TABLES, stored procedures, SQL-level PREPARE, SET STATEMENT, multi-statement text,
	// savepoints and the MariaDB-only variables.
	Embedded bool
}

// gen is one kind of step with its weight.
type gen struct {
	w        int
	embedded bool // also on the embedded server
	f        func(r *rand.Rand) []Step
}

func ex(q string, args ...any) []Step { return []Step{{Op: OpExec, SQL: q, Args: args}} }
func qu(q string, args ...any) []Step { return []Step{{Op: OpQuery, SQL: q, Args: args}} }

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// stmtQueries are the texts prepared as sql.Stmt and run as parameterized queries: their
// results depend on the current database, sql_mode, NAMES, time_zone and session variables.
var stmtQueries = []struct {
	q    string
	args func(r *rand.Rand) []any
}{
	{"SELECT v FROM t WHERE id = ?", func(r *rand.Rand) []any { return []any{int64(r.IntN(6) + 1)} }},
	{"SELECT COUNT(*), DATABASE() FROM t WHERE id >= ?", func(r *rand.Rand) []any { return []any{int64(r.IntN(3))} }},
	{`SELECT "v", ? FROM t ORDER BY id LIMIT 1`, func(r *rand.Rand) []any { return []any{"x"} }},
	{"SELECT CONCAT(?, '|'), 1 || 0", func(r *rand.Rand) []any { return []any{"p"} }},
	{"SELECT COLLATION(?), 'a' = 'A', CHARSET('x')", func(r *rand.Rand) []any { return []any{"s"} }},
	{"SELECT FROM_UNIXTIME(?), UNIX_TIMESTAMP('2020-01-01 00:00:00')", func(r *rand.Rand) []any { return []any{int64(r.IntN(100000))} }},
	{"INSERT INTO t (v) VALUES (?)", func(r *rand.Rand) []any { return []any{pick(r, "i1", "i2", "i3")} }},
	{"SELECT id, v FROM t WHERE id > ? ORDER BY id", func(r *rand.Rand) []any { return []any{int64(r.IntN(4))} }},
	{"SELECT GROUP_CONCAT(v ORDER BY id), ? FROM t", func(r *rand.Rand) []any { return []any{int64(1)} }},
	{"SELECT DATE_FORMAT('2020-01-06', '%W %M'), ?/3", func(r *rand.Rand) []any { return []any{int64(r.IntN(9) + 1)} }},
	{"SELECT LAST_INSERT_ID(), ?", func(r *rand.Rand) []any { return []any{int64(0)} }},
	{"SELECT @u, @v, ?", func(r *rand.Rand) []any { return []any{int64(0)} }},
	{"INSERT INTO u (k, parent) VALUES (?, 999)", func(r *rand.Rand) []any { return []any{int64(r.IntN(1000) + 100)} }},
	{"SELECT COUNT(*) FROM tmp1 WHERE ? = 1", func(r *rand.Rand) []any { return []any{int64(1)} }},
}

var gens = []gen{
	// transactions
	{8, true, func(r *rand.Rand) []Step {
		return ex(pick(r, "BEGIN", "START TRANSACTION", "START TRANSACTION READ ONLY", "START TRANSACTION WITH CONSISTENT SNAPSHOT", "BEGIN WORK"))
	}},
	{8, true, func(r *rand.Rand) []Step { return ex(pick(r, "COMMIT", "ROLLBACK", "COMMIT WORK")) }},
	{2, false, func(r *rand.Rand) []Step { return ex(pick(r, "COMMIT AND CHAIN", "ROLLBACK AND CHAIN")) }},
	{5, true, func(r *rand.Rand) []Step {
		return ex(pick(r, "SET autocommit=0", "SET autocommit=1", "SET @@autocommit=OFF"))
	}},
	{4, true, func(r *rand.Rand) []Step {
		return ex(pick(r, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE",
			"SET TRANSACTION READ ONLY", "SET SESSION TRANSACTION READ ONLY", "SET SESSION TRANSACTION READ WRITE", "SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED"))
	}},
	{3, false, func(r *rand.Rand) []Step {
		return ex(pick(r, "SAVEPOINT sp1", "ROLLBACK TO SAVEPOINT sp1", "RELEASE SAVEPOINT sp1"))
	}},
	{3, false, func(r *rand.Rand) []Step {
		return ex(pick(r, "XA START '{L}x'", "XA END '{L}x'", "XA ROLLBACK '{L}x'", "XA COMMIT '{L}x' ONE PHASE", "XA RECOVER"))
	}},
	{4, true, func(r *rand.Rand) []Step {
		return []Step{{Op: OpBeginTx, Iso: pick(r, sql.LevelDefault, sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable, sql.LevelReadUncommitted), ReadOnly: r.IntN(3) == 0}}
	}},
	{4, true, func(r *rand.Rand) []Step { return []Step{{Op: pick(r, OpCommitTx, OpRollback)}} }},
	// restored and other session variables
	{5, true, func(r *rand.Rand) []Step {
		return ex("SET time_zone = " + pick(r, "'+00:00'", "'+05:30'", "'SYSTEM'", "DEFAULT", "'-03:00'"))
	}},
	{5, true, func(r *rand.Rand) []Step {
		return ex("SET sql_mode = " + pick(r, "'ANSI_QUOTES'", "'PIPES_AS_CONCAT'", "'NO_BACKSLASH_ESCAPES'", "DEFAULT", "''", "'TRADITIONAL'", "'ANSI'"))
	}},
	{5, true, func(r *rand.Rand) []Step {
		return ex(pick(r, "SET NAMES latin1", "SET NAMES utf8mb4", "SET NAMES utf8mb4 COLLATE utf8mb4_bin", "SET CHARACTER SET latin1",
			"SET character_set_results = NULL", "SET collation_connection = utf8mb4_unicode_ci"))
	}},
	{8, true, func(r *rand.Rand) []Step {
		return ex(pick(r,
			"SET foreign_key_checks = 0", "SET FOREIGN_KEY_CHECKS = 1", "SET unique_checks = 0", "SET unique_checks = 1",
			"SET innodb_lock_wait_timeout = 3", "SET innodb_lock_wait_timeout = 50", "SET group_concat_max_len = 4",
			"SET group_concat_max_len = 1024", "SET sql_select_limit = 1", "SET sql_select_limit = DEFAULT",
			"SET lock_wait_timeout = 5", "SET wait_timeout = 100", "SET SESSION interactive_timeout = 200"))
	}},
	{4, false, func(r *rand.Rand) []Step {
		return ex(pick(r, "SET max_statement_time = 0.5", "SET max_statement_time = 0", "SET lc_time_names = 'de_DE'",
			"SET div_precision_increment = 2", "SET sql_safe_updates = 1", "SET timestamp = 1000000000", "SET timestamp = DEFAULT",
			"SET sql_notes = 0", "SET STATEMENT max_statement_time = 1 FOR SELECT 1", "SET STATEMENT sql_select_limit = 1 FOR SELECT id FROM t"))
	}},
	// user variables
	{8, true, func(r *rand.Rand) []Step {
		n := int64(r.IntN(100))
		return pick(r,
			ex("SET @u = ?", n), ex(fmt.Sprintf("SET @u := %d, @v = 'x%d'", n, n)), qu(fmt.Sprintf("SELECT @u := %d", n)),
			qu("SELECT v INTO @w FROM t ORDER BY id LIMIT 1"), ex("SELECT id INTO @v FROM t ORDER BY id DESC LIMIT 1"),
			qu("SELECT @u, @v, @w, @pv"), ex("SET @u = NULL"), ex("SET @`Tenant` = 7"), qu("SELECT @tenant"))
	}},
	{2, false, func(r *rand.Rand) []Step {
		return ex(pick(r, "SET @m = 3; SELECT 1", "SELECT 1; SELECT @m := 4", "DO 1; SET @u = 5"))
	}},
	// LAST_INSERT_ID
	{6, true, func(r *rand.Rand) []Step {
		return pick(r,
			ex("INSERT INTO t (v) VALUES (?)", pick(r, "a", "b")), qu("SELECT LAST_INSERT_ID()"), qu("SELECT LAST_INSERT_ID(1000000077)"),
			ex("INSERT INTO n (id, s) VALUES (?, ?)", int64(r.IntN(50)), pick(r, "p", "q", "r")),
			ex("UPDATE t SET id = LAST_INSERT_ID(id + 1000000000) - 1000000000 WHERE id = 1"))
	}},
	// LAST_INSERT_ID() and the ways to read it, after this or an earlier borrow's inserts
	// (generated ids, explicit ids, several rows, an INSERT run as a query), and
	// sql_auto_is_null, which makes WHERE id IS NULL read it. A value set by LAST_INSERT_ID(expr)
	// is one no row has (1000000000 and up): WHERE id IS NULL reads it only while a flag is up
	// that a generated id raises, which a new connection inherits from the server thread it
	// reuses, so plain database/sql itself would read that row or not (TestAutoIsNullFlag).
	{8, false, func(r *rand.Rand) []Step {
		return pick(r,
			qu("SELECT LAST_INSERT_ID()"), qu("SELECT @@identity, @@last_insert_id"),
			qu("SHOW SESSION VARIABLES LIKE 'last_insert_id'"),
			qu("SELECT VARIABLE_VALUE FROM information_schema.SESSION_VARIABLES WHERE VARIABLE_NAME = 'IDENTITY'"),
			ex("INSERT INTO t (v) VALUES ('g')"), ex("INSERT INTO t (v) VALUES (?)", "g"),
			ex("INSERT INTO t (id, v) VALUES (?, 'e')", int64(-100-r.IntN(1000))), ex("INSERT INTO t (v) VALUES ('m1'), ('m2')"),
			// explicit ids among those generated (4 and up): the OK packet reports an explicit id
			// as it reports a generated one, and it may be the id an earlier borrow left
			ex("REPLACE INTO t (id, v) VALUES (?, 'x')", int64(4+r.IntN(8))), ex("INSERT IGNORE INTO t (id, v) VALUES (?, 's')", strconv.Itoa(4+r.IntN(8))),
			ex(fmt.Sprintf("INSERT INTO t (id, v) VALUES (%d, 'k') ON DUPLICATE KEY UPDATE v = 'k'", 4+r.IntN(8))),
			ex("REPLACE INTO t (id, v) SELECT MAX(id), 'x' FROM t"),
			[]Step{{Op: OpPrepare, Slot: 2, SQL: "REPLACE INTO t (id, v) VALUES (?, 'p')"}, {Op: OpStmtExec, Slot: 2, Args: []any{int64(4 + r.IntN(8))}}},
			qu("INSERT INTO t (v) VALUES ('q')"), ex("REPLACE INTO t (id, v) VALUES (2, 'r')"),
			ex(pick(r, "SET sql_auto_is_null = 1", "SET sql_auto_is_null = 0")), qu("SELECT id, v FROM t WHERE id IS NULL"),
			[]Step{{Op: OpBorrow}, {Op: OpQuery, SQL: "SELECT LAST_INSERT_ID()"}})
	}},
	// SQL-level prepared statements
	{3, false, func(r *rand.Rand) []Step {
		return ex(pick(r, "PREPARE s1 FROM 'SELECT v, DATABASE() FROM t WHERE id = ?'", "SET @pid = 1", "EXECUTE s1 USING @pid",
			"DEALLOCATE PREPARE s1", "EXECUTE IMMEDIATE 'SELECT 2'", "EXECUTE s1 USING 2"))
	}},
	// sql.Stmt and parameterized queries
	{6, true, func(r *rand.Rand) []Step {
		return []Step{{Op: OpPrepare, Slot: r.IntN(Slots), SQL: stmtQueries[r.IntN(len(stmtQueries))].q}}
	}},
	{10, true, func(r *rand.Rand) []Step {
		sq := stmtQueries[r.IntN(len(stmtQueries))]
		return []Step{{Op: pick(r, OpStmtQuery, OpStmtQuery, OpStmtExec), Slot: r.IntN(Slots), Args: sq.args(r)}}
	}},
	{3, true, func(r *rand.Rand) []Step { return []Step{{Op: OpStmtClose, Slot: r.IntN(Slots)}} }},
	{10, true, func(r *rand.Rand) []Step {
		sq := stmtQueries[r.IntN(len(stmtQueries))]
		op := OpQuery
		if strings.HasPrefix(sq.q, "INSERT") {
			op = OpExec
		}
		return []Step{{Op: op, SQL: sq.q, Args: sq.args(r)}}
	}},
	// database
	{6, true, func(r *rand.Rand) []Step { return ex(pick(r, "USE {A}", "USE {B}", "USE {B}", "USE `{A}`")) }},
	{3, true, func(r *rand.Rand) []Step { return qu("SELECT DATABASE(), v FROM t ORDER BY id LIMIT 1") }},
	// temporary tables, shadowing too
	{5, true, func(r *rand.Rand) []Step {
		return ex(pick(r, "CREATE TEMPORARY TABLE t (id INT, v VARCHAR(64), ts TIMESTAMP NULL)", "CREATE TEMPORARY TABLE tmp1 (x INT)",
			"CREATE TEMPORARY TABLE IF NOT EXISTS {B}.t (id INT, v VARCHAR(64), ts TIMESTAMP NULL)", "DROP TEMPORARY TABLE IF EXISTS t",
			"DROP TEMPORARY TABLE tmp1", "INSERT INTO t (id, v) VALUES (-1, 'temp')", "INSERT INTO tmp1 VALUES (1)"))
	}},
	// named locks
	{5, true, func(r *rand.Rand) []Step {
		l := pick(r, "'{L}1'", "'{L}2'")
		return qu(pick(r, "SELECT GET_LOCK("+l+", 0)", "SELECT RELEASE_LOCK("+l+")", "SELECT IS_USED_LOCK("+l+") = CONNECTION_ID()",
			"SELECT RELEASE_ALL_LOCKS()", "SELECT IS_FREE_LOCK("+l+")"))
	}},
	// table locks
	{3, false, func(r *rand.Rand) []Step {
		// UNLOCK TABLES goes through Query, so that Options.Inject can single out the pool's.
		return pick(r, ex("LOCK TABLES t READ"), ex("LOCK TABLES t WRITE"), qu("UNLOCK TABLES"), ex("LOCK TABLES {A}.t READ, {B}.t READ"))
	}},
	// DDL, procedures, handlers
	{2, true, func(r *rand.Rand) []Step {
		return ex(pick(r, "CREATE TABLE IF NOT EXISTS ddl1 (x INT)", "DROP TABLE IF EXISTS ddl1"))
	}},
	{2, false, func(r *rand.Rand) []Step {
		return pick(r, ex("CALL pset()"), ex("HANDLER n OPEN"), qu("HANDLER n READ FIRST"), ex("HANDLER n CLOSE"))
	}},
	// state-dependent reads
	{10, true, func(r *rand.Rand) []Step {
		return qu(pick(r, "SELECT FROM_UNIXTIME(0), NOW() IS NOT NULL", `SELECT "v" FROM t ORDER BY id LIMIT 1`, "SELECT 1 || 0, 'a\\b'",
			"SELECT 'a' = 'A', COLLATION('x')", "SELECT GROUP_CONCAT(v ORDER BY id) FROM t", "SELECT id, v FROM t ORDER BY id",
			"SELECT COUNT(*) FROM t", "SELECT DATE_FORMAT('2020-01-06', '%W'), 1/3", "SELECT @@in_transaction",
			"SELECT @@autocommit, @@tx_isolation, @@tx_read_only", "SELECT k FROM u ORDER BY k", "SELECT COUNT(*) FROM tmp1",
			"UPDATE t SET v = v WHERE v = 'zz'"))
	}},
	{3, true, func(r *rand.Rand) []Step {
		return ex(pick(r, "INSERT INTO u (k, parent) VALUES (?, 999)", "INSERT INTO n (id, s) VALUES (?, 'p')", "DELETE FROM u WHERE k = ?"), int64(r.IntN(40)+60))
	}},
	// borrows (Generate draws which compare sessions)
	{14, true, func(r *rand.Rand) []Step { return []Step{{Op: OpBorrow}} }},
}

// Generate returns a program of n steps drawn from the vocabulary with the seed: the same seed,
// n and vocabulary give the same program.
func Generate(seed uint64, n int, v Vocabulary) Program {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	// Which borrows compare sessions (a quarter on MariaDB) is drawn from a stream of its own, so
	// that the steps are those the vocabulary alone draws. On the embedded server every borrow
	// compares, as its programs were checked: after DROP TEMPORARY TABLE of a table that shadows
	// t, its session fails to prepare statements on the real t (1146) until something reads it.
	snap := rand.New(rand.NewPCG(seed^0x5bd1e9955bd1e995, seed))
	var usable []gen
	total := 0
	for _, g := range gens {
		if v.Embedded && !g.embedded {
			continue
		}
		usable = append(usable, g)
		total += g.w
	}
	p := make(Program, 0, n)
	for len(p) < n {
		k := r.IntN(total)
		for _, g := range usable {
			if k < g.w {
				for _, s := range g.f(r) {
					if v.Embedded && embeddedSkips(s.SQL) {
						continue
					}
					if v.Embedded && (s.Op == OpStmtExec || s.Op == OpStmtQuery) && len(s.Args) == 1 && s.Args[0] == int64(0) {
						continue // "SELECT LAST_INSERT_ID(), ?" and "SELECT @u, @v, ?" among others: not on the embedded server
					}
					if s.Op == OpBorrow {
						s.Snapshot = v.Embedded || snap.IntN(4) == 0
					}
					if v.Embedded && s.Op == OpBeginTx {
						// The embedded server keeps the isolation level of go-sql-driver's
						// SET TRANSACTION ISOLATION LEVEL (next transaction only) for the session.
						s.Iso = sql.LevelDefault
					}
					p = append(p, s)
				}
				break
			}
			k -= g.w
		}
	}
	return p[:n]
}

// embeddedSkips reports statements of an otherwise served kind that the embedded server
// cannot run the way MariaDB does.
func embeddedSkips(q string) bool {
	for _, s := range []string{"WITH CONSISTENT SNAPSHOT", "@@tx_", "RELEASE_ALL_LOCKS", "IS_FREE_LOCK", "FROM_UNIXTIME", "UNIX_TIMESTAMP",
		"DATE_FORMAT", "CHARSET(", "COLLATION(", "SET CHARACTER SET", "character_set_results", "ANSI", "PIPES", "NO_BACKSLASH", "TRADITIONAL",
		"SELECT v INTO", "SELECT id INTO", "innodb_lock_wait", "lock_wait", "unique_checks", "group_concat", "sql_select_limit",
		"INTO @", "LAST_INSERT_ID", "'a\\b'", "{B}.t", "interactive_timeout", "READ UNCOMMITTED", "WORK"} {
		if strings.Contains(q, s) {
			return true
		}
	}
	return false
}
