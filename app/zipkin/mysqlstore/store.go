// Package mysqlstore is Zipkin's MySQL span store on database/sql: Zipkin's
// schema (zipkin_spans, zipkin_annotations, zipkin_dependencies), its
// schema-feature detection, idempotent batch writes and the v2 queries. It
// runs on any *sql.DB — on sqlpool's (p.OpenDB()) with its statement cache
// and SQL timers, or on plain database/sql.
package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/storage"
	"github.com/sqlpool/sqlpool/retry"
)

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
	// (Zipkin's AUTOCOMPLETE_KEYS). Default none.
	AutocompleteKeys []string

	// Logger receives the store's log lines (schema-feature warnings, the
	// ALTER TABLE statements that would upgrade an older schema). Zero
	// value: slog.Default().
	Logger *slog.Logger
	// Retry is the policy of the write transactions (retry.Tx) and of the
	// schema probes (retry.Do). Zero value: retry's defaults (3 attempts,
	// backoff from 10 ms, the process-wide budget).
	Retry retry.Policy
	// MaxAmbiguousReplays bounds how many times Accept runs a batch again
	// after its COMMIT had an unknown outcome (retry.ErrAmbiguousCommit).
	// Replaying is safe because the writes are idempotent. Zero value: 3.
	// Negative: never replay (the ambiguous error is returned).
	MaxAmbiguousReplays int
	// MaxTxRows bounds the rows (of zipkin_spans and zipkin_annotations
	// together) one write transaction carries: Accept writes a larger
	// batch as several transactions in turn, each idempotent, so that an
	// engine whose cost grows sharply with a transaction's rows (the
	// embedded go-mysql-server) stores it within an attempt and frees its
	// connection in between. A failed Accept may then have stored part of
	// the batch; writing it again stores each row once. The rows of one
	// span may be split. Zero value: no bound (one transaction per Accept).
	MaxTxRows int
	// ConcurrentWrites bounds the write transactions the store runs at
	// once. Accept calls that arrive while that many run wait, and the
	// calls that waited together are then written in one transaction
	// (their spans in one batch): a write costs the database about the
	// same per transaction whatever its size, so small batches from
	// several writers cost far less together than one transaction each.
	// Each call still returns once its own spans are stored (or with the
	// error of the transaction that carried them). Zero value: 2.
	// Negative: no bound and no combining (one transaction per Accept).
	ConcurrentWrites int

	// DisableDependencyAggregation turns the dependency aggregator off: the
	// store then neither queues what it writes for the aggregator nor
	// counts links into zipkin_dependencies, and GetDependencies reads the table as it
	// is (filled by Zipkin's zipkin-dependencies job, say) or links the
	// spans of the window on demand when it has no row for it. Default
	// false: aggregation runs whenever its tables exist (CreateSchema, the
	// command's -init-schema, creates them) — do not also run the
	// zipkin-dependencies job on the same days, whose rows it would add to.
	DisableDependencyAggregation bool
	// DependencyFoldInterval is the least time between two drains of the
	// dependency aggregator's queue into zipkin_dependencies, each run by
	// the write that finds the interval passed (at most 8 transactions of
	// 64 queued writes; RunDependencyAggregation drains the rest on its
	// timer). Zero value: 3 s. Negative: only FoldDependencies,
	// DrainDependencies and RunDependencyAggregation drain.
	// GetDependencies counts queued writes whatever the interval.
	DependencyFoldInterval time.Duration
	// ReadDB, when set, serves the query API's reads (traces, names, tags,
	// dependencies): a replica.Router's Reader, whose replicas then answer
	// them. Writes, schema detection and retention stay on the store's db.
	// Zero value: the store's db.
	ReadDB *sql.DB
}

// Store is a Zipkin span store on one *sql.DB. It is safe for concurrent
// use. Create one with Open.
type Store struct {
	db        *sql.DB
	read      *sql.DB // the query API's reads: Options.ReadDB, or db
	opts      Options
	feat      features
	log       *slog.Logger
	maxPacket int64     // the server's max_allowed_packet, read once by Open
	w         *writeSQL // the INSERT statements for the detected features
	stats     writeCounters
	add       additions // optional tables (additions.go)
	deps      depState  // dependency aggregation (deps_aggregate.go)
	groups    writeGroups
}

// features is what schema detection found (Zipkin's Has* probes).
type features struct {
	traceIDHigh       bool // zipkin_spans/annotations.trace_id_high
	ipv6              bool // zipkin_annotations.endpoint_ipv6
	errorCount        bool // zipkin_dependencies.error_count
	remoteServiceName bool // zipkin_spans.remote_service_name
	dependencies      bool // zipkin_dependencies exists
}

// Open returns a Store on db after detecting which of Zipkin's schema
// features the database has (once; restart to see an ALTER TABLE) and
// reading max_allowed_packet. It returns ErrNoSchema when the Zipkin tables
// do not exist, and an error when the database cannot be reached.
func Open(ctx context.Context, db *sql.DB, opts Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("mysqlstore: Open needs a *sql.DB, got nil")
	}
	s := &Store{db: db, read: db, opts: opts, log: opts.Logger}
	if opts.ReadDB != nil {
		s.read = opts.ReadDB
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if err := s.detect(ctx); err != nil {
		return nil, err
	}
	s.detectAdditions(ctx)
	s.detectAggregation(ctx)
	s.w = newWriteSQL(s.feat)
	return s, nil
}

// Check reports whether the store can serve requests: it runs Zipkin's
// health query (one row of zipkin_spans).
func (s *Store) Check(ctx context.Context) error {
	return s.runProbe(ctx, probeSpans)
}

// Features reports the schema features Open detected, by column name.
type Features struct {
	TraceIDHigh       bool // zipkin_spans/zipkin_annotations.trace_id_high: 128-bit trace IDs
	RemoteServiceName bool // zipkin_spans.remote_service_name
	IPv6              bool // zipkin_annotations.endpoint_ipv6
	Dependencies      bool // table zipkin_dependencies exists
	ErrorCount        bool // zipkin_dependencies.error_count
}

// Features returns what schema detection found.
func (s *Store) Features() Features {
	return Features{
		TraceIDHigh:       s.feat.traceIDHigh,
		RemoteServiceName: s.feat.remoteServiceName,
		IPv6:              s.feat.ipv6,
		Dependencies:      s.feat.dependencies,
		ErrorCount:        s.feat.errorCount,
	}
}

// Stats are the write path's counters since Open.
type Stats struct {
	Batches          int64 // Accept calls that stored their spans
	Spans            int64 // spans in those batches
	SpanRows         int64 // zipkin_spans rows built from the spans given to Accept (an upsert of an existing row counts)
	AnnotationRows   int64 // zipkin_annotations rows built likewise (ignored duplicates count)
	Statements       int64 // INSERT statements run, retries and replays included
	Failures         int64 // Accept calls that returned an error
	AmbiguousCommits int64 // commits with an unknown outcome (each replayed or returned)
	Replays          int64 // batches written again after an ambiguous commit
	Rejected         int64 // spans refused as invalid (zero trace or span ID, unknown kind)
	Deadlocks        int64 // write transactions that hit a deadlock (1213); each was retried unless the retries ran out
	LockWaitTimeouts int64 // write transactions that hit a lock wait timeout (1205), likewise
}

type writeCounters struct {
	batches, spans, spanRows, annRows, statements, failures, ambiguous, replays, rejected atomic.Int64
	deadlocks, lockWaits                                                                  atomic.Int64
}

// Stats returns the write counters.
func (s *Store) Stats() Stats {
	c := &s.stats
	return Stats{
		Batches: c.batches.Load(), Spans: c.spans.Load(), SpanRows: c.spanRows.Load(),
		AnnotationRows: c.annRows.Load(), Statements: c.statements.Load(), Failures: c.failures.Load(),
		AmbiguousCommits: c.ambiguous.Load(), Replays: c.replays.Load(), Rejected: c.rejected.Load(),
		Deadlocks: c.deadlocks.Load(), LockWaitTimeouts: c.lockWaits.Load(),
	}
}

var _ storage.Storage = (*Store)(nil)
