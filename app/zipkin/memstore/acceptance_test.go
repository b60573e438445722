package memstore_test

import (
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/memstore"
	"github.com/sqlpool/sqlpool/app/zipkin/storage/storagetest"
)

// TestAcceptance runs Zipkin's storage acceptance checklist
// (zipkin/storage/storagetest) on the in-memory store: the reference run,
// without a database server. The client and server halves of a shared
// span are kept apart, each with its own debug flag. The checks in
// KnownGaps are where the store still answers differently from
// zipkin/mysqlstore.
func TestAcceptance(t *testing.T) {
	const (
		viaRemote = "a service matches spans where it is only the remote side, so their durations and annotations count for it"
	)
	storagetest.Run(t, storagetest.Harness{
		Reset: func(*testing.T) {}, // every check opens a new, empty store
		Open: func(_ *testing.T, o storagetest.Options) storagetest.Store {
			return memstore.New(memstore.Options{DisableStrictTraceID: o.DisableStrictTraceID,
				DisableSearch: o.DisableSearch, AutocompleteKeys: o.AutocompleteKeys})
		},
		// Links are counted in whole hours, as mysqlstore's aggregator does.
		Dependencies: []storagetest.DependencyMode{{Name: "onDemand", Windows: storagetest.HourWindows}},
		Capabilities: storagetest.Capabilities{SharedSpanDebug: true},
		KnownGaps: map[string]string{
			"getTraces_duration":   viaRemote,
			"getTraces_annotation": viaRemote,
		},
	})
}
