package txstate

import (
	"strings"
	"testing"
)

// classCases is the reference list: every class, its spellings, and the
// traps around them. FuzzClassify wraps each in comments, whitespace and
// case and expects the same class.
var classCases = []struct {
	q    string
	want Class
}{
	// Empty text.
	{"", ClassEmpty},
	{"   \n\t", ClassEmpty},
	{"/* nothing */ -- at all\n # really", ClassEmpty},

	// Plain statements.
	{"SELECT a FROM t WHERE id = ?", ClassQuery},
	{"select 1", ClassQuery},
	{"INSERT INTO t (a, b) VALUES (?, ?)", ClassQuery},
	{"UPDATE t SET a = 1 WHERE id = 2", ClassQuery},
	{"DELETE FROM t WHERE id = 2", ClassQuery},
	{"REPLACE INTO t VALUES (1)", ClassQuery},
	{"SHOW TABLES", ClassQuery},
	{"DESCRIBE t", ClassQuery},
	{"DESC t", ClassQuery},
	{"EXPLAIN SELECT 1", ClassQuery},
	{"DO 1", ClassQuery},
	{"VALUES ROW(1, 2)", ClassQuery},
	{"TABLE t", ClassQuery},
	{"WITH c AS (SELECT 1) SELECT * FROM c", ClassQuery},
	{"HELP 'contents'", ClassQuery},
	{"LOAD DATA LOCAL INFILE 'x' INTO TABLE t", ClassQuery},
	{"ANALYZE TABLE t", ClassQuery},
	{"CHECK TABLE t", ClassQuery},
	{"CHECKSUM TABLE t", ClassQuery},
	{"OPTIMIZE TABLE t", ClassQuery},
	{"REPAIR TABLE t", ClassQuery},
	{"XA RECOVER", ClassQuery},
	{"(SELECT 1) UNION (SELECT 2)", ClassQuery},
	{"((SELECT 1))", ClassQuery},
	{"SELECT a INTO @v FROM t LIMIT 1", ClassQuery},
	{"SELECT 'a;b' FROM t", ClassQuery},
	{"SELECT 1;", ClassQuery},
	{"SELECT 1 ; -- trailing\n", ClassQuery},
	{"SELECT 1; /* done */ ;", ClassQuery},
	{"SELECT '\\';' FROM t", ClassMulti}, // no sql_mode known: could be two statements
	{"SELECT `a;b` FROM t", ClassQuery},
	{"SELECT 1 -- ; SELECT 2", ClassQuery},
	{"SELECT 1 # ; SELECT 2", ClassQuery},
	{"SELECT 1 /* ; SELECT 2 */", ClassQuery},
	{"SELECT 1 FOR UPDATE", ClassQuery},
	{"SELECT 1 AS `commit`", ClassQuery},
	{"/*!40101 SELECT 1 */", ClassQuery},
	{"/*+ hint */ SELECT 1", ClassQuery},
	{"SELECT /*+ SET_VAR(sort_buffer_size = 16M) */ a FROM t", ClassQuery},
	{"SELECT 'get_lock' FROM t", ClassUserLock}, // errs toward a lock

	// User locks.
	{"SELECT GET_LOCK('x', 1)", ClassUserLock},
	{"select get_lock('x', 1)", ClassUserLock},
	{"SELECT Get_Lock /* c */ ('x', 1)", ClassUserLock},
	{"DO GET_LOCK('x', 10)", ClassUserLock},
	{"SET @l = GET_LOCK('x', 1)", ClassUserLock},
	{"INSERT INTO t SELECT GET_LOCK('x', 1)", ClassUserLock},
	{"SELECT RELEASE_LOCK('x')", ClassQuery},

	// Transactions.
	{"BEGIN", ClassBegin},
	{"BEGIN WORK", ClassBegin},
	{"begin;", ClassBegin},
	{"START TRANSACTION", ClassBegin},
	{"START TRANSACTION READ ONLY", ClassBegin},
	{"START TRANSACTION READ WRITE", ClassBegin},
	{"START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY", ClassBegin},
	{"BEGIN NOT ATOMIC SELECT 1; END", ClassUnknown},
	{"START SLAVE", ClassUnknown},
	{"COMMIT", ClassCommit},
	{"COMMIT WORK", ClassCommit},
	{"commit;", ClassCommit},
	{"COMMIT AND NO CHAIN", ClassCommit},
	{"COMMIT AND NO CHAIN NO RELEASE", ClassCommit},
	{"COMMIT NO RELEASE", ClassCommit},
	{"COMMIT AND CHAIN", ClassChain},
	{"COMMIT WORK AND CHAIN NO RELEASE", ClassChain},
	{"COMMIT RELEASE", ClassUnknown},
	{"COMMIT garbage", ClassUnknown},
	{"ROLLBACK", ClassRollback},
	{"ROLLBACK WORK", ClassRollback},
	{"ROLLBACK AND NO CHAIN", ClassRollback},
	{"ROLLBACK AND CHAIN", ClassChain},
	{"ROLLBACK TO SAVEPOINT s1", ClassSavepoint},
	{"ROLLBACK WORK TO s1", ClassSavepoint},
	{"SAVEPOINT s1", ClassSavepoint},
	{"RELEASE SAVEPOINT s1", ClassSavepoint},
	{"RELEASE x", ClassUnknown},

	// XA.
	{"XA START 'x'", ClassXAStart},
	{"XA BEGIN 'x', 'b', 1", ClassXAStart},
	{"XA START 'x' JOIN", ClassXAStart},
	{"XA END 'x'", ClassXAPrepare},
	{"XA PREPARE 'x'", ClassXAPrepare},
	{"XA COMMIT 'x'", ClassXAFinish},
	{"XA COMMIT 'x' ONE PHASE", ClassXAFinish},
	{"XA ROLLBACK 'x'", ClassXAFinish},
	{"XA FOO", ClassUnknown},

	// SET.
	{"SET @a = 1", ClassSetUserVar},
	{"SET @a := 1, @b = 'x,y'", ClassSetUserVar},
	{"SET @`a b` = 1", ClassSetUserVar},
	{"SET @'a' = (SELECT 1, 2)", ClassSetUserVar},
	{"SET autocommit=0", ClassSetAutocommit},
	{"SET autocommit = 1", ClassSetAutocommit},
	{"SET @@autocommit=0", ClassSetAutocommit},
	{"SET @@session.autocommit=OFF", ClassSetAutocommit},
	{"SET @@SESSION.AUTOCOMMIT=off", ClassSetAutocommit},
	{"SET @@local.autocommit=0", ClassSetAutocommit},
	{"SET SESSION autocommit = OFF", ClassSetAutocommit},
	{"SET LOCAL autocommit = 'ON'", ClassSetAutocommit},
	{"SET autocommit=0, @x = 1", ClassSetAutocommit},
	{"SET @x = 1, autocommit=0", ClassSetAutocommit},
	{"SET autocommit := DEFAULT", ClassSetAutocommit},
	{"SET autocommit=0, SESSION tx_isolation='READ-COMMITTED'", ClassSetAutocommit},
	{"/*!40101 SET autocommit=0 */", ClassSetAutocommit},
	{"SET autocommit=0, sql_mode=''", ClassSetAutocommit},
	{"SET autocommit=0, max_heap_table_size=65536", ClassSetOther},
	{"SET GLOBAL autocommit=0", ClassSetOther},
	{"SET @@global.autocommit=0", ClassSetOther},
	{"SET PERSIST autocommit=0", ClassSetOther},
	{"SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE", ClassSetTransaction},
	{"SET LOCAL TRANSACTION READ ONLY", ClassSetTransaction},
	{"SET TRANSACTION ISOLATION LEVEL READ COMMITTED", ClassSetTransaction},
	{"SET TRANSACTION READ WRITE, ISOLATION LEVEL REPEATABLE READ", ClassSetTransaction},
	{"SET GLOBAL TRANSACTION ISOLATION LEVEL SERIALIZABLE", ClassSetOther},
	{"SET SESSION transaction_isolation = 'SERIALIZABLE'", ClassSetTransaction},
	{"SET @@transaction_isolation = 'READ-COMMITTED'", ClassSetTransaction},
	{"SET @@session.tx_isolation = 'READ-COMMITTED'", ClassSetTransaction},
	{"SET tx_read_only = 1", ClassSetTransaction},
	{"SET SESSION transaction_read_only = ON", ClassSetTransaction},
	{"SET sql_mode = 'ANSI'", ClassSetVariable},
	{"SET time_zone = '+00:00'", ClassSetVariable},
	{"SET NAMES utf8mb4", ClassSetVariable},
	{"SET CHARACTER SET utf8mb4", ClassSetVariable},
	{"SET NAMES utf8mb4 COLLATE utf8mb4_general_ci", ClassSetVariable},
	{"SET NAMES 'latin1', time_zone = 'UTC'", ClassSetVariable},
	{"SET NAMES DEFAULT", ClassSetVariable},
	{"SET CHARSET utf8mb4", ClassSetVariable},
	{"SET @@session.time_zone = 'Europe/Berlin'", ClassSetVariable},
	{"SET LOCAL sql_mode := CONCAT(@@sql_mode, ',ANSI_QUOTES')", ClassSetVariable},
	{"SET SESSION max_statement_time = 5", ClassSetVariable},
	{"SET max_execution_time = 1000", ClassSetVariable},
	{"SET wait_timeout = 60, interactive_timeout = 60", ClassSetVariable},
	{"SET character_set_results = NULL", ClassSetVariable},
	{"SET character_set_client = utf8mb4, character_set_connection = utf8mb4", ClassSetVariable},
	{"SET collation_connection = DEFAULT", ClassSetVariable},
	{"SET @tz = 'UTC', time_zone = @tz", ClassSetVariable},
	{"/*!40101 SET NAMES utf8mb4 */", ClassSetVariable},
	{"SET @@SESSION.sql_mode = 'ANSI_QUOTES,PIPES_AS_CONCAT'", ClassSetVariable},
	{"SET sql_mode = 'NO_BACKSLASH_ESCAPES'", ClassSetVariable},
	{"SET SESSION time_zone = '+05:30', LOCAL wait_timeout = 60", ClassSetVariable},
	{"SET time_zone = DEFAULT, max_statement_time = DEFAULT", ClassSetVariable},
	{"SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci, collation_connection = utf8mb4_bin", ClassSetVariable},
	{"SET character_set_connection = latin1, collation_connection = utf8mb4_general_ci", ClassSetVariable},
	{"SET @@local.character_set_results = NULL, @@session.interactive_timeout = 60", ClassSetVariable},
	{"SET GLOBAL sql_mode = 'ANSI', time_zone = '+00:00'", ClassSetOther},
	{"SET time_zone = '+00:00', GLOBAL wait_timeout = 60", ClassSetOther},
	{"SET time_zone = '+00:00', tx_isolation = 'READ-COMMITTED'", ClassSetTransaction},
	{"SET GLOBAL time_zone = '+00:00'", ClassSetOther},
	{"SET @@global.sql_mode = ''", ClassSetOther},
	{"SET PERSIST wait_timeout = 60", ClassSetOther},
	{"SET NAMES utf8mb4 garbage", ClassSetOther},
	{"SET names = 'utf8mb4'", ClassSetOther},
	{"SET CHARACTER SET", ClassSetOther},
	{"SET time_zone = '+00:00', max_heap_table_size = 65536", ClassSetOther},
	{"SET `time_zone` = '+00:00'", ClassSetOther},
	{"SET max_heap_table_size = 65536", ClassSetOther},
	{"SET foreign_key_checks = 0", ClassSetVariable},
	{"SET FOREIGN_KEY_CHECKS = 0, unique_checks = 0, @@session.innodb_lock_wait_timeout = 5", ClassSetVariable},
	{"SET autocommit=0, foreign_key_checks=0", ClassSetAutocommit},
	{"SET ROLE ALL", ClassSetOther},
	{"SET PASSWORD = 'x'", ClassSetOther},
	{"SET `autocommit` = 0", ClassSetOther},
	{"SET validate_password.length = 4", ClassSetOther},
	{"SET STATEMENT max_statement_time=1 FOR SELECT 1", ClassQuery},
	{"SET STATEMENT sql_mode='', x=(1) FOR COMMIT", ClassCommit},
	{"SET STATEMENT a=1 FOR SET STATEMENT b=1 FOR SELECT 1", ClassSetOther},
	{"SET STATEMENT autocommit=0 FOR INSERT INTO t VALUES (1)", ClassSetOther},
	{"SET STATEMENT x=(SELECT 1 FOR UPDATE) FOR SELECT 1", ClassQuery},
	{"SET", ClassSetOther},
	{"SET @a", ClassSetOther},

	// USE.
	{"USE db", ClassUse},
	{"USE `other db`", ClassUse},
	{"use db;", ClassUse},

	// Table locks.
	{"LOCK TABLES t READ", ClassLockTables},
	{"LOCK TABLE t WRITE, u READ", ClassLockTables},
	{"LOCK INSTANCE FOR BACKUP", ClassUnknown},
	{"UNLOCK TABLES", ClassUnlockTables},
	{"UNLOCK TABLE", ClassUnlockTables},
	{"UNLOCK INSTANCE", ClassUnknown},

	// Temporary tables and DDL.
	{"CREATE TEMPORARY TABLE t (a INT)", ClassCreateTemp},
	{"CREATE TEMPORARY TABLE IF NOT EXISTS t(a INT)", ClassCreateTemp},
	{"CREATE OR REPLACE TEMPORARY TABLE db.t LIKE u", ClassCreateTemp},
	{"CREATE TEMPORARY TABLE `t``x` SELECT 1", ClassCreateTemp},
	{"CREATE TEMPORARY SEQUENCE s", ClassUnknown},
	{"CREATE TABLE t (a INT)", ClassDDL},
	{"CREATE OR REPLACE VIEW v AS SELECT 1", ClassDDL},
	{"CREATE OR ALTER x", ClassUnknown},
	{"DROP TEMPORARY TABLE t", ClassDropTemp},
	{"DROP TEMPORARY TABLE IF EXISTS t", ClassDropTemp},
	{"DROP TABLE t", ClassDDL},
	{"DROP DATABASE d", ClassDDL},
	{"DROP PREPARE s", ClassPrepared},
	{"ALTER TABLE t ADD COLUMN b INT", ClassDDL},
	{"RENAME TABLE t TO u", ClassDDL},
	{"TRUNCATE TABLE t", ClassDDL},
	{"GRANT SELECT ON *.* TO u", ClassDDL},
	{"REVOKE SELECT ON *.* FROM u", ClassDDL},

	// Session state the pool cannot see.
	{"CALL p(1)", ClassCall},
	{"PREPARE s FROM 'SELECT 1'", ClassPrepared},
	{"EXECUTE s", ClassPrepared},
	{"EXECUTE IMMEDIATE 'SELECT 1'", ClassPrepared},
	{"DEALLOCATE PREPARE s", ClassPrepared},
	{"HANDLER t OPEN", ClassHandler},
	{"FLUSH TABLES WITH READ LOCK", ClassUnknown},
	{"KILL 5", ClassUnknown},
	{"(COMMIT)", ClassUnknown},
	{"(", ClassUnknown},
	{"'SELECT 1'", ClassUnknown},
	{"\x01COMMIT", ClassUnknown},
	{"label: BEGIN NOT ATOMIC END", ClassUnknown},

	// More than one statement.
	{"SELECT 1; SELECT 2", ClassMulti},
	{"BEGIN; INSERT INTO t VALUES (1)", ClassMulti},
	{"SET @a = 1; SET autocommit=0", ClassMulti},
	{"SELECT 1; /*! SELECT 2 */", ClassMulti},
	{"SELECT 1 /*!; SELECT 2 */", ClassMulti},
	{"COMMIT; BEGIN", ClassMulti},

	// Executable comments that some servers skip: closing is not trusted.
	{"/*!99999 COMMIT */", ClassUnknown},
	{"/*M! COMMIT */", ClassUnknown},
	{"SET autocommit=0 /*!99999 , autocommit=1 */", ClassUnknown},
	{"/*! COMMIT */", ClassCommit},
	{"/*!99999 BEGIN */", ClassBegin},
}

func TestClassify(t *testing.T) {
	for _, c := range classCases {
		if got := Classify(c.q); got != c.want {
			t.Errorf("Classify(%q) = %v, want %v", c.q, got, c.want)
		}
	}
}

func TestClassifyQuoting(t *testing.T) {
	cases := []struct {
		q    string
		mode Quoting
		want Class
	}{
		{"SELECT 'it\\'s; fine' FROM t", QuotingBackslash, ClassQuery},
		{"SELECT 'it\\'s; fine' FROM t", QuotingANSI, ClassQuery},
		{"SELECT 'it\\'s; fine' FROM t", QuotingNoBackslash, ClassMulti},
		{"SELECT 'it\\'s; fine' FROM t", QuotingUnknown, ClassMulti},
		{"SELECT 'it''s; fine' FROM t", QuotingUnknown, ClassQuery},
		{"SELECT \"a\\\"; b\" FROM t", QuotingBackslash, ClassQuery},
		{"SELECT \"a\\\"; b\" FROM t", QuotingANSI, ClassMulti},
		{"SELECT 'a\\'; DROP TABLE t; -- '", QuotingBackslash, ClassQuery},
		{"SELECT 'a\\'; DROP TABLE t; -- '", QuotingNoBackslash, ClassMulti},
		{"SET @a = 'x\\', autocommit=0, @b = 'y'", QuotingBackslash, ClassSetUserVar},
		{"SET @a = 'x\\', autocommit=0, @b = 'y'", QuotingNoBackslash, ClassSetAutocommit},
		{"SET @a = 'x\\', autocommit=0, @b = 'y'", QuotingUnknown, ClassSetOther},
		{"SET @a = 'x'", QuotingUnknown, ClassSetUserVar},
	}
	for _, c := range cases {
		var in info
		if analyze(&in, c.q, c.mode); in.class != c.want {
			got := in.class
			t.Errorf("analyze(%q, %v) = %v, want %v", c.q, c.mode, got, c.want)
		}
	}
}

func TestQuotingFor(t *testing.T) {
	cases := []struct {
		mode string
		want Quoting
	}{
		{"", QuotingBackslash},
		{"STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION", QuotingBackslash},
		{"ANSI_QUOTES", QuotingANSI},
		{"REAL_AS_FLOAT,PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ONLY_FULL_GROUP_BY,ANSI", QuotingANSI},
		{"no_backslash_escapes", QuotingNoBackslash},
		{"ANSI_QUOTES,NO_BACKSLASH_ESCAPES", QuotingNoBackslash},
	}
	for _, c := range cases {
		if got := QuotingFor(c.mode); got != c.want {
			t.Errorf("QuotingFor(%q) = %v, want %v", c.mode, got, c.want)
		}
	}
}

func TestClassString(t *testing.T) {
	seen := map[string]bool{}
	for c := Class(0); c < numClasses; c++ {
		s := c.String()
		if s == "" || seen[s] || strings.HasPrefix(s, "Class(") {
			t.Errorf("Class(%d).String() = %q: empty, duplicate or unnamed", c, s)
		}
		seen[s] = true
	}
	if got := Class(200).String(); got != "Class(200)" {
		t.Errorf("Class(200).String() = %q", got)
	}
	for _, q := range []Quoting{QuotingUnknown, QuotingBackslash, QuotingANSI, QuotingNoBackslash, 9} {
		if q.String() == "" {
			t.Errorf("Quoting(%d).String() is empty", q)
		}
	}
}

func TestHasGetLock(t *testing.T) {
	for q, want := range map[string]bool{
		"":                     false,
		"get_lock":             true,
		"GET_LOCK":             true,
		"xget_lockx":           true,
		"get_loc":              false,
		"_lock":                false,
		"get_":                 false,
		"a_b_c get_lock(":      true,
		"SELECT release_lock(": false,
		"get__lock":            false,
	} {
		if got := hasGetLock(q); got != want {
			t.Errorf("hasGetLock(%q) = %v, want %v", q, got, want)
		}
	}
}

func TestQuickScan(t *testing.T) {
	r := rng(12345)
	alphabet := "abck;K \x80\xff\x00_"
	for n := 0; n < 20000; n++ {
		b := make([]byte, r.next()%(swarMax+10))
		for i := range b {
			b[i] = alphabet[r.next()%uint64(len(alphabet))]
		}
		s := string(b)
		semi, k := quickScan(s)
		wantSemi := strings.IndexByte(s, ';') >= 0
		wantK := strings.IndexAny(s, "kK") >= 0
		if len(s) > swarMax {
			wantSemi, wantK = true, true
		}
		if semi != wantSemi || k != wantK {
			t.Fatalf("quickScan(%q) = %v, %v; want %v, %v", s, semi, k, wantSemi, wantK)
		}
	}
}
