// Package storagetest is Zipkin's storage acceptance checklist (the
// zipkin-tests ITs: ITSpanStore, ITTraces, ITServiceAndSpanNames,
// ITAutocompleteTags, ITStrictTraceIdFalse, ITSearchEnabledFalse,
// ITDependencies and the heavy variants) written once against the
// interfaces of zipkin/storage, for every span store's tests to run.
//
// A store's test describes its storage in a Harness (how to empty it, how
// to open a store with Zipkin's settings, how dependency links come about
// and how to drain background work) and calls Run:
//
//	func TestAcceptance(t *testing.T) {
//		storagetest.Run(t, storagetest.Harness{Reset: reset, Open: open})
//	}
//
// Each check runs as a subtest named after Zipkin's test method, on
// emptied storage; dependency checks have a subtest per DependencyMode.
// The data is relative to Today (UTC midnight), as in Zipkin's ITs: a
// default request ends at Today+Day and looks back 2·Day with limit 100,
// spans are accepted in chunks of 100, and traces are compared after
// Zipkin's Trace.merge, because stores return merged traces.
//
// The package also exports the fixtures and assertions the checks use, so
// that a store's own tests can speak the same language.
package storagetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/storage"
)

// Store is what the checks use of a span store: writes, the query API and
// autocomplete (not the health check).
type Store interface {
	storage.SpanConsumer
	storage.SpanStore
	storage.AutocompleteTags
}

// Options are the Zipkin settings a check opens a store with. The zero
// value is Zipkin's defaults: strict trace IDs, search on, no autocomplete
// keys.
type Options struct {
	// DisableStrictTraceID matches trace IDs on their low 64 bits
	// (STRICT_TRACE_ID=false).
	DisableStrictTraceID bool
	// DisableSearch turns off searches, names and autocomplete
	// (SEARCH_ENABLED=false).
	DisableSearch bool
	// AutocompleteKeys are the tag keys autocomplete serves
	// (AUTOCOMPLETE_KEYS).
	AutocompleteKeys []string
}

// Harness describes one store's storage to Run.
type Harness struct {
	// Reset empties the storage, so that the next store opened sees none of
	// what earlier checks wrote. Every check calls it first. Required.
	Reset func(t *testing.T)
	// Open returns a store with opts on the storage. Required.
	Open func(t *testing.T, opts Options) Store
	// Dependencies are the ways the store arrives at dependency links;
	// every ITDependencies check runs on each, as a subtest named after
	// it. Nil: one mode, "onDemand", that accepts the spans on a store
	// opened with zero Options.
	Dependencies []DependencyMode
	// ManyTraces is how many traces getTraces_manyTraces stores. Zero:
	// Zipkin's 1,000. A server too slow for that sets fewer (at least 101,
	// so that the default limit of 100 still shows).
	ManyTraces int
	// ManyLinks is how many traces, of two links each, manyLinks stores.
	// Zero: Zipkin's 256.
	ManyLinks int
	// Capabilities select the checks a store legitimately answers
	// differently. Zero value: Zipkin's MySQL semantics.
	Capabilities
	// KnownGaps names checks the store is known to fail, each with why;
	// they are skipped with that reason so that the rest runs, and a name
	// that is no check fails Run. It is for a store that does not yet meet
	// the checklist (each entry is a bug to fix), not for the legitimate
	// differences Capabilities select. Default none.
	KnownGaps map[string]string

	mode *DependencyMode // the mode a dependency check runs in
}

// Capabilities are the few checks a store may legitimately fail, because
// Zipkin itself disables them for some storage. Each is off in the zero
// value, which is what Zipkin's MySQL storage supports.
type Capabilities struct {
	// SharedSpanDebug is set when the client and the shared server half of
	// a span keep their own debug flag, so that
	// getTraces_differentiatesDebugFromShared and
	// getTrace_differentiatesDebugFromShared run. Zipkin disables both for
	// MySQL, whose schema has one row, and so one debug flag, per span ID;
	// when unset they are skipped with that reason.
	SharedSpanDebug bool
}

// DependencyMode is one way a store arrives at dependency links: linked on
// demand from the spans, read from links written by a batch job, counted
// by an aggregator as spans arrive, or by one whose queue has been drained.
type DependencyMode struct {
	// Name names the mode's subtests. Required.
	Name string
	// Open opens the store the mode's checks use, on emptied storage. Nil:
	// Harness.Open with zero Options.
	Open func(t *testing.T) Store
	// Write stores spans as the mode does: accepted, or loaded by a batch
	// job. Nil: Accept.
	Write func(t *testing.T, s Store, spans []model.Span)
	// Drain, when non-nil, completes the store's background work (for
	// example folds an aggregator's queue), and fails t if work remains.
	// The mode's checks then run twice: as Name, never drained, so the
	// store must answer exactly right after the writes; and as
	// DrainedName, with Drain before every write but the first and inside
	// every GetDependencies, whose answers before and after it must agree
	// — so the links are checked queued, partly drained and drained.
	Drain func(t *testing.T, s Store)
	// DrainedName names the drained subtests. Empty: Name + "Drained".
	DrainedName string
	// Windows is which traces a GetDependencies window holds in this
	// mode (dependencies_windows checks it). Zero value: SpanWindows.
	Windows Windows
}

// Windows is how a dependency mode maps a GetDependencies window to the
// traces whose links it returns.
type Windows int

const (
	// SpanWindows: the traces with a span in the window, each linked
	// whole (Zipkin's on-demand linking).
	SpanWindows Windows = iota
	// HourWindows: a trace counts in the hour of its earliest span and a
	// window is taken in whole hours (mysqlstore's aggregator), so that a
	// window on hour boundaries has exactly the links of the traces that
	// start in it, even when their later spans fall in the next hour.
	HourWindows
	// DayWindows: a trace counts on the UTC day of its earliest span and a
	// window is taken in whole days (Zipkin's zipkin-dependencies job).
	DayWindows
)

// String returns the constant's name.
func (w Windows) String() string {
	switch w {
	case SpanWindows:
		return "SpanWindows"
	case HourWindows:
		return "HourWindows"
	case DayWindows:
		return "DayWindows"
	}
	return fmt.Sprintf("Windows(%d)", int(w))
}

// Run runs the checklist on h: each check a subtest of t, on storage h.Reset
// emptied.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Reset == nil || h.Open == nil {
		t.Fatal("storagetest.Harness needs Reset and Open")
	}
	known := map[string]bool{}
	for _, list := range [][]check{spanChecks, dependencyChecks, nameChecks} {
		for _, c := range list {
			known[c.name] = true
			t.Run(c.name, func(t *testing.T) {
				if why, ok := h.KnownGaps[c.name]; ok {
					t.Skip("known gap of this store: " + why)
				}
				if c.skip != nil {
					if why := c.skip(&h); why != "" {
						t.Skip(why)
					}
				}
				if c.deps != nil {
					runDependencyCheck(t, &h, c.deps)
					return
				}
				h.Reset(t)
				c.run(t, &h)
			})
		}
	}
	for name := range h.KnownGaps {
		if !known[name] {
			t.Errorf("Harness.KnownGaps names %q, which is no check of the checklist", name)
		}
	}
}

// check is one item of the checklist: run on emptied storage, or, for an
// ITDependencies item, deps once per dependency mode.
type check struct {
	name string
	skip func(h *Harness) string // why the check does not run on h, or ""
	run  func(t *testing.T, h *Harness)
	deps func(t *testing.T, h *Harness, s Store, write func(...model.Span))
}

func skipAlways(why string) func(*Harness) string { return func(*Harness) string { return why } }

// open opens a store with opts on h's storage.
func (h *Harness) open(t *testing.T, opts Options) Store {
	t.Helper()
	return h.Open(t, opts)
}

// Ctx is a context for one test's calls, canceled at its end (after 5
// minutes at most).
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
