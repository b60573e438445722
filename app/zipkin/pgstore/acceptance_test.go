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
// lacks). Dependency links come about in the one way this store has:
// GetDependencies links the spans of the window on the fly (the
// checklist's default mode, "onDemand").
func (h *harness) acceptance() storagetest.Harness {
	return storagetest.Harness{
		Reset:        h.reset,
		Capabilities: storagetest.Capabilities{SharedSpanDebug: true},
		Open: func(t *testing.T, o storagetest.Options) storagetest.Store {
			return h.store(t, pgstore.Options{DisableStrictTraceID: o.DisableStrictTraceID,
				DisableSearch: o.DisableSearch, AutocompleteKeys: o.AutocompleteKeys})
		},
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
