package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
)

// Table names. Every SQL identifier this package uses comes from a constant;
// values are always parameters.
const (
	tableSpans        = "zipkin_spans"
	tableAnnotations  = "zipkin_annotations"
	tableDependencies = "zipkin_dependencies"
)

// tableOptions are Zipkin's table options. utf8 is MySQL's 3-byte utf8mb3:
// 4-byte characters (emoji) do not fit its VARCHAR columns, which is why the
// writer replaces them (see sanitizeVarchar). utf8_general_ci makes VARCHAR
// comparisons case-insensitive, which Zipkin's queries rely on.
//
// go-mysql-server (the embedded test server) accepts these options as they
// are; it ignores ENGINE and ROW_FORMAT and stores every table in memory.
const tableOptions = " ENGINE=InnoDB ROW_FORMAT=COMPRESSED CHARACTER SET=utf8 COLLATE utf8_general_ci"

// Zipkin's DDL, written for this project from the facts of Zipkin's
// mysql.sql (reference/zipkin.md §1). Differences from Zipkin's file:
//
//   - The secondary indexes are declared inside CREATE TABLE with the names
//     MySQL gives Zipkin's unnamed ALTER TABLE … ADD INDEX statements, so that
//     CREATE TABLE IF NOT EXISTS is the whole statement: running it again
//     never adds an index twice (Zipkin #2628, where re-running the file
//     created trace_id_high_2 … trace_id_high_15).
//   - No column comments.
//   - The tag search indexes (tags.go): Zipkin's index a_key (a_key) is
//     a_key (a_key, a_timestamp), which serves every lookup the original
//     serves and reads a key's newest rows along the index, and
//     a_key_value (a_key, a_value(64), a_timestamp) reads the newest rows of
//     a key and value. They replace Zipkin's trace_id_high_2 (trace_id_high,
//     trace_id, span_id) and trace_id_high_3 (trace_id_high, trace_id),
//     which are prefixes of the unique key trace_id_high and so serve no
//     lookup it does not: the table keeps six secondary indexes instead of
//     Zipkin's seven, and tag search needs no second copy of each tag.
const (
	ddlSpans = "CREATE TABLE IF NOT EXISTS " + tableSpans + ` (
  trace_id_high BIGINT NOT NULL DEFAULT 0,
  trace_id BIGINT NOT NULL,
  id BIGINT NOT NULL,
  name VARCHAR(255) NOT NULL,
  remote_service_name VARCHAR(255),
  parent_id BIGINT,
  debug BIT(1),
  start_ts BIGINT,
  duration BIGINT,
  PRIMARY KEY (trace_id_high, trace_id, id),
  KEY trace_id_high (trace_id_high, trace_id),
  KEY name (name),
  KEY remote_service_name (remote_service_name),
  KEY start_ts (start_ts)
)` + tableOptions

	ddlAnnotations = "CREATE TABLE IF NOT EXISTS " + tableAnnotations + ` (
  trace_id_high BIGINT NOT NULL DEFAULT 0,
  trace_id BIGINT NOT NULL,
  span_id BIGINT NOT NULL,
  a_key VARCHAR(255) NOT NULL,
  a_value BLOB,
  a_type INT NOT NULL,
  a_timestamp BIGINT,
  endpoint_ipv4 INT,
  endpoint_ipv6 BINARY(16),
  endpoint_port SMALLINT,
  endpoint_service_name VARCHAR(255),
  UNIQUE KEY trace_id_high (trace_id_high, trace_id, span_id, a_key, a_timestamp),
  KEY endpoint_service_name (endpoint_service_name),
  KEY a_type (a_type),
  KEY a_key (a_key, a_timestamp),
  KEY a_key_value (a_key, a_value(` + tagIndexPrefix + `), a_timestamp),
  KEY trace_id (trace_id, span_id, a_key)
)` + tableOptions

	ddlDependencies = "CREATE TABLE IF NOT EXISTS " + tableDependencies + ` (
  day DATE NOT NULL,
  parent VARCHAR(255) NOT NULL,
  child VARCHAR(255) NOT NULL,
  call_count BIGINT,
  error_count BIGINT,
  PRIMARY KEY (day, parent, child)
)` + tableOptions
)

// SchemaDDL returns the statements CreateSchema runs, in order, for people
// who prefer to apply the schema themselves (for example with the mariadb
// client). Each ends without a semicolon.
func SchemaDDL() []string {
	return []string{ddlSpans, ddlAnnotations, ddlDependencies}
}

// CreateSchema creates Zipkin's three tables in db's current database when
// they do not exist. It is idempotent: a table that exists is left as it is
// (it is neither altered nor upgraded, and no index is added to it), so
// running it on every start is safe. An older Zipkin schema keeps its
// columns; Open detects which features it has and logs the ALTER TABLE
// statements that would upgrade it.
//
// CreateSchema then creates the optional schema additions (AdditionsDDL:
// zipkin_names, zipkin_service_spans) when they do not exist, and fills a
// new one from the spans already stored (one INSERT … SELECT over the
// tables: on a large database this takes a while, once), and the tables
// of the dependency aggregator (DependencyAggregationDDL), which start
// empty: days stored before them keep the links of zipkin_dependencies
// (or are linked on demand when it has none).
//
// On a server with ROW_FORMAT=COMPRESSED disabled (MySQL 8 with
// innodb_file_per_table=OFF or a non-default page size, Zipkin #3384) the
// CREATE fails with error 4047 or 1478; the error says which table.
func CreateSchema(ctx context.Context, db *sql.DB) error {
	for _, q := range SchemaDDL() {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("mysqlstore: creating the Zipkin schema (%.40s…): %w", q, err)
		}
	}
	if err := createAdditions(ctx, db); err != nil {
		return err
	}
	return createDependencyAggregation(ctx, db)
}
