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

	"github.com/sqlpool/sqlpool/zipkin/storage"
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
}

// Store is a Zipkin span store on one *sql.DB. It is safe for concurrent
// use. Create one with Open.
type Store struct {
	db   *sql.DB
	opts Options
	feat features
}

var _ storage.Storage = (*Store)(nil)

// features is what schema detection found (Zipkin's Has* probes).
type features struct {
	traceIDHigh       bool // zipkin_spans/annotations.trace_id_high
	ipv6              bool // zipkin_annotations.endpoint_ipv6
	errorCount        bool // zipkin_dependencies.error_count
	remoteServiceName bool // zipkin_spans.remote_service_name
	dependencies      bool // zipkin_dependencies exists
}

// ErrNoSchema is returned by Open when the Zipkin tables do not exist.
var ErrNoSchema = errors.New("mysqlstore: Zipkin tables not found")

// Open returns a Store on db after detecting which of Zipkin's schema
// features the database has.
func Open(ctx context.Context, db *sql.DB, opts Options) (*Store, error) {
	s := &Store{db: db, opts: opts}
	if err := s.detect(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Check pings the database.
func (s *Store) Check(ctx context.Context) error { return s.db.PingContext(ctx) }
