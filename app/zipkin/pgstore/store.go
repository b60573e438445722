// Package pgstore is a Zipkin span store on PostgreSQL, on database/sql: one
// table of span fragments in the v2 model (zipkin_spans) and one of names
// (zipkin_names), written with COPY on pgx's connections and read with the
// query semantics of zipkin/mysqlstore (a trace's fragments merged with
// Zipkin's Trace.merge rules, dependency links with its DependencyLinker). It
// runs on any *sql.DB of PostgreSQL — on sqlpool's (p.OpenDB()) with
// pgdialect's session tracking, or on plain database/sql — with pgx's stdlib
// driver (COPY) or any other (multi-row INSERT).
package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/storage"
)

// ErrNoSchema is returned by Open when the store's tables do not exist:
// run CreateSchema (the command's -init-schema) or apply SchemaDDL.
var ErrNoSchema = errors.New("pgstore: the store's tables do not exist: create the schema (CreateSchema, or the server's -init-schema)")

// Options configure a Store. The zero value is Zipkin's defaults.
type Options struct {
	// DisableStrictTraceID turns Zipkin's STRICT_TRACE_ID off: trace IDs
	// are matched on their low 64 bits only, so 64-bit and 128-bit halves
	// of one trace are returned together. Default false (strict).
	DisableStrictTraceID bool
	// DisableSearch turns Zipkin's SEARCH_ENABLED off: getTraces, names and
	// autocomplete answer empty; writes and trace-by-ID are unchanged.
	DisableSearch bool
	// AutocompleteKeys are the tag keys whose values autocomplete serves
	// (Zipkin's AUTOCOMPLETE_KEYS). Values are recorded as spans are
	// written, so a key added later serves values from then on. Default
	// none.
	AutocompleteKeys []string
	// DisableCopy makes Accept write with multi-row INSERT … ON CONFLICT DO
	// NOTHING even on pgx's connections. Default false: COPY on pgx's
	// connections, INSERT on other drivers'.
	DisableCopy bool
	// DependencyDrainInterval is how often Accept drains the dependency
	// queue into zipkin_dependency_hours (at most 8 transactions of 64
	// writes, skipped while another drain runs); negative: never (drain
	// with DrainDependencies or RunDependencyAggregation). Zero value:
	// DefaultDependencyDrainInterval (3 s).
	DependencyDrainInterval time.Duration
}

// Store is a Zipkin span store on one *sql.DB. It is safe for concurrent
// use. Create one with Open.
type Store struct {
	db    *sql.DB
	opts  Options
	keys  map[string]bool
	stats counters
	drv   atomic.Int32 // drvUnknown, drvPgx or drvOther: whether COPY is available
	terms termStats    // GetTraces: the frequent annotation-query terms

	// lastDrain is when Accept last started a dependency drain (UnixNano).
	lastDrain atomic.Int64
	// noDeps (tests only: the ingest measurement's ceiling) makes COPY
	// writes queue nothing for the dependency aggregation.
	noDeps bool
	// drainLimit (tests only; 0: drainRows) bounds the queue rows one drain
	// transaction takes, so that tests can drain part of the queue.
	drainLimit int

	// names are the zipkin_names rows known to be stored, so that a batch
	// upserts only names not seen before by this process.
	namesMu sync.RWMutex
	names   map[nameRow]struct{}
}

// Open returns a Store on db after checking that the schema exists
// (ErrNoSchema otherwise) and that the database answers.
func Open(ctx context.Context, db *sql.DB, opts Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("pgstore: Open needs a *sql.DB, got nil")
	}
	var reg sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT to_regclass($1)::text", tableSpans).Scan(&reg); err != nil {
		return nil, fmt.Errorf("pgstore: checking the schema: %w", err)
	}
	if !reg.Valid {
		return nil, fmt.Errorf("%w (table %s is missing)", ErrNoSchema, tableSpans)
	}
	for _, t := range []string{tableNames, tableDepQueue, tableDepTraces, tableDepHours} {
		if err := db.QueryRowContext(ctx, "SELECT to_regclass($1)::text", t).Scan(&reg); err != nil {
			return nil, fmt.Errorf("pgstore: checking the schema: %w", err)
		}
		if !reg.Valid {
			return nil, fmt.Errorf("%w (table %s is missing: the schema predates it; CreateSchema adds it and keeps the other tables)", ErrNoSchema, t)
		}
	}
	s0 := time.Now().UnixNano()
	s := &Store{db: db, opts: opts, keys: map[string]bool{}, names: map[nameRow]struct{}{}}
	s.lastDrain.Store(s0)
	for _, k := range opts.AutocompleteKeys {
		s.keys[k] = true
	}
	return s, nil
}

// Check reports whether the store can serve requests: it reads one row of
// zipkin_spans.
func (s *Store) Check(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, probeSpans)
	if err != nil {
		return fmt.Errorf("pgstore: health check: %w", err)
	}
	return rows.Close()
}

// Stats are the write path's counters since Open.
type Stats struct {
	Batches  int64 // Accept calls that stored their spans
	Spans    int64 // spans in those batches
	Copies   int64 // batches written with one COPY
	Staged   int64 // batches that hit a duplicate (23505) on COPY and were written again through a staging table
	Inserts  int64 // batches written with INSERT … ON CONFLICT DO NOTHING (drivers without COPY, DisableCopy)
	Failures int64 // Accept calls that returned an error
	Rejected int64 // spans refused as invalid (zero trace or span ID)
	Drained  int64 // queued writes counted into zipkin_dependency_hours by this Store's drains
}

type counters struct {
	batches, spans, copies, staged, inserts, failures, rejected, drained atomic.Int64
}

// Stats returns the write counters.
func (s *Store) Stats() Stats {
	c := &s.stats
	return Stats{Batches: c.batches.Load(), Spans: c.spans.Load(), Copies: c.copies.Load(), Staged: c.staged.Load(),
		Inserts: c.inserts.Load(), Failures: c.failures.Load(), Rejected: c.rejected.Load(), Drained: c.drained.Load()}
}

var _ storage.Storage = (*Store)(nil)
