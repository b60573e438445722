package pgstore

import (
	"context"
	"database/sql"
	"fmt"
)

// Table names. Every SQL identifier this package uses comes from a constant;
// values are always parameters.
const (
	tableSpans = "zipkin_spans"
	tableNames = "zipkin_names"
)

// The kinds of zipkin_names rows.
const (
	nameService = 0 // (service, '')
	nameSpan    = 1 // (service, span name)
	nameRemote  = 2 // (service, remote service)
	nameValue   = 3 // (autocomplete key, value)
)

// The schema. One row per span fragment as received (v2 model), keyed by its
// trace ID (low 64 bits first, so that a lookup on the low bits alone, with
// STRICT_TRACE_ID off, reads one range of the key), its span ID and a 64-bit
// hash of its content (frag): a fragment sent again is the same row, and
// different fragments of one span (late annotations, the client and server
// halves of a shared span) are rows of their own, merged when read with
// Zipkin's Trace.merge rules.
//
// terms holds what an annotationQuery looks for: "0"+value for each
// annotation value and "0"+key for each tag key (the term "key"), and
// "1"+key+"\x1f"+value for each tag (the term "key=value", re-checked on
// tags), each at most maxTerm bytes; a GIN index serves them. start_ts is
// NULL for a span without a timestamp (never in a search window).
const (
	ddlSpans = `CREATE TABLE IF NOT EXISTS ` + tableSpans + ` (
  trace_id BIGINT NOT NULL,
  trace_id_high BIGINT NOT NULL,
  id BIGINT NOT NULL,
  frag BIGINT NOT NULL,
  parent_id BIGINT NOT NULL,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  start_ts BIGINT,
  duration BIGINT NOT NULL,
  debug BOOLEAN NOT NULL,
  shared BOOLEAN NOT NULL,
  l_service TEXT NOT NULL,
  l_ipv4 INET,
  l_ipv6 INET,
  l_port INTEGER NOT NULL,
  r_service TEXT NOT NULL,
  r_ipv4 INET,
  r_ipv6 INET,
  r_port INTEGER NOT NULL,
  annotations JSONB,
  tags JSONB,
  terms TEXT[] NOT NULL,
  PRIMARY KEY (trace_id, trace_id_high, id, frag)
)`
	// zipkin_spans_l_service_ts covers a search's candidates, so that a
	// service's newest fragments are read from the index alone (the planner
	// prices heap reads along l_service as random and would otherwise walk
	// start_ts, filtering the whole window).
	ddlSpansStart  = `CREATE INDEX IF NOT EXISTS zipkin_spans_start_ts ON ` + tableSpans + ` (start_ts)`
	ddlSpansLocal  = `CREATE INDEX IF NOT EXISTS zipkin_spans_l_service_ts ON ` + tableSpans + ` (l_service, start_ts) INCLUDE (trace_id, trace_id_high, id)`
	ddlSpansRemote = `CREATE INDEX IF NOT EXISTS zipkin_spans_r_service ON ` + tableSpans + ` (r_service, start_ts)`
	ddlSpansTerms  = `CREATE INDEX IF NOT EXISTS zipkin_spans_terms ON ` + tableSpans + ` USING GIN (terms)`
	ddlNames       = `CREATE TABLE IF NOT EXISTS ` + tableNames + ` (
  kind SMALLINT NOT NULL,
  service TEXT NOT NULL,
  name TEXT NOT NULL,
  PRIMARY KEY (kind, service, name)
)`
	probeSpans = `SELECT 1 FROM ` + tableSpans + ` LIMIT 1`
)

// SchemaDDL returns the statements CreateSchema runs, in order, for people
// who prefer to apply the schema themselves (with psql, say). Each ends
// without a semicolon.
func SchemaDDL() []string {
	return []string{ddlSpans, ddlSpansStart, ddlSpansLocal, ddlSpansRemote, ddlSpansTerms, ddlNames,
		ddlDepQueue, ddlDepQueueStorage, ddlDepTraces, ddlDepTracesHour, ddlDepHours}
}

// CreateSchema creates the store's tables and indexes in the current schema
// of db's connections (the first of search_path) when they do not exist. It
// is idempotent: running it on every start is safe.
func CreateSchema(ctx context.Context, db *sql.DB) error {
	for _, q := range SchemaDDL() {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("pgstore: creating the schema (%.50s…): %w", q, err)
		}
	}
	return nil
}
