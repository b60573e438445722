package txstate

import (
	"strconv"
	"strings"
)

// sysVar numbers the session variables a Tracker restores to the baseline instead of
// discarding the connection. The order is the order of their assignments in the reset SET:
// character_set_connection before collation_connection, since assigning the character set
// also sets the collation (to the character set's default).
type sysVar uint8

const (
	vCharsetClient sysVar = iota
	vCharsetResults
	vCharsetConnection
	vCollationConnection
	vTimeZone
	vSQLMode
	vMaxStatementTime // MariaDB, seconds
	vMaxExecutionTime // MySQL 5.7.8+, milliseconds
	vWaitTimeout
	vInteractiveTimeout
	// The per-request variables recorded by BaselineQuery's trailing columns, in their order.
	vForeignKeyChecks
	vUniqueChecks
	vInnodbLockWaitTimeout
	vLockWaitTimeout
	vGroupConcatMaxLen
	vSQLSelectLimit
	vDivPrecisionIncrement
	vSQLSafeUpdates
	vSQLNotes
	vSQLWarnings
	vSQLAutoIsNull
	vMaxSortLength
	vNetReadTimeout
	vNetWriteTimeout
	vLCTimeNames
	numVars
)

// sysVars are the restorable variables' names, and whether each takes a number (written
// bare in the reset SET: a quoted number is error 1232 on an integer variable) rather than a
// string (written quoted).
var sysVars = [numVars]struct {
	name    string
	numeric bool
}{
	vCharsetClient:       {"character_set_client", false},
	vCharsetResults:      {"character_set_results", false},
	vCharsetConnection:   {"character_set_connection", false},
	vCollationConnection: {"collation_connection", false},
	vTimeZone:            {"time_zone", false},
	vSQLMode:             {"sql_mode", false},
	vMaxStatementTime:    {"max_statement_time", true},
	vMaxExecutionTime:    {"max_execution_time", true},
	vWaitTimeout:         {"wait_timeout", true},
	vInteractiveTimeout:  {"interactive_timeout", true},

	vForeignKeyChecks:      {"foreign_key_checks", true},
	vUniqueChecks:          {"unique_checks", true},
	vInnodbLockWaitTimeout: {"innodb_lock_wait_timeout", true},
	vLockWaitTimeout:       {"lock_wait_timeout", true},
	vGroupConcatMaxLen:     {"group_concat_max_len", true},
	vSQLSelectLimit:        {"sql_select_limit", true},
	vDivPrecisionIncrement: {"div_precision_increment", true},
	vSQLSafeUpdates:        {"sql_safe_updates", true},
	vSQLNotes:              {"sql_notes", true},
	vSQLWarnings:           {"sql_warnings", true},
	vSQLAutoIsNull:         {"sql_auto_is_null", true},
	vMaxSortLength:         {"max_sort_length", true},
	vNetReadTimeout:        {"net_read_timeout", true},
	vNetWriteTimeout:       {"net_write_timeout", true},
	vLCTimeNames:           {"lc_time_names", false},
}

// lateVarColumns are the variables of BaselineQuery's columns after the statement timeout.
var lateVarColumns = [...]sysVar{
	vForeignKeyChecks, vUniqueChecks, vInnodbLockWaitTimeout, vLockWaitTimeout, vGroupConcatMaxLen,
	vSQLSelectLimit, vDivPrecisionIncrement, vSQLSafeUpdates, vSQLNotes, vSQLWarnings, vSQLAutoIsNull,
	vMaxSortLength, vNetReadTimeout, vNetWriteTimeout, vLCTimeNames,
}

// RestoredVariables returns the names of the session variables, besides autocommit and the
// transaction isolation level and access mode, that a Tracker with a baseline restores at
// release with one SET instead of discarding the connection: character_set_client,
// character_set_results, character_set_connection, collation_connection (and so SET NAMES
// and SET CHARACTER SET), time_zone, sql_mode, max_statement_time (MariaDB),
// max_execution_time (MySQL), wait_timeout, interactive_timeout, and the variables
// applications set per request: foreign_key_checks, unique_checks, innodb_lock_wait_timeout,
// lock_wait_timeout, group_concat_max_len, sql_select_limit, div_precision_increment,
// sql_safe_updates, sql_notes, sql_warnings, sql_auto_is_null, max_sort_length,
// net_read_timeout, net_write_timeout and lc_time_names.
func RestoredVariables() []string {
	names := make([]string, numVars)
	for i, v := range sysVars {
		names[i] = v.name
	}
	return names
}

// lookupVar returns the restorable variable named name (any case), or false.
func lookupVar(name string) (sysVar, bool) {
	if len(name) < 8 || len(name) > 24 {
		return 0, false
	}
	for i := range sysVars {
		if eqFold(name, sysVars[i].name) {
			return sysVar(i), true
		}
	}
	return 0, false
}

// varMask is a set of sysVars.
type varMask uint32

// assignment returns "name=value" for a variable's baseline value, written so that it reads
// the same under every sql_mode, or "" when value cannot be written safely: a number with
// anything but digits and one '.', a string with a backslash, a quote of either kind or a
// control byte. For character_set_results, "" and NULL (valid false) are both NULL: the
// embedded server reports NULL as "".
func assignment(v sysVar, value string, valid bool) string {
	d := sysVars[v]
	if v == vCharsetResults && (!valid || value == "") {
		return d.name + "=NULL"
	}
	if !valid {
		return ""
	}
	if d.numeric {
		if !isNumber(value) {
			return ""
		}
		return d.name + "=" + value
	}
	if value == "" && v != vSQLMode {
		return "" // an empty name (the embedded server's lc_time_names) cannot be set back
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c == '\\' || c == '\'' || c == '"' || c < ' ' || c == 0x7f {
			return ""
		}
	}
	return d.name + "='" + value + "'"
}

// isNumber reports a non-negative decimal number: digits with at most one '.'.
func isNumber(s string) bool {
	if s == "" || s == "." {
		return false
	}
	dot := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.' && !dot:
			dot = true
		case c < '0' || c > '9':
			return false
		}
	}
	return true
}

// literal returns the value of an assignment's expression when it is one literal or word
// whose value the text shows: 'x' or "x" without escapes or doubled quotes, a bare word or
// number. DEFAULT (the global value), NULL and anything else give "": unknown.
func literal(tok string) string {
	if tok == "" {
		return ""
	}
	if q := tok[0]; q == '\'' || q == '"' {
		if len(tok) < 2 || tok[len(tok)-1] != q {
			return ""
		}
		in := tok[1 : len(tok)-1]
		if strings.IndexByte(in, q) >= 0 || strings.IndexByte(in, '\\') >= 0 {
			return ""
		}
		return in
	}
	for i := 0; i < len(tok); i++ {
		if !isWord(tok[i]) {
			return ""
		}
	}
	if eqFold(tok, "default") || eqFold(tok, "null") {
		return ""
	}
	return tok
}

// sameValue reports whether a value a borrower assigned (as literal returned it, "" for
// unknown) is the baseline's value: numbers compare as numbers, time zones byte for byte
// ('UTC' and 'utc' may name different zones on some servers), other strings ignoring case
// (character set, collation and sql_mode names).
func sameValue(v sysVar, set, base string, baseValid bool) bool {
	if set == "" || !baseValid {
		return false
	}
	switch {
	case sysVars[v].numeric:
		if isDigits(set) && isDigits(base) {
			return strings.TrimLeft(set, "0") == strings.TrimLeft(base, "0")
		}
		a, err1 := strconv.ParseFloat(set, 64)
		b, err2 := strconv.ParseFloat(base, 64)
		return err1 == nil && err2 == nil && a == b
	case v == vTimeZone:
		return set == base
	}
	return strings.EqualFold(set, base)
}

// isDigits reports a non-empty string of decimal digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
