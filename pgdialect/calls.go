package pgdialect

import (
	"strings"
	"sync"
)

// knownWords are the words the tracker lets stand before "(" without reading the statement as
// a call of a function that may change session state: PostgreSQL's keywords that take a
// parenthesised list, type names with modifiers, and built-in functions that change no session
// state. A word not here makes the statement a call the tracker cannot follow (everything is
// reset at release, one round trip), which costs only that round trip when the function is
// harmless.
var knownWords = map[string]struct{}{}

func init() {
	for _, w := range strings.Fields(`
		select from where and or not in exists any all some values over filter within group by
		partition order cast row array on using as join lateral when then else case is like
		ilike similar between distinct returning into table with recursive conflict references
		set union except intersect having limit offset grouping rollup cube sets of to do
		primary key unique check default nulls first last asc desc only materialized window
		numeric decimal varchar char character varying bit timestamp timestamptz time timetz
		interval float double precision int int2 int4 int8 integer smallint bigint real text
		date bool boolean bytea uuid json jsonb
		count sum avg min max coalesce nullif greatest least now clock_timestamp
		statement_timestamp transaction_timestamp timeofday lower upper length char_length
		character_length octet_length bit_length substr substring position strpos trim btrim
		ltrim rtrim replace concat concat_ws format left right lpad rpad repeat reverse
		split_part initcap translate ascii chr md5 sha256 encode decode regexp_replace
		regexp_match regexp_matches regexp_split_to_array regexp_split_to_table starts_with
		abs round floor ceil ceiling trunc mod power pow sqrt cbrt exp ln log log10 sign pi
		random div width_bucket to_char to_date to_timestamp to_number date_trunc date_part
		extract age make_date make_time make_timestamp make_timestamptz make_interval
		justify_days justify_hours justify_interval isfinite array_agg string_agg json_agg
		jsonb_agg json_object_agg jsonb_object_agg json_build_object jsonb_build_object
		json_build_array jsonb_build_array jsonb_set jsonb_insert jsonb_strip_nulls
		jsonb_pretty to_json to_jsonb row_to_json array_to_json json_array_length
		jsonb_array_length json_each jsonb_each json_each_text jsonb_each_text
		json_array_elements jsonb_array_elements json_array_elements_text
		jsonb_array_elements_text json_extract_path jsonb_extract_path json_extract_path_text
		jsonb_extract_path_text json_typeof jsonb_typeof jsonb_path_query jsonb_path_exists
		array_length array_lower array_upper array_position array_positions array_append
		array_prepend array_cat array_remove array_replace array_to_string string_to_array
		cardinality unnest generate_series generate_subscripts row_number rank dense_rank
		percent_rank cume_dist ntile lag lead first_value last_value nth_value bool_and
		bool_or every stddev stddev_pop stddev_samp variance var_pop var_samp corr
		percentile_cont percentile_disc mode quote_ident quote_literal quote_nullable
		pg_typeof pg_backend_pid version gen_random_uuid current_database current_schema
		current_schemas has_table_privilege has_schema_privilege pg_sleep currval lastval
		to_tsvector to_tsquery plainto_tsquery phraseto_tsquery websearch_to_tsquery ts_rank
		ts_headline xmlagg xmlelement num_nulls num_nonnulls pg_column_size
		pg_relation_size pg_total_relation_size pg_size_pretty txid_current
		pg_current_xact_id pg_current_xact_id_if_assigned pg_is_in_recovery
		pg_advisory_xact_lock pg_advisory_xact_lock_shared pg_try_advisory_xact_lock
		pg_try_advisory_xact_lock_shared pg_advisory_unlock pg_advisory_unlock_shared
		pg_advisory_unlock_all pg_listening_channels pg_my_temp_schema pg_notify
		pg_cancel_backend pg_terminate_backend host jsonb_exists`) {
		knownWords[w] = struct{}{}
	}
}

// mayCallUnknown reports whether q has a word before "(" that is not in knownWords: the
// statement must then be read fully (knownCall decides). It reads q without lexing it (a "("
// in a string literal only costs the full read) and does not allocate.
func mayCallUnknown(q string) bool {
	for i := 0; i < len(q); i++ {
		if q[i] != '(' {
			continue
		}
		j := i
		for j > 0 && (q[j-1] == ' ' || q[j-1] == '\t' || q[j-1] == '\n' || q[j-1] == '\r') {
			j--
		}
		k := j
		for k > 0 && isIdentChar(q[k-1]) {
			k--
		}
		if k == j {
			continue // "((", "= (", "$1 (": no word
		}
		var buf [40]byte
		w := q[k:j]
		if len(w) > len(buf) {
			return true
		}
		for n := 0; n < len(w); n++ {
			c := w[n]
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			buf[n] = c
		}
		if _, ok := knownWords[string(buf[:len(w)])]; ok {
			continue
		}
		if columnListAfter(prevWord(q, k)) {
			continue // INSERT INTO t (…), WITH t (…) AS
		}
		return true
	}
	return false
}

// prevWord returns the word before q[:k], skipping spaces and a qualifying "name.".
func prevWord(q string, k int) string {
	if k > 0 && q[k-1] == '.' { // schema.table (…): the word before the schema
		k--
		for k > 0 && isIdentChar(q[k-1]) {
			k--
		}
	}
	for k > 0 && (q[k-1] == ' ' || q[k-1] == '\t' || q[k-1] == '\n' || q[k-1] == '\r') {
		k--
	}
	j := k
	for k > 0 && isIdentChar(q[k-1]) {
		k--
	}
	return q[k:j]
}

// columnListAfter reports a word after which "name (" is a table or alias with its column list
// (COPY t (a, b) FROM STDIN included).
func columnListAfter(w string) bool {
	for _, c := range [...]string{"into", "as", "with", "recursive", "table", "references", "update", "only", "copy"} {
		if strings.EqualFold(w, c) {
			return true
		}
	}
	return false
}

// knownCall reports whether the word ts[i], followed by "(", is no call of a function that may
// change session state: a known word, a name qualified by pg_catalog, or a table or alias
// name before its column list (INTO t (…), AS t (…), WITH t (…), TABLE t (…)).
func knownCall(ts []token, i int) bool {
	if _, ok := knownWords[ts[i].text]; ok {
		return true
	}
	j := i
	if j >= 2 && ts[j-1].kind == tPunct && ts[j-1].text == "." {
		if word(ts, j-2) == "pg_catalog" {
			return true
		}
		j -= 2
	}
	return columnListAfter(word(ts, j-1))
}

// customNames are the custom settings (names with a dot) statements through any pool named
// (SET, set_config, current_setting): after a borrow that may have created one unseen (a DO
// block's EXECUTE, a function, CALL, sql.Conn.Raw), release checks that none of them exists.
var customNames struct {
	mu    sync.Mutex
	names []string
	conds string // "current_setting('a.b', true) IS NOT NULL OR …"
}

// maxCustomNames bounds customNames.
const maxCustomNames = 32

func rememberCustom(n string) {
	if !validSettingName(n) {
		return
	}
	customNames.mu.Lock()
	defer customNames.mu.Unlock()
	for _, m := range customNames.names {
		if m == n {
			return
		}
	}
	if len(customNames.names) >= maxCustomNames {
		return
	}
	customNames.names = append(customNames.names, n)
	var b strings.Builder
	for k, m := range customNames.names {
		if k > 0 {
			b.WriteString(" OR ")
		}
		b.WriteString("current_setting('" + m + "', true) IS NOT NULL") // m is [a-z0-9_.]
	}
	customNames.conds = b.String()
}

// sessionCheck returns a statement that fails, so that the connection is closed, when the
// session has what PostgreSQL removes only with the session: with temp, a temporary schema;
// with custom, one of customNames' settings. It returns "" when there is nothing to check.
func sessionCheck(temp, custom bool) string {
	var conds string
	if custom {
		customNames.mu.Lock()
		conds = customNames.conds
		customNames.mu.Unlock()
	}
	if temp {
		if conds != "" {
			conds = "pg_my_temp_schema() <> 0 OR " + conds
		} else {
			conds = "pg_my_temp_schema() <> 0"
		}
	}
	if conds == "" {
		return ""
	}
	return "DO $sqlpool$BEGIN IF " + conds + " THEN RAISE EXCEPTION 'sqlpool: the session has a temporary schema or a custom setting, which PostgreSQL removes only with the session: the connection is closed'; END IF; END$sqlpool$"
}
