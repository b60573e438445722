package pgstore_test

import (
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/pgstore"
	"github.com/sqlpool/sqlpool/app/zipkin/storage/storagetest"
)

// TestAcceptance runs Zipkin's storage acceptance checklist
// (zipkin/storage/storagetest, reference §5: the zipkin-tests ITs that
// ITMySQLStorage runs) against the store on the sqlpool pool, on
// PostgreSQL with pgx's driver and with lib/pq's.
func TestAcceptance(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		storagetest.Run(t, newHarness(t, srv).acceptance())
	})
}

// acceptance describes h to the checklist. Every fragment has a row of its
// own, so the client and the shared server half of a span keep their own
// debug flag (Capabilities.SharedSpanDebug, which Zipkin's MySQL schema
// lacks). Dependency links come from the store's queue: "aggregated"
// stores spans with no drain in Accept (DependencyDrainInterval -1), so
// GetDependencies answers from the queued writes; "aggregatedDrained"
// drains the queue between writes and inside every read. Traces count in
// whole hours.
func (h *harness) acceptance() storagetest.Harness {
	return storagetest.Harness{
		Reset:        h.reset,
		Capabilities: storagetest.Capabilities{SharedSpanDebug: true},
		Open: func(t *testing.T, o storagetest.Options) storagetest.Store {
			return h.store(t, pgstore.Options{DisableStrictTraceID: o.DisableStrictTraceID,
				DisableSearch: o.DisableSearch, AutocompleteKeys: o.AutocompleteKeys})
		},
		Dependencies: []storagetest.DependencyMode{{
			Name: "aggregated",
			Open: func(t *testing.T) storagetest.Store {
				return h.store(t, pgstore.Options{DependencyDrainInterval: -1})
			},
			Drain: func(t *testing.T, s storagetest.Store) {
				t.Helper()
				if _, err := s.(*pgstore.Store).DrainDependencies(ctxT(t)); err != nil {
					t.Fatalf("DrainDependencies: %v", err)
				}
				var n int
				if err := h.db.QueryRowContext(ctxT(t), "SELECT count(*) FROM zipkin_dependency_queue").Scan(&n); err != nil || n != 0 {
					t.Fatalf("zipkin_dependency_queue: %d rows after DrainDependencies (%v), want 0", n, err)
				}
			},
			DrainedName: "aggregatedDrained",
			Windows:     storagetest.HourWindows,
		}},
	}
}

// TestAcceptanceWalkingTerms runs the checklist with every annotation-query
// term taken as frequent: GetTraces walks the newest fragments of the
// service (or of the window) and checks the terms on them, as it does on a
// large table for a term carried by many fragments.
func TestAcceptanceWalkingTerms(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		h := newHarness(t, srv)
		a := h.acceptance()
		open := a.Open
		a.Open = func(t *testing.T, o storagetest.Options) storagetest.Store {
			s := open(t, o)
			pgstore.WalkAllTerms(s.(*pgstore.Store))
			return s
		}
		storagetest.Run(t, a)
	})
}
