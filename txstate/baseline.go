package txstate

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Baseline is a session's state right after connect (and after the pool's
// Hooks.AfterConnect): the state a release plan restores. The zero
// Baseline means "autocommit off, no database, isolation unknown"; record a
// real one with BaselineQuery and BaselineFromRow.
type Baseline struct {
	// Database is the selected database as DATABASE() returns it, or ""
	// when none is selected (DATABASE() is NULL).
	Database string
	// Autocommit is @@autocommit.
	Autocommit bool
	// Isolation is the session isolation level as @@transaction_isolation
	// (MySQL 8, MariaDB 11.1+) or @@tx_isolation (MariaDB) prints it, such
	// as "REPEATABLE-READ"; "REPEATABLE READ" and any case are accepted. An
	// empty or unrecognised value means unknown: a plan that must restore
	// the isolation level discards the connection instead.
	Isolation string
	// ReadOnly is @@transaction_read_only (or @@tx_read_only): whether the
	// session's transactions are read-only by default.
	ReadOnly bool
	// Quoting is how the session's sql_mode lexes backslashes in literals.
	// The zero value, QuotingUnknown, is always safe; an exact mode avoids
	// mistaking a ';' inside a literal for a second statement.
	Quoting Quoting
	// Variables holds the session variables of RestoredVariables as they
	// were at connect. A variable it does not hold was not recorded: a SET
	// of it discards the connection. The zero value holds none.
	Variables Variables
}

// Variables holds values of the session variables of RestoredVariables, by
// name. The zero value holds none. It is comparable with ==.
type Variables struct {
	vals  [numVars]string
	known varMask
}

// Get returns the value of the variable named name (case-insensitive), and
// false if v holds none. A NULL character_set_results is "".
func (v Variables) Get(name string) (string, bool) {
	i, ok := lookupVar(name)
	if !ok || v.known&(1<<i) == 0 {
		return "", false
	}
	return v.vals[i], true
}

// String lists the variables v holds as name=value, in the order of
// RestoredVariables, space-separated; a NULL character_set_results is NULL.
func (v Variables) String() string {
	var b strings.Builder
	for i := range sysVars {
		if v.known&(1<<i) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(sysVars[i].name)
		b.WriteByte('=')
		if sysVar(i) == vCharsetResults && v.vals[i] == "" {
			b.WriteString("NULL")
		} else {
			b.WriteString(v.vals[i])
		}
	}
	return b.String()
}

// Set records value for the variable named name (case-insensitive). It
// returns false, recording nothing, when name is not one of
// RestoredVariables. Record a NULL character_set_results as "".
func (v *Variables) Set(name, value string) bool {
	i, ok := lookupVar(name)
	if !ok {
		return false
	}
	v.vals[i] = value
	v.known |= 1 << i
	return true
}

// BaselineQuery is the one statement a pool runs at connect to record the
// baseline, on MySQL 8 and MariaDB alike. Its columns are DATABASE(),
// @@autocommit, @@sql_mode, the isolation level, the read-only flag, then the
// restored session variables: @@time_zone, @@character_set_client,
// @@character_set_results, @@character_set_connection,
// @@collation_connection, @@wait_timeout, @@interactive_timeout, and the
// statement timeout as a name and a value ('max_statement_time' on MariaDB,
// 'max_execution_time' on MySQL), then the per-request variables
// @@foreign_key_checks, @@unique_checks, @@innodb_lock_wait_timeout,
// @@lock_wait_timeout, @@group_concat_max_len, @@sql_select_limit,
// @@div_precision_increment, @@sql_safe_updates, @@sql_notes, @@sql_warnings,
// @@sql_auto_is_null, @@max_sort_length, @@net_read_timeout,
// @@net_write_timeout and @@lc_time_names (names every server here has: MySQL
// 5.7+, MariaDB 10.x and the embedded go-mysql-server, checked on the last two).
// Feed the row to BaselineFromRow. The pool
// runs it once per connection, right after dialling (and Hooks.AfterConnect), so
// the baseline includes whatever the driver set at connect: go-sql-driver/mysql
// sends SET NAMES for its charset and collation parameters and a SET for every
// other DSN parameter that names a system variable.
//
// Some variables have different names by server: MySQL 8 has only
// transaction_isolation and transaction_read_only (the tx_ names were removed
// in 8.0.3), MariaDB 10.11 has only tx_isolation and tx_read_only (the
// transaction_ names arrived in 11.1, where the tx_ names remain as
// deprecated aliases); the statement timeout is max_statement_time on MariaDB
// and max_execution_time on MySQL. The query picks the right names with
// executable comments: MariaDB runs "/*M! ... */" and MySQL treats it as a
// comment; MySQL 5.7.20+ runs "/*!50720 ... */" and MariaDB skips every "/*!"
// version from 50700 to 99999 (MariaDB's documented rule, checked on 10.11).
// The go-mysql-server embedded server also runs the "/*!50720" parts and has
// every variable they name.
const BaselineQuery = "SELECT DATABASE(), @@autocommit, @@sql_mode, " +
	"/*M! @@tx_isolation, @@tx_read_only */ " +
	"/*!50720 @@transaction_isolation, @@transaction_read_only */, " +
	"@@time_zone, @@character_set_client, @@character_set_results, " +
	"@@character_set_connection, @@collation_connection, " +
	"@@wait_timeout, @@interactive_timeout, " +
	"/*M! 'max_statement_time', @@max_statement_time */ " +
	"/*!50720 'max_execution_time', @@max_execution_time */, " +
	"@@foreign_key_checks, @@unique_checks, @@innodb_lock_wait_timeout, @@lock_wait_timeout, " +
	"@@group_concat_max_len, @@sql_select_limit, @@div_precision_increment, @@sql_safe_updates, " +
	"@@sql_notes, @@sql_warnings, @@sql_auto_is_null, @@max_sort_length, " +
	"@@net_read_timeout, @@net_write_timeout, @@lc_time_names"

// BaselineCoreQuery is the fallback for a server that rejects BaselineQuery
// (a system variable it does not have, such as max_statement_time on MariaDB
// before 10.1, or interactive_timeout behind some proxies): it records only
// DATABASE(), @@autocommit, @@sql_mode, the isolation level and the read-only
// flag, with the same executable comments. BaselineFromRow accepts its row; the
// Baseline then holds no Variables, so a SET of one discards the connection
// while a change of database, autocommit, isolation or access mode is still
// reset.
const BaselineCoreQuery = "SELECT DATABASE(), @@autocommit, @@sql_mode, " +
	"/*M! @@tx_isolation, @@tx_read_only */ " +
	"/*!50720 @@transaction_isolation, @@transaction_read_only */"

// BaselineColumns is the number of columns BaselineQuery returns.
const BaselineColumns = 29

// baselineColumnsV1 is the number of columns of the earlier BaselineQuery, which ended with the
// statement timeout; BaselineFromRow still accepts such a row (from a stub or mock that answers
// it) and records no later variables.
const baselineColumnsV1 = 14

// BaselineCoreColumns is the number of columns BaselineCoreQuery returns
// (database, autocommit, sql_mode, isolation, read-only). BaselineFromRow
// accepts such a row: it records no variables, so a SET of one discards the
// connection.
const BaselineCoreColumns = 5

// baselineVarColumns are the variables of BaselineQuery's columns 5 to 11.
var baselineVarColumns = [...]sysVar{
	vTimeZone, vCharsetClient, vCharsetResults, vCharsetConnection,
	vCollationConnection, vWaitTimeout, vInteractiveTimeout,
}

// BaselineFromRow builds a Baseline from the row of BaselineQuery as a
// driver returns it: each value nil, []byte, string, int64, uint64, float64
// or bool (go-sql-driver/mysql returns []byte for every column of a
// text-protocol row). A row of only the first five columns (database,
// autocommit, sql_mode, isolation, read-only) is accepted and records no
// session variables. It returns an error naming the column it cannot read.
func BaselineFromRow(row []driver.Value) (Baseline, error) {
	var b Baseline
	if len(row) != BaselineColumns && len(row) != baselineColumnsV1 && len(row) != BaselineCoreColumns {
		return b, fmt.Errorf("txstate: baseline row has %d columns, want %d", len(row), BaselineColumns)
	}
	db, _, err := text(row[0])
	if err != nil {
		return b, fmt.Errorf("txstate: baseline column DATABASE(): %w", err)
	}
	b.Database = db
	if b.Autocommit, err = boolean(row[1]); err != nil {
		return b, fmt.Errorf("txstate: baseline column @@autocommit: %w", err)
	}
	mode, valid, err := text(row[2])
	if err != nil {
		return b, fmt.Errorf("txstate: baseline column @@sql_mode: %w", err)
	}
	if valid {
		b.Quoting = QuotingFor(mode)
	}
	if b.Isolation, _, err = text(row[3]); err != nil {
		return b, fmt.Errorf("txstate: baseline column isolation: %w", err)
	}
	if b.ReadOnly, err = boolean(row[4]); err != nil {
		return b, fmt.Errorf("txstate: baseline column read-only: %w", err)
	}
	if len(row) == BaselineCoreColumns {
		return b, nil
	}
	if valid {
		b.Variables.Set(sysVars[vSQLMode].name, mode)
	}
	for i, v := range baselineVarColumns {
		val, ok, err := scalar(row[BaselineCoreColumns+i])
		if err != nil {
			return b, fmt.Errorf("txstate: baseline column @@%s: %w", sysVars[v].name, err)
		}
		if ok || v == vCharsetResults {
			b.Variables.Set(sysVars[v].name, val)
		}
	}
	name, _, err := text(row[12])
	if err != nil {
		return b, fmt.Errorf("txstate: baseline column statement-timeout name: %w", err)
	}
	if v, known := lookupVar(name); known && (v == vMaxStatementTime || v == vMaxExecutionTime) {
		val, ok, err := scalar(row[13])
		if err != nil {
			return b, fmt.Errorf("txstate: baseline column @@%s: %w", name, err)
		}
		if ok {
			b.Variables.Set(sysVars[v].name, val)
		}
	}
	if len(row) == baselineColumnsV1 {
		return b, nil
	}
	for i, v := range lateVarColumns {
		val, ok, err := scalar(row[baselineColumnsV1+i])
		if err != nil {
			return b, fmt.Errorf("txstate: baseline column @@%s: %w", sysVars[v].name, err)
		}
		if ok {
			b.Variables.Set(sysVars[v].name, val)
		}
	}
	return b, nil
}

// scalar reads a column of any type as text; valid is false for NULL.
func scalar(v driver.Value) (s string, valid bool, err error) {
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10), true, nil
	case uint64:
		return strconv.FormatUint(v, 10), true, nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true, nil
	case bool:
		if v {
			return "1", true, nil
		}
		return "0", true, nil
	}
	return text(v)
}

// text reads a string column; valid is false for NULL.
func text(v driver.Value) (s string, valid bool, err error) {
	switch v := v.(type) {
	case nil:
		return "", false, nil
	case []byte:
		return string(v), true, nil
	case string:
		return v, true, nil
	}
	return "", false, fmt.Errorf("unexpected %T", v)
}

// boolean reads a 0/1 column as MySQL returns system booleans.
func boolean(v driver.Value) (bool, error) {
	switch v := v.(type) {
	case int64:
		return v != 0, nil
	case uint64:
		return v != 0, nil
	case bool:
		return v, nil
	case []byte, string:
		s, _, _ := text(v)
		switch boolValue(s) {
		case triOn:
			return true, nil
		case triOff:
			return false, nil
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n != 0, nil
		}
		return false, fmt.Errorf("not a boolean: %q", s)
	case nil:
		return false, errors.New("NULL")
	}
	return false, fmt.Errorf("unexpected %T", v)
}

// isolationLevels maps the isolation levels to their SQL keywords.
var isolationLevels = [...]struct{ name, sql string }{
	{"READ-UNCOMMITTED", "READ UNCOMMITTED"},
	{"READ-COMMITTED", "READ COMMITTED"},
	{"REPEATABLE-READ", "REPEATABLE READ"},
	{"SERIALIZABLE", "SERIALIZABLE"},
}

// normalIsolation returns the canonical variable value ("REPEATABLE-READ")
// and SQL keywords ("REPEATABLE READ") of an isolation level written either
// way in any case, or ok false.
func normalIsolation(s string) (name, sql string, ok bool) {
	s = strings.TrimSpace(s)
	for _, l := range isolationLevels {
		if strings.EqualFold(s, l.name) || strings.EqualFold(s, l.sql) {
			return l.name, l.sql, true
		}
	}
	return "", "", false
}
