package mysqlstore_test

import (
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	"github.com/sqlpool/sqlpool/app/zipkin/storage/storagetest"
)

// TestAcceptance runs Zipkin's storage acceptance checklist
// (zipkin/storage/storagetest, reference §5: the zipkin-tests ITs that
// ITMySQLStorage runs) against the store on the sqlpool pool: on the
// embedded server always, on MariaDB when MYSQL_TEST_DSN is set (with
// SQLPOOL_REQUIRE_MARIADB=1 its absence fails).
func TestAcceptance(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		storagetest.Run(t, newHarness(t, srv).acceptance())
	})
}

// TestAcceptanceZipkinSchema runs the checklist on Zipkin's three tables
// alone: no schema additions, so every lookup runs Zipkin's own queries,
// and no aggregator (TestAcceptance runs it with all the additions).
func TestAcceptanceZipkinSchema(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		db := poolDB(t, freshDatabase(t, srv.dsn))
		for _, q := range mysqlstore.SchemaDDL() {
			if _, err := db.ExecContext(ctxT(t), q); err != nil {
				t.Fatalf("%.40s: %v", q, err)
			}
		}
		legacyTagLayout(t, db) // Zipkin's own tag search too
		h := &harness{srv: srv, db: db, zipkinOnly: true}
		if a := h.store(t, mysqlstore.Options{}).Additions(); a != (mysqlstore.Additions{}) {
			t.Fatalf("Additions() = %+v on Zipkin's schema, want none", a)
		}
		storagetest.Run(t, h.acceptance())
	})
}

// acceptance describes h to the checklist. Dependency links come about in
// Zipkin's two ways for MySQL and in the store's own: "onDemand" stores the
// spans with the aggregator off and the store links those of the window on
// the fly; "preAggregated" writes the links of each trace into
// zipkin_dependencies on the UTC day of the trace, as the
// zipkin-dependencies job does, and the store reads the table;
// "aggregated" stores the spans with the aggregator on (the default) but
// no write folding its queue (DependencyFoldInterval -1), and the store
// counts the writes still queued; "aggregatedFolded" is "aggregated" with FoldDependencies
// draining the queue between writes and inside every read. The aggregator
// counts traces in whole hours. Zipkin's three tables alone have no
// aggregator: only the first two run there.
func (h *harness) acceptance() storagetest.Harness {
	open := func(opts mysqlstore.Options) func(t *testing.T) storagetest.Store {
		return func(t *testing.T) storagetest.Store { return h.store(t, opts) }
	}
	sh := storagetest.Harness{
		Reset: h.reset,
		Open: func(t *testing.T, o storagetest.Options) storagetest.Store {
			return h.store(t, mysqlstore.Options{DisableStrictTraceID: o.DisableStrictTraceID,
				DisableSearch: o.DisableSearch, AutocompleteKeys: o.AutocompleteKeys})
		},
		Dependencies: []storagetest.DependencyMode{
			{Name: "onDemand", Open: open(mysqlstore.Options{DisableDependencyAggregation: true})},
			{Name: "preAggregated", Write: h.writeAggregated, Windows: storagetest.DayWindows},
		},
	}
	if !h.zipkinOnly {
		sh.Dependencies = append(sh.Dependencies, storagetest.DependencyMode{
			Name: "aggregated",
			Open: func(t *testing.T) storagetest.Store {
				s := h.store(t, mysqlstore.Options{DependencyFoldInterval: -1})
				if !s.DependencyAggregation() {
					t.Fatal("DependencyAggregation() = false on a schema made by CreateSchema")
				}
				return s
			},
			Drain: func(t *testing.T, s storagetest.Store) {
				t.Helper()
				if _, err := s.(*mysqlstore.Store).FoldDependencies(ctxT(t)); err != nil {
					t.Fatalf("FoldDependencies: %v", err)
				}
				if n := count(t, h.db, "zipkin_dependency_queue"); n != 0 {
					t.Fatalf("zipkin_dependency_queue has %d rows after FoldDependencies, want 0", n)
				}
			},
			DrainedName: "aggregatedFolded",
			Windows:     storagetest.HourWindows,
		})
	}
	if h.srv.name == "embedded" {
		// go-mysql-server's in-memory tables slow down as they grow: 1,000
		// traces took 34 s alone (about 5 min under -race on a loaded
		// machine). MariaDB runs Zipkin's sizes; the embedded server checks
		// the same promises (limit counts traces, no hidden cap at the
		// default 100; 300 links, above any default limit) on 150 traces.
		sh.ManyTraces, sh.ManyLinks = 150, 150
	}
	return sh
}

// writeAggregated links the traces of spans (grouped on the low 64 bits of
// their IDs, as the job does) and upserts the links per UTC day of each
// trace's first timestamp, so that processing a trace again overwrites.
func (h *harness) writeAggregated(t *testing.T, _ storagetest.Store, spans []model.Span) {
	t.Helper()
	byTrace := map[uint64][]model.Span{}
	var order []uint64
	for _, sp := range spans {
		if _, ok := byTrace[sp.TraceID.Low]; !ok {
			order = append(order, sp.TraceID.Low)
		}
		byTrace[sp.TraceID.Low] = append(byTrace[sp.TraceID.Low], storagetest.Clone(sp))
	}
	byDay := map[string][][]model.Span{}
	for _, low := range order {
		tr := byTrace[low]
		first := int64(0)
		for _, sp := range tr {
			if sp.Timestamp != 0 && (first == 0 || sp.Timestamp < first) {
				first = sp.Timestamp
			}
		}
		d := time.UnixMicro(first).UTC().Format(time.DateOnly)
		byDay[d] = append(byDay[d], tr)
	}
	for d, traces := range byDay {
		for _, l := range mysqlstore.LinkTraces(traces) {
			if _, err := h.db.ExecContext(ctxT(t), "INSERT INTO zipkin_dependencies (day, parent, child, call_count, error_count) "+
				"VALUES (?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE call_count = VALUES(call_count), error_count = VALUES(error_count)",
				d, l.Parent, l.Child, l.CallCount, l.ErrorCount); err != nil {
				t.Fatalf("writing zipkin_dependencies: %v", err)
			}
		}
	}
}
