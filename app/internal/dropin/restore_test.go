package dropin_test

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
)

// restoreCase is one session variable a borrower sets: the DSN parameters that give the
// connection a baseline of its own (not the server's global value), the statements each borrow
// runs, and the expressions the next borrower reads to see the baseline again.
type restoreCase struct {
	name   string
	params map[string]string
	set    []string
	read   string
	// keeps: the borrow sets the value the connection already has. same: and the text shows
	// it, so the release needs no round trip at all.
	keeps, same bool
}

var restoreCases = []restoreCase{
	{name: "time_zone", params: map[string]string{"time_zone": "'+02:00'"},
		set: []string{"SET time_zone = '+00:00'", "SELECT NOW()", "SET time_zone = DEFAULT"}, read: "@@time_zone"},
	{name: "time_zone already there", params: map[string]string{"time_zone": "'+02:00'"},
		set: []string{"SET time_zone = '+02:00'"}, read: "@@time_zone", keeps: true, same: true},
	{name: "wait_timeout already there", params: map[string]string{"wait_timeout": "3600"},
		set: []string{"SET wait_timeout = 3600"}, read: "@@wait_timeout", keeps: true, same: true},
	{name: "sql_mode", params: map[string]string{"sql_mode": "'STRICT_ALL_TABLES,NO_ZERO_DATE'"},
		set: []string{"SET sql_mode = 'ANSI'"}, read: "@@sql_mode"},
	{name: "NAMES of the connection's charset", set: []string{"SET NAMES utf8mb4"}, keeps: true,
		read: "CONCAT_WS(' ', @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection)"},
	{name: "NAMES latin1 on a utf8mb4 connection", set: []string{"SET NAMES latin1 COLLATE latin1_bin"},
		read: "CONCAT_WS(' ', @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection)"},
	{name: "NAMES utf8mb4 on a latin1 connection (DSN charset)", params: map[string]string{"charset": "latin1"}, set: []string{"SET NAMES utf8mb4"},
		read: "CONCAT_WS(' ', @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection)"},
	{name: "CHARACTER SET", set: []string{"SET CHARACTER SET latin1"},
		read: "CONCAT_WS(' ', @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection)"},
	{name: "character_set_client", set: []string{"SET character_set_client = latin1"}, read: "@@character_set_client"},
	{name: "character_set_connection", set: []string{"SET character_set_connection = latin1"}, read: "CONCAT_WS(' ', @@character_set_connection, @@collation_connection)"},
	{name: "character_set_results", set: []string{"SET character_set_results = NULL"}, read: "IFNULL(@@character_set_results, 'NULL')"},
	{name: "collation_connection", set: []string{"SET collation_connection = utf8mb4_bin"}, read: "CONCAT_WS(' ', @@character_set_connection, @@collation_connection)"},
	// A DSN collation that is not its character set's default: restoring character_set_connection
	// alone would leave the character set's default collation behind.
	{name: "collation_connection already there (DSN collation)", params: map[string]string{"charset": "utf8mb4 utf8mb4_unicode_ci"},
		set: []string{"SET collation_connection = utf8mb4_unicode_ci"}, keeps: true,
		read: "CONCAT_WS(' ', @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection)"},
	{name: "character_set_connection, then the collation back (DSN collation)", params: map[string]string{"charset": "utf8mb4 utf8mb4_unicode_ci"},
		set: []string{"SET character_set_connection = latin1", "SET collation_connection = utf8mb4_unicode_ci"}, keeps: true,
		read: "CONCAT_WS(' ', @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection)"},
	{name: "character_set_connection and the collation back in one SET (DSN collation)", params: map[string]string{"charset": "utf8mb4 utf8mb4_unicode_ci"},
		set: []string{"SET character_set_connection = latin1, @@SESSION.collation_connection = 'utf8mb4_unicode_ci'"}, keeps: true,
		read: "CONCAT_WS(' ', @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection)"},
	{name: "NAMES, then the collation back (DSN collation)", params: map[string]string{"charset": "utf8mb4 utf8mb4_unicode_ci"},
		set: []string{"SET NAMES latin1", "SET character_set_client = utf8mb4, character_set_results = utf8mb4, collation_connection = utf8mb4_unicode_ci"}, keeps: true,
		read: "CONCAT_WS(' ', @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection)"},
	{name: "character_set_connection (DSN collation)", params: map[string]string{"charset": "utf8mb4 utf8mb4_unicode_ci"},
		set:  []string{"SET character_set_connection = utf8mb4"},
		read: "CONCAT_WS(' ', @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection)"},
	{name: "max_statement_time", params: map[string]string{"max_statement_time": "30"},
		set: []string{"SET max_statement_time = 0.5"}, read: "@@max_statement_time"},
	{name: "wait_timeout", params: map[string]string{"wait_timeout": "3600"},
		set: []string{"SET SESSION wait_timeout = 60"}, read: "@@wait_timeout"},
	{name: "interactive_timeout", set: []string{"SET interactive_timeout = 60"}, read: "@@interactive_timeout"},
	{name: "isolation", params: map[string]string{"tx_isolation": "'READ-COMMITTED'"},
		set: []string{"SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE"}, read: "@@tx_isolation"},
	{name: "read-only", set: []string{"SET SESSION TRANSACTION READ ONLY"}, read: "@@tx_read_only"},
	{name: "autocommit", set: []string{"SET autocommit = 0", "SELECT 1"}, read: "@@autocommit"},
	// GORM's DropTable: SET FOREIGN_KEY_CHECKS = 0, DROP TABLE, SET FOREIGN_KEY_CHECKS = 1.
	{name: "foreign_key_checks off and on (GORM DropTable)", set: []string{"SET FOREIGN_KEY_CHECKS = 0", "DROP TABLE IF EXISTS sqlpool_restore_gorm", "SET FOREIGN_KEY_CHECKS = 1"},
		read: "@@foreign_key_checks", keeps: true, same: true},
	{name: "foreign_key_checks", set: []string{"SET foreign_key_checks = 0"}, read: "@@foreign_key_checks"},
	{name: "unique_checks", set: []string{"SET unique_checks = 0"}, read: "@@unique_checks"},
	{name: "innodb_lock_wait_timeout", params: map[string]string{"innodb_lock_wait_timeout": "20"},
		set: []string{"SET innodb_lock_wait_timeout = 3"}, read: "@@innodb_lock_wait_timeout"},
	{name: "group_concat_max_len", set: []string{"SET SESSION group_concat_max_len = 4"}, read: "@@group_concat_max_len"},
	{name: "sql_select_limit", set: []string{"SET sql_select_limit = 1"}, read: "@@sql_select_limit"},
	{name: "the other per-request variables", set: []string{"SET lock_wait_timeout = 5, div_precision_increment = 2, sql_safe_updates = 1, " +
		"sql_notes = 0, sql_warnings = 1, sql_auto_is_null = 1, max_sort_length = 8, net_read_timeout = 5, net_write_timeout = 5, lc_time_names = 'de_DE'"},
		read: "CONCAT_WS(' ', @@lock_wait_timeout, @@div_precision_increment, @@sql_safe_updates, @@sql_notes, @@sql_warnings, " +
			"@@sql_auto_is_null, @@max_sort_length, @@net_read_timeout, @@net_write_timeout, @@lc_time_names)"},
	{name: "several at once", params: map[string]string{"time_zone": "'+02:00'"},
		set:  []string{"SET NAMES latin1, time_zone = '+00:00', wait_timeout = 60", "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", "SET autocommit = 0"},
		read: "CONCAT_WS(' ', @@character_set_client, @@collation_connection, @@time_zone, @@wait_timeout, @@tx_isolation, @@autocommit)"},
}

// For each session variable, 100 borrows that set it close at most one connection (none, in
// fact: the release plan restores the baseline with one SET), and the next borrower sees the
// connection's baseline, DSN parameters included. Setting the value already there costs no
// round trip. On MariaDB (the variable names are MariaDB's).
func TestSessionVariablesRestored(t *testing.T) {
	mysqltest.RequireMariaDB(t, "session variables are restored on MariaDB")
	const borrows = 100
	for _, c := range restoreCases {
		t.Run(c.name, func(t *testing.T) {
			dsn := withParams(t, os.Getenv(mysqltest.EnvDSN), c.params)
			p := newPool(t, dsn, pool.Config{MaxConns: 1})
			db := p.OpenDB()
			defer db.Close()
			ctx := context.Background()
			baseline := readVar(t, db, c.read)

			before := p.Stats()
			for i := 0; i < borrows; i++ {
				conn, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, q := range c.set {
					if _, err := conn.ExecContext(ctx, q); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				}
				if i == 0 {
					if got := readVarConn(t, conn, c.read); got == baseline && !c.keeps {
						t.Fatalf("%v did not change %s (%s): the test proves nothing", c.set, c.read, got)
					}
				}
				if err := conn.Close(); err != nil {
					t.Fatal(err)
				}
			}
			after := p.Stats()
			closed, plans := after.Closed-before.Closed, after.ReleasePlans-before.ReleasePlans
			t.Logf("%d borrows: %d connections closed, %d release plans run", borrows, closed, plans)
			if closed > 1 {
				t.Errorf("%d borrows that ran %v closed %d connections; want at most 1", borrows, c.set, closed)
			}
			if c.same && plans != 0 {
				t.Errorf("setting the value already there ran %d release plans; want none", plans)
			}
			if got := readVar(t, db, c.read); got != baseline {
				t.Errorf("the next borrower sees %s = %q; want the baseline %q", c.read, got, baseline)
			}
		})
	}
}

// withParams adds DSN parameters (system variables to set at connect, or the driver's charset
// and collation as "charset" or "charset collation").
func withParams(t *testing.T, dsn string, params map[string]string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range params {
		if k == "charset" { // "charset" or "charset collation"
			cs, coll, _ := strings.Cut(v, " ")
			if err := cfg.Apply(mysql.Charset(cs, coll)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[k] = v
	}
	return cfg.FormatDSN()
}

func readVar(t *testing.T, db *sql.DB, expr string) string {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return readVarConn(t, conn, expr)
}

func readVarConn(t *testing.T, conn *sql.Conn, expr string) string {
	t.Helper()
	var v string
	if err := conn.QueryRowContext(context.Background(), "SELECT "+expr).Scan(&v); err != nil {
		t.Fatalf("SELECT %s: %v", expr, err)
	}
	return strings.TrimSpace(v)
}
