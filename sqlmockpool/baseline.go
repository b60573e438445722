package sqlmockpool

import (
	"database/sql/driver"
	"fmt"
	"strings"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlpool/sqlpool/txstate"
)

// Baseline is the session the mock connection reports when the pool asks, right after it
// connects, for the state it restores at release (txstate.BaselineQuery): a SET or USE the code
// under test sends is reset to these values. Its zero value is not useful; start from
// DefaultBaseline.
type Baseline struct {
	// Database is DATABASE(); "" means none selected.
	Database string
	// Autocommit is @@autocommit.
	Autocommit bool
	// SQLMode is @@sql_mode.
	SQLMode string
	// Isolation is the session isolation level as MariaDB prints it, such as "REPEATABLE-READ".
	Isolation string
	// ReadOnly is @@tx_read_only.
	ReadOnly bool
	// Variables overrides the restored session variables' values, by name without "@@" (such as
	// "time_zone": "+00:00"); a variable it does not name has MariaDB 10.11's default (see
	// DefaultVariables). Zero value: all defaults.
	Variables map[string]string
}

// DefaultBaseline is a MariaDB 10.11 session on database "app" with the server's defaults:
// autocommit on, REPEATABLE-READ, read-write, MariaDB's default sql_mode.
func DefaultBaseline() Baseline {
	return Baseline{
		Database:   "app",
		Autocommit: true,
		SQLMode:    "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION",
		Isolation:  "REPEATABLE-READ",
	}
}

// baselineVariables are the columns of txstate.BaselineQuery after the first five, in order,
// with MariaDB 10.11's defaults. The statement timeout is two columns: its name, then its value.
var baselineVariables = []struct{ name, value string }{
	{"time_zone", "SYSTEM"},
	{"character_set_client", "utf8mb4"},
	{"character_set_results", "utf8mb4"},
	{"character_set_connection", "utf8mb4"},
	{"collation_connection", "utf8mb4_general_ci"},
	{"wait_timeout", "28800"},
	{"interactive_timeout", "28800"},
	{"", "max_statement_time"},
	{"max_statement_time", "0.000000"},
	{"foreign_key_checks", "1"},
	{"unique_checks", "1"},
	{"innodb_lock_wait_timeout", "50"},
	{"lock_wait_timeout", "86400"},
	{"group_concat_max_len", "1048576"},
	{"sql_select_limit", "18446744073709551615"},
	{"div_precision_increment", "4"},
	{"sql_safe_updates", "0"},
	{"sql_notes", "1"},
	{"sql_warnings", "0"},
	{"sql_auto_is_null", "0"},
	{"max_sort_length", "1024"},
	{"net_read_timeout", "30"},
	{"net_write_timeout", "60"},
	{"lc_time_names", "en_US"},
}

// DefaultVariables returns the restored session variables' default values (MariaDB 10.11's),
// by name: what Baseline.Variables overrides.
func DefaultVariables() map[string]string {
	m := make(map[string]string, len(baselineVariables))
	for _, v := range baselineVariables {
		if v.name != "" {
			m[v.name] = v.value
		}
	}
	return m
}

// row is the baseline query's answer.
func (b Baseline) row() []driver.Value {
	bit := func(v bool) driver.Value {
		if v {
			return int64(1)
		}
		return int64(0)
	}
	var db driver.Value
	if b.Database != "" {
		db = b.Database
	}
	over := make(map[string]string, len(b.Variables))
	for k, v := range b.Variables {
		over[normName(k)] = v
	}
	row := []driver.Value{db, bit(b.Autocommit), b.SQLMode, b.Isolation, bit(b.ReadOnly)}
	for _, v := range baselineVariables {
		val := v.value
		if o, ok := over[v.name]; ok && v.name != "" {
			val = o
		}
		row = append(row, val)
	}
	return row
}

func normName(k string) string {
	return strings.TrimPrefix(strings.ToLower(strings.TrimSpace(k)), "@@")
}

// check returns an error naming a variable of b.Variables that the baseline does not hold.
func (b Baseline) check() error {
	defaults := DefaultVariables()
	for k := range b.Variables {
		if _, ok := defaults[normName(k)]; !ok {
			return fmt.Errorf("sqlmockpool: Baseline.Variables names %q, which is not a variable the pool restores; the names are DefaultVariables()'s", k)
		}
	}
	return nil
}

// expect adds the baseline query, answered with b, to mock's expectations.
func (b Baseline) expect(mock sqlmock.Sqlmock) {
	cols := make([]string, txstate.BaselineColumns)
	for i := range cols {
		cols[i] = "c" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	mock.ExpectQuery(txstate.BaselineQuery).WillReturnRows(sqlmock.NewRows(cols).AddRow(b.row()...))
}
